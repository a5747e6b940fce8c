"""The history before and after each compression step, rebuilt from a run's records.

``calls.jsonl`` names the messages of every prompt and the message store holds each distinct
message once (both read through ``ctxpolicy.rundir``'s one reader, schema versions 1 and 2). The prompt of an agent call that carries events is the
history *after* the step's compression. The history *before* it is the previous agent prompt
followed by what the agent added since (its reply and the observation): the messages at the
end of this prompt that neither the previous prompt held nor a policy wrote. What a policy
compressed away before it was ever sent (a reply summarised at the very step it arrived) is in
no prompt and so in no window: a known blind spot (docs/analysis.md).

Replies come from ``trajectory.json`` (the agent's whole history, nothing compressed) when it
holds one assistant message per successful agent call: the i-th is the reply of the i-th. Else
they are found like the history: an assistant message the agent added before one agent call is
the reply of the agent call before it (by position, so a reply repeated word for word, which
the content-addressed store holds once, still counts each time); the last reply and replies a
policy removed before they were ever sent are then missing. Proxy records name each answered
call's reply (``reply_id``), the last one included: used when the trajectory falls short.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy import rundir
from ctxpolicy.policies.history import marker_of
from ctxpolicy.rundir import CALL_KINDS, CALLS_JSONL


class RecordError(CtxpolicyError, ValueError):
    """A run record that cannot be read; the message is one line naming file and field."""


@dataclass
class Step:
    """One agent call with compression events: its step, events and the two histories."""

    call_index: int
    step: int
    events: list[dict]
    before_ids: list[str]
    after_ids: list[str]
    summary_calls: int = 0


@dataclass
class Transcript:
    store: dict[str, dict]
    steps: list[Step] = field(default_factory=list)
    replies: list[tuple[int, dict]] = field(default_factory=list)  # (step that produced it, message)
    agent_steps: list[int] = field(default_factory=list)

    def messages(self, ids: list[str]) -> list[dict]:
        return [self.store[i] for i in ids]


def _store(run_dir: Path) -> dict[str, dict]:
    try:
        lines = rundir.read_message_lines(run_dir)
    except rundir.RunRecordError as exc:
        raise RecordError(str(exc)) from None
    store = {}
    for number, row in enumerate(lines, 1):
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(row.get("message"), dict):
            raise RecordError(
                f"{run_dir}: message store entry {number}: field 'id' or 'message' missing or of the wrong type"
            )
        store.setdefault(row["id"], row["message"])
    return store


def _calls(run_dir: Path, store: dict[str, dict]) -> list[dict]:
    path = run_dir / CALLS_JSONL
    if not path.is_file():
        raise RecordError(f"{path}: missing")
    try:
        calls = rundir.read_calls(run_dir)
    except rundir.RunRecordError as exc:
        raise RecordError(str(exc)) from None
    for call in calls:
        where = f"{path}: call {call.get('index', '?')}"
        ids = call.get("message_ids")
        if not isinstance(ids, list):
            raise RecordError(f"{where}: field 'message_ids' is {ids!r}, not a list")
        unknown = [i for i in ids if i not in store]
        if unknown:
            raise RecordError(f"{where}: field 'message_ids' names unknown message id {unknown[0]!r}")
        if not isinstance(call.get("events") or [], list):
            raise RecordError(f"{where}: field 'events' is {call.get('events')!r}, not a list")
        if call.get("kind") not in CALL_KINDS:
            raise RecordError(f"{where}: field 'kind' is {call.get('kind')!r}, not 'agent' or 'summary'")
        if not isinstance(call.get("step"), int):
            raise RecordError(f"{where}: field 'step' is {call.get('step')!r}, not an integer")
    return calls


def _appended(previous: list[str], prompt: list[str], store: dict[str, dict]) -> list[str]:
    """What the agent added since the previous prompt: everything after it when the prompt
    extends it, else the messages at the end that are new and written by no policy."""
    if prompt[: len(previous)] == previous:
        return prompt[len(previous) :]
    known = set(previous)
    tail: list[str] = []
    for mid in reversed(prompt):
        if mid in known or marker_of(store[mid]) is not None:
            break
        tail.append(mid)
    return tail[::-1]


def read_transcript(run_dir: str | Path) -> Transcript:
    run_dir = Path(run_dir)
    store = _store(run_dir)
    transcript = Transcript(store=store)
    previous: list[str] = []
    previous_step: int | None = None
    summaries_of_step: dict[int, int] = {}
    ok_steps: list[int] = []
    named: list[str] = []  # the replies the calls name (``reply_id``, proxy records)
    for call in _calls(run_dir, store):
        if call["kind"] == "summary":
            summaries_of_step[call["step"]] = summaries_of_step.get(call["step"], 0) + 1
            continue
        prompt = call["message_ids"]
        added = _appended(previous, prompt, store)
        if previous_step is not None:
            transcript.replies += [(previous_step, store[m]) for m in added if store[m].get("role") == "assistant"]
        if call.get("events"):
            transcript.steps.append(
                Step(
                    call.get("index", -1),
                    call["step"],
                    list(call["events"]),
                    previous + added,
                    list(prompt),
                    summaries_of_step.get(call["step"], 0),
                )
            )
        previous, previous_step = list(prompt), call["step"]
        transcript.agent_steps.append(call["step"])
        if call.get("status", "ok") == "ok":
            ok_steps.append(call["step"])
            if isinstance(call.get("reply_id"), str):
                named.append(call["reply_id"])
    replies = _trajectory_replies(run_dir)
    if replies is not None and len(replies) == len(ok_steps):
        transcript.replies = list(zip(ok_steps, replies))
    elif named and all(mid in store for mid in named) and len(named) == len(ok_steps):
        transcript.replies = [(step, store[mid]) for step, mid in zip(ok_steps, named)]
    return transcript


def _trajectory_replies(run_dir: Path) -> list[dict] | None:
    """The assistant messages of the agent's whole history in order (``rundir.trajectory_messages``:
    a replay's are its source's); None when it is absent or unreadable."""
    messages = rundir.trajectory_messages(run_dir)
    if messages is None:
        return None
    return [m for m in messages if m.get("role") == "assistant"]
