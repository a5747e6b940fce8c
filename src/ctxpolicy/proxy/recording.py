"""One run directory per proxied conversation, in the run-record format (docs/architecture.md).

``messages.jsonl`` and ``calls.jsonl`` grow as calls are made (the agent harness's
``RunRecorder``), and ``run.json`` is rewritten atomically after every call, marked open
(``complete: false``, ``proxy.open: true``) until the conversation ends; then
``trajectory.json`` (the client's last history) and the final ``run.json`` are written, when the
conversation expires, is evicted or ended on demand, or the proxy shuts down. An evicted
conversation that its client takes up again goes on in the same run directory (``reopen``: calls
appended, run.json marked open again and rewritten, ``proxy.evictions`` counting the times). Identity:
``track: proxy``, ``benchmark: proxy``, ``task_id`` = the conversation id, ``attempt: 1``.
Outcome ``not_graded`` (the proxy cannot tell how the agent's run ended), or ``error`` when its
last call failed; ``attach_verdict`` grades one later. Nothing here ever sees the upstream API key.
"""

from __future__ import annotations

import functools
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.agent.messages import api_message
from ctxpolicy.agent.record import RunRecorder
from ctxpolicy.agent.runner import SCHEMA_VERSION, RunIdentity, totals_of
from ctxpolicy.agent.versions import hardware, software_versions
from ctxpolicy.study.grid import Cell
from ctxpolicy.policies import PolicySpec
from ctxpolicy.proxy.conversations import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_CONVERSATIONS
from ctxpolicy.rundir import (
    RUN_JSON,
    TRAJECTORY_JSON,
    CallRecord,
    RunRecordError,
    read_calls,
    read_message_store,
    read_run_json,
    read_verdict,
    run_dir_name,
    write_record,
    write_run_json,
    write_verdict,
)
from ctxpolicy.threshold_settings import FIXED
from ctxpolicy.tokens import count_message

TRACK = "proxy"
BENCHMARK = "proxy"
TRAJECTORY_FORMAT = "ctxpolicy-proxy-1"
NOT_GRADED = "not_graded"  # the outcome of a conversation nobody graded (yet)
VERDICT_HARNESS = "manual"  # verdict.json's harness for a verdict attached to a proxy run


@functools.cache
def _host() -> tuple[dict, dict]:
    """The proxy's software versions (less mini-swe-agent's, which is the client's business) and
    host, computed once: run.json is rewritten after every call."""
    versions = {**software_versions(), "mini_swe_agent": None}
    return versions, hardware()


@dataclass(frozen=True)
class ProxySettings:
    """What every conversation of one proxy shares (recorded in run.json)."""

    policy: PolicySpec
    threshold: int | None
    upstream_url: str
    upstream_model: str | None
    summarizer_model: str | None
    cache_block_tokens: int = 16
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    max_conversations: int = DEFAULT_MAX_CONVERSATIONS
    merge_same_role: bool = False

    @property
    def cell(self) -> str:
        return Cell(
            TRACK,
            BENCHMARK,
            self.upstream_model or "upstream",
            str(self.policy),
            FIXED if self.policy.needs_threshold else None,
            TRACK,
            self.summarizer_model,
        ).slug


def run_dir_for(root: Path, settings: ProxySettings, conversation_id: str) -> Path:
    return Path(root) / settings.cell / run_dir_name(conversation_id, 1)


def free_conversation_id(root: Path, settings: ProxySettings, taken: set[str]):
    """A ``new_id`` for ``ConversationStore.claim``: ``stem-N`` with no run directory yet."""

    def new_id(stem: str) -> str:
        n = 1
        while f"{stem}-{n}" in taken or run_dir_for(root, settings, f"{stem}-{n}").exists():
            n += 1
        taken.add(f"{stem}-{n}")
        return f"{stem}-{n}"

    return new_id


class ConversationRecord:
    """The run directory of one conversation, from its first call to its run.json."""

    def __init__(self, run_dir: Path, conversation_id: str, settings: ProxySettings, front_door: str):
        self.run_dir = Path(run_dir)
        self.conversation_id = conversation_id
        self.settings = settings
        self.front_door = front_door
        self.recorder = RunRecorder(self.run_dir, count_message)
        self.start = time.time()  # the first request (reset by ``request_seen``)
        self.last_answer: float | None = None  # when the last call ended
        self.model: str | None = settings.upstream_model
        self.mode = "text"
        self.user_agent: str | None = None
        self.server: dict | None = None
        self.requests = self.rewrites = 0
        self.llm_s = 0.0
        self.steps = 0
        self.last_status = "ok"
        self.last_error: str | None = None
        self.finished = False
        self.ended: str | None = None
        self.evictions = 0  # times the conversation was evicted and resumed into this run directory
        self._ids: dict[int, tuple[dict, str]] = {}

    @classmethod
    def reopen(
        cls, run_dir: Path, conversation_id: str, settings: ProxySettings
    ) -> tuple[ConversationRecord, list[dict]] | None:
        """The record of a conversation that was evicted, re-opened to go on (calls appended,
        run.json rewritten, marked open again), and the working context its last call sent; None
        when the folder holds no evicted conversation of this proxy's cell that could go on (it is
        missing, unreadable, not evicted, or graded since)."""
        run_dir = Path(run_dir)
        try:
            record = read_run_json(run_dir)
            proxy, timing = record.get("proxy"), record.get("timing")
            if not (isinstance(proxy, dict) and proxy.get("ended") == "evicted" and record.get("complete") is True):
                return None
            if (record.get("identity") or {}).get("cell") != settings.cell or read_verdict(run_dir) is not None:
                return None
            calls = read_calls(run_dir)
            store = read_message_store(run_dir)
            agent = [c for c in calls if c.get("kind") == "agent"]
            context = [store[mid]["message"] for mid in agent[-1]["message_ids"]] if agent else []
            recorded = record.get("settings") or {}
            versions = record.get("versions") or {}
            again = cls(run_dir, conversation_id, settings, str(recorded.get("front_door") or "openai"))
            again.start = float(timing["start"])
            again.last_answer = float(timing["end"]) if calls else None
            again.llm_s = float(timing.get("llm_s") or 0.0)
            name = (versions.get("model") or {}).get("name")
            again.model = settings.upstream_model or (name if name and name != "unknown" else None)
            again.mode = recorded.get("mode") or "text"
            again.user_agent = (versions.get("client") or {}).get("user_agent")
            again.requests, again.rewrites = int(proxy["requests"]), int(proxy.get("history_rewrites") or 0)
            again.evictions = int(proxy.get("evictions") or 0) + 1
            again.steps = max((int(c["step"]) for c in agent), default=0)
            if agent:
                again.last_status, again.last_error = agent[-1].get("status") or "ok", agent[-1].get("error")
        except (RunRecordError, OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None
        again.recorder.resume_from(calls, store)
        return again, context

    def request_seen(self, *, tools: bool = False, user_agent: str | None = None) -> None:
        """What one request says about the client: ``tools`` offered make the mode ``tool``; its
        ``User-Agent`` is recorded as the client's identity."""
        if tools:
            self.mode = "tool"
        if user_agent:
            self.user_agent = user_agent[:200]

    def store(self, sent: list[dict]) -> list[str]:
        """The ids of the messages of one request (each stored once); a tool message or tool call
        makes the conversation's mode ``tool``."""
        if self.mode == "text" and any(m.get("role") == "tool" or m.get("tool_calls") for m in sent):
            self.mode = "tool"
        return self._store(sent)

    def store_reply(self, reply: dict) -> str:
        """The id of the model's answer to a call (stored once; the working context's cache of
        message objects is left as it is)."""
        if self.mode == "text" and reply.get("tool_calls"):
            self.mode = "tool"
        return self.recorder.store([reply])[0]

    def record_call(self, call: CallRecord) -> None:
        """One ``calls.jsonl`` line (``index`` is given here)."""
        if call.kind == "agent":
            self.steps = max(self.steps, call.step)
            self.last_status, self.last_error = call.status, call.error
            if call.model and not self.settings.upstream_model:
                self.model = call.model
        self.llm_s += call.latency_s
        self.last_answer = max(self.last_answer or call.end, call.end)
        if self.recorder.closed:  # a call that ended after its conversation did: still recorded
            self.recorder = self.recorder.reopened()
        self.recorder.record_call(call)

    def checkpoint(self, *, requests: int, rewrites: int, server: dict) -> Path:
        """run.json as it stands, marked open (rewritten after every call; atomic, and durable only
        once the conversation has ended: an open record is as durable as the call lines, which are
        flushed, not fsynced)."""
        self.requests, self.rewrites, self.server = requests, rewrites, server
        return write_run_json(self.run_dir, self._run_record(ended=self.ended), durable=self.ended is not None)

    def _store(self, sent: list[dict]) -> list[str]:
        """``RunRecorder.store``, hashing only messages this record has not seen as objects: the
        working context keeps its unchanged messages as the same objects from call to call. The
        cache holds the messages it names, so an ``id()`` in it is never reused by another object."""
        fresh = [m for m in sent if id(m) not in self._ids]
        fresh_ids = iter(self.recorder.store(fresh)) if fresh else iter(())
        ids, cache = [], {}
        for message in sent:
            known = self._ids.get(id(message))
            mid = known[1] if known is not None else next(fresh_ids)
            cache[id(message)] = (message, mid)
            ids.append(mid)
        self._ids = cache  # only the last context: memory stays bounded by it
        return ids

    def finish(self, history: list[dict], *, requests: int, rewrites: int, ended: str, server: dict) -> Path:
        """Write trajectory.json, then the final run.json (complete); once per ending."""
        if self.finished:
            return self.run_dir / RUN_JSON
        self.finished, self.ended = True, ended
        self.recorder.close()
        self.requests, self.rewrites, self.server = requests, rewrites, server
        write_record(
            self.run_dir / TRAJECTORY_JSON,
            {
                "trajectory_format": TRAJECTORY_FORMAT,
                "messages": [api_message(m) for m in history],
                "info": {"ctxpolicy": {"identity": asdict(self.identity())}},
            },
        )
        return write_run_json(self.run_dir, self._run_record(ended=ended))

    def _run_record(self, ended: str | None) -> dict:
        """The run.json record: open (``ended`` None) or final. Wall time runs from the first
        request to the last answer, never to the proxy's shutdown or the idle expiry."""
        versions, host = _host()
        end = self.last_answer if self.last_answer is not None else self.start
        failed = self.last_status != "ok"
        wall = max(0.0, end - self.start)
        return {
            "schema_version": SCHEMA_VERSION,
            "complete": ended is not None,
            "identity": asdict(self.identity()),
            "outcome": "error" if failed else NOT_GRADED,
            "error": f"upstream failed on the last call: {self.last_error}" if failed else None,
            "submission": "",
            "timing": {
                "start": self.start,
                "end": end,
                "wall_s": wall,
                "setup_s": 0.0,
                "agent_s": wall,
                "llm_s": self.llm_s,
                "tool_s": 0.0,
            },
            # the proxy cannot see an agent's format errors: unknown, not 0
            "totals": totals_of(self.recorder.calls, self.steps, None),
            "settings": {
                "mode": self.mode,
                "cache_block_tokens": self.settings.cache_block_tokens,
                "front_door": self.front_door,
                "idle_timeout_s": self.settings.idle_timeout_s,
                "max_conversations": self.settings.max_conversations,
                "merge_same_role": self.settings.merge_same_role,
            },
            "versions": {
                **versions,
                "model": {
                    "name": self.model or "unknown",
                    "file": None,
                    "sha256": None,
                    "hub_id": None,
                    "revision": None,
                },
                "server": self.server or {"kind": "upstream", "version": None, "url": self.settings.upstream_url},
                "summarizer": None,
                "client": {"user_agent": self.user_agent},
            },
            "hardware": host,
            "trajectory_file": TRAJECTORY_JSON,
            "traceback": None,
            "proxy": {
                "requests": self.requests,
                "history_rewrites": self.rewrites,
                "ended": ended,
                "open": ended is None,
                "evictions": self.evictions,
            },
        }

    def identity(self) -> RunIdentity:
        policy = self.settings.policy
        return RunIdentity(
            benchmark=BENCHMARK,
            cohort=TRACK,
            task_id=self.conversation_id,
            stratum=TRACK,
            model=self.model or "unknown",
            policy=str(policy),
            primitive=policy.primitive,
            trigger=policy.trigger,
            threshold_setting=FIXED if policy.needs_threshold else None,
            threshold_tokens=self.settings.threshold if policy.needs_threshold else None,
            depth=policy.depth,
            summarizer=self.settings.summarizer_model,
            attempt=1,
            seed=0,
            cell=self.settings.cell,
            track=TRACK,
        )


class VerdictError(CtxpolicyError, ValueError):
    """A verdict that cannot be attached: one line naming the run and why."""


def attach_verdict(run_dir: Path, resolved: bool, note: str | None = None) -> Path:
    """Grade an ended proxy conversation: write its ``verdict.json`` (harness ``manual``) and make
    its outcome ``submitted``. Refuses open conversations, runs that are not the proxy's, and runs
    that already have a verdict."""
    run_dir = Path(run_dir)
    record = read_run_json(run_dir)
    if not isinstance(record, dict) or (record.get("identity") or {}).get("track") != TRACK:
        raise VerdictError(f"{run_dir / RUN_JSON}: not a proxy conversation (identity.track is not {TRACK!r})")
    if record.get("complete") is not True:
        raise VerdictError(f"{run_dir / RUN_JSON}: the conversation is still open; end it first")
    if read_verdict(run_dir) is not None:
        raise VerdictError(f"{run_dir}: already has a verdict.json")
    verdict = {"resolved": bool(resolved), "harness": VERDICT_HARNESS, "report": {"note": note}, "log": ""}
    path = write_verdict(run_dir, verdict)
    if record.get("outcome") == NOT_GRADED:
        write_run_json(run_dir, {**record, "outcome": "submitted"})
    return path
