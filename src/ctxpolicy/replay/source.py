"""A recorded full-context run as replay needs it: the agent's prompts and the local size of each answer.

Under FC every prompt extends the one before it (the working context is the whole history), so
the messages the agent added between two calls are the later prompt's tail. The answer of the
last call is in no prompt; it is taken from ``trajectory.json`` when that file has it.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.agent.messages import api_message
from ctxpolicy.rundir import (
    CALLS_JSONL,
    MESSAGES_JSONL,
    RUN_JSON,
    TRAJECTORY_JSON,
    RunRecordError,
    is_complete_run,
    read_bytes,
    read_calls,
    read_json,
    read_message_lines,
    runs_of_cell,
)
from ctxpolicy.tokens import count_message

FC = "FC"


class SourceError(CtxpolicyError, ValueError):
    """A run that cannot be replayed; the message names the file and the reason."""

    exit_code = 2  # a bad --runs input


@dataclass
class SourceRun:
    run_dir: Path
    record: dict
    """The source's run.json."""
    store: dict[str, dict]
    """Message id -> message (one object per id: a replayed context keeps these objects)."""
    tokens: dict[str, int]
    """Message id -> its local token count, as the source stored it."""
    agent_calls: list[dict]
    """The source's agent calls in order (``message_ids``, ``status``, ``error`` are used)."""
    reply_tokens: list[int]
    """Local tokens of each agent call's answer (0 where the call failed or the answer is unknown)."""
    store_sha256: str = ""
    """sha256 of the source's own ``messages.jsonl`` (a replay's run.json ``message_base`` names it)."""

    @property
    def identity(self) -> dict:
        return self.record["identity"]

    @property
    def steps(self) -> int:
        return len(self.agent_calls)

    @functools.cached_property
    def prompt_tokens(self) -> list[int]:
        """Local tokens of each agent call's prompt as recorded (``count_message`` of each message,
        as a policy counts them): shared by every replay of the source."""
        counted: dict[str, int] = {}
        out = []
        for call in self.agent_calls:
            total = 0
            for mid in call["message_ids"]:
                tokens = counted.get(mid)
                if tokens is None:
                    tokens = counted[mid] = count_message(self.store[mid])
                total += tokens
            out.append(total)
        return out


def find_source_runs(cell_dirs: list[Path]) -> list[Path]:
    """The complete runs directly under the cell directories (``stale/`` and incomplete runs left out)."""
    found = []
    for cell_dir in map(Path, cell_dirs):
        if not cell_dir.is_dir():
            raise SourceError(f"{cell_dir}: no such directory")
        if (cell_dir / RUN_JSON).exists():  # a run directory named directly
            found.append(cell_dir)
            continue
        found += [d for d in runs_of_cell(cell_dir) if is_complete_run(d)]
    return found


def read_source_run(run_dir: Path) -> SourceRun:
    """Read one complete FC run; ``SourceError`` when it is not one or its records disagree."""
    run_dir = Path(run_dir)
    try:
        record = read_json(run_dir / RUN_JSON)
        lines = read_message_lines(run_dir)
        calls = read_calls(run_dir)
        digest = hashlib.sha256(read_bytes(run_dir / MESSAGES_JSONL)).hexdigest()
    except (OSError, ValueError, RunRecordError) as exc:
        raise SourceError(f"{run_dir}: unreadable run record ({exc})") from None
    if record.get("complete") is not True:
        raise SourceError(f"{run_dir / RUN_JSON}: field complete is {record.get('complete')!r}, not true")
    policy = (record.get("identity") or {}).get("policy")
    if policy != FC:
        raise SourceError(f"{run_dir / RUN_JSON}: field identity.policy is {policy!r}; replay needs an FC run")
    store = {line["id"]: line["message"] for line in lines}
    tokens = {line["id"]: line["tokens"] for line in lines}
    agent = sorted((c for c in calls if c.get("kind") == "agent"), key=lambda c: c["index"])
    previous: list[str] = []
    for call in agent:
        ids = call["message_ids"]
        missing = [mid for mid in ids if mid not in store]
        if missing:
            raise SourceError(f"{run_dir / CALLS_JSONL}: call {call['index']} names unknown message ids {missing}")
        if ids[: len(previous)] != previous:
            raise SourceError(
                f"{run_dir / CALLS_JSONL}: call {call['index']}'s prompt does not extend the "
                "previous one (not a full-context record)"
            )
        previous = ids
    return SourceRun(run_dir, record, store, tokens, agent, _reply_tokens(run_dir, agent, store, tokens), digest)


def _reply_tokens(run_dir: Path, agent: list[dict], store: dict[str, dict], tokens: dict[str, int]) -> list[int]:
    replies = []
    for call, following in zip(agent, agent[1:]):
        answer = (
            following["message_ids"][len(call["message_ids"])]
            if len(following["message_ids"]) > len(call["message_ids"])
            else None
        )
        ok = call.get("status") == "ok" and answer is not None and store[answer].get("role") == "assistant"
        replies.append(tokens[answer] if ok else 0)
    if agent:
        replies.append(_last_reply_tokens(run_dir, agent[-1]))
    return replies


def _last_reply_tokens(run_dir: Path, call: dict) -> int:
    if call.get("status") != "ok":
        return 0
    try:
        messages = read_json(run_dir / TRAJECTORY_JSON).get("messages") or []
    except (OSError, ValueError, AttributeError):
        return 0
    position = len(call["message_ids"])
    if (
        position < len(messages)
        and isinstance(messages[position], dict)
        and messages[position].get("role") == "assistant"
    ):
        return count_message(api_message(messages[position]))
    return 0
