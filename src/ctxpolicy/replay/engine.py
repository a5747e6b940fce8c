"""Replay one FC run through one policy: the calls the harness would have logged, in memory.

Each of the source's agent calls is one step: the messages the agent added since the previous
call are appended to a ``PolicySession``, the policy prepares the context exactly as the
harness does before a call (``calls`` = the calls made so far), and the result is logged as
that step's agent call, after the summary calls the policy made. Prompt sizes are local token
counts (``prompt_tokens`` = ``est_tokens_after``); a completion is the local size of the
source's answer, which the replay holds fixed; nothing is cached by a server (``cached_tokens``
null), so the metrics price a replay with the exact prefix simulation in local counts.

A call the policy cannot act on (no part runs before every call or on a turn count, and the
source's prompt is within the threshold: always so for FC) is the source's prompt as it is,
without running the session: most of a corpus's replays are at thresholds few of its prompts
cross, and before the first call that crosses it every such replay is the FC one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from ctxpolicy.agent.messages import api_message, message_id
from ctxpolicy.agent.record import summary_call_record
from ctxpolicy.policies import HistoryDump, PolicySession, PolicySpec, Summarizer, actions
from ctxpolicy.replay.source import SourceRun
from ctxpolicy.rundir import MIN_PIECE_CHARS, CallRecord, content_pieces
from ctxpolicy.tokens import count_message


@dataclass
class ReplayedRun:
    source: SourceRun
    policy: PolicySpec
    threshold: int | None
    calls: list[CallRecord]
    """calls.jsonl lines, indexed, in the harness's order (a step's summary calls before its agent call)."""
    messages: list[dict] = field(default_factory=list)
    """messages.jsonl lines (``id``, ``tokens``, ``message``), each id once, in first-use order."""
    content_pieces: dict[str, list] = field(default_factory=dict)
    """Message id -> its content as ``rundir.content_pieces`` (a summary request: the transcript
    repeats the history it condenses), for the messages the writer may store so."""
    start: float = 0.0
    end: float = 0.0
    summary_latency_s: float = 0.0

    @property
    def summary_models(self) -> set[str]:
        return {c.model for c in self.calls if c.kind == "summary"}


class _Store:
    """Message ids for the contexts of one replay, hashing only objects not seen before.

    The source's messages come with their ids; a policy keeps unchanged messages as the same
    objects, so only what it wrote (placeholders, summaries, summary requests) is hashed. The
    store holds every object it names, so an ``id()`` in it is never reused by another object.
    A new message that repeats the contents of ``sources`` (a summary request: the transcript of
    the history it condenses) is stored as content pieces referencing them."""

    def __init__(self, source: SourceRun):
        self._by_object: dict[int, tuple[dict, str]] = {id(m): (m, mid) for mid, m in source.store.items()}
        self._source_tokens = source.tokens
        self.lines: list[dict] = []
        self.pieces: dict[str, list] = {}
        self._written: set[str] = set()

    def ids(self, messages: list[dict], sources: list[dict] | None = None) -> list[str]:
        out = []
        for message in messages:
            known = self._by_object.get(id(message))
            if known is None:
                sent = api_message(message)
                known = (message, message_id(sent))
                self._by_object[id(message)] = known
            mid = known[1]
            if mid not in self._written:
                self._written.add(mid)
                tokens = self._source_tokens.get(mid)
                line = {
                    "id": mid,
                    "tokens": count_message(api_message(message)) if tokens is None else tokens,
                    "message": api_message(message),
                }
                self.lines.append(line)
                if sources:
                    self._piece(line, sources)
            out.append(mid)
        return out

    def _piece(self, line: dict, sources: list[dict]) -> None:
        message = line["message"]
        content = message.get("content")
        if message.get("role") == "assistant" or not isinstance(content, str) or len(content) < MIN_PIECE_CHARS:
            return
        known = ((self._by_object.get(id(m)), m.get("content")) for m in sources)
        pieces = content_pieces(content, ((k[1], c) for k, c in known if k is not None and isinstance(c, str)))
        if pieces is not None:
            self.pieces[line["id"]] = pieces


def replay_source(
    source: SourceRun,
    policy: PolicySpec,
    *,
    threshold: int | None = None,
    summarizer: Summarizer | None = None,
    dump: HistoryDump | None = None,
    step_seconds: list[float] | None = None,
) -> ReplayedRun:
    """The calls ``policy`` would have made on ``source``'s trajectory, in the run-record format.
    ``step_seconds``, when given, gets each step's duration appended (for benchmarks)."""
    start = time.time()
    settings = source.record.get("settings") or {}
    session = PolicySession(
        policy,
        threshold=threshold,
        summarizer=summarizer,
        dump=dump,
        action_format=actions.of_record(source.record),
        prefix_length=settings.get("protected_prefix"),
    )
    untriggered = _untriggered_limit(session.policy, threshold)
    store = _Store(source)
    summarizes = session.policy.needs_summarizer
    calls: list[CallRecord] = []
    absorbed = 0
    summary_s = 0.0
    clock = time.perf_counter
    for step, (call, reply) in enumerate(zip(source.agent_calls, source.reply_tokens), 1):
        began = clock()
        ids = call["message_ids"]
        added = [source.store[mid] for mid in ids[absorbed:]]
        session.append(added)
        if untriggered is not None and source.prompt_tokens[step - 1] <= untriggered:
            # the policy cannot act yet: the working context is the source's prompt, unchanged
            store.ids(added)
            absorbed = len(ids)
            calls.append(_agent_call(call, reply, step, len(calls), source.prompt_tokens[step - 1], list(ids), []))
            if step_seconds is not None:
                step_seconds.append(clock() - began)
            continue
        untriggered = None  # from the first call it may act on, the session's context is its own
        absorbed = len(ids)
        history = session.context + session.pending if summarizes else None
        turn = session.prepare(calls=step - 1)
        for summary in turn.summary_calls:
            request = store.ids(summary.request_messages, history)
            latency = max(0.0, summary.end - summary.start)
            summary_s += latency
            calls.append(
                summary_call_record(
                    summary, step=step, latency_s=latency, message_ids=request, attempts=None, index=len(calls)
                )
            )
        sent = store.ids(turn.messages)
        calls.append(
            _agent_call(call, reply, step, len(calls), turn.tokens_after, sent, turn.events, turn.tokens_before)
        )
        if step_seconds is not None:
            step_seconds.append(clock() - began)
    return ReplayedRun(
        source, session.policy, threshold, calls, store.lines, store.pieces, start, time.time(), summary_s
    )


def _untriggered_limit(policy: PolicySpec, threshold: int | None) -> float | None:
    """The prompt size up to which ``policy`` leaves a full-context prompt as it is (no stage runs
    before every call or on a turn count; a threshold part acts only above its threshold), or
    None when it may act on any call."""
    if policy.step_stages or policy.turn_stages:
        return None
    if not policy.threshold_stages:
        return math.inf
    return threshold


def _agent_call(
    call: dict,
    reply: int,
    step: int,
    index: int,
    tokens: int,
    message_ids: list[str],
    events: list[dict],
    tokens_before: int | None = None,
) -> CallRecord:
    """The replay's agent call of one step: ``tokens`` sent (``tokens_before`` before the policy ran)."""
    now = time.time()
    ok = call.get("status", "ok") == "ok"
    return CallRecord.answered(
        index=index,
        step=step,
        start=now,
        end=now,
        latency_s=0.0,
        status="ok" if ok else "error",
        error=None if ok else call.get("error"),
        prompt_tokens=tokens,
        completion_tokens=reply,
        cached_tokens=None,
        est_tokens_before=tokens if tokens_before is None else tokens_before,
        est_tokens_after=tokens,
        message_ids=message_ids,
        events=events,
    )
