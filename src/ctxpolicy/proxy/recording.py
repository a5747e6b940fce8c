"""One run directory per proxied conversation, in the run-record format (docs/architecture.md).

``messages.jsonl`` and ``calls.jsonl`` grow as calls are made (the agent harness's
``RunRecorder``); ``trajectory.json`` (the client's last history) and ``run.json`` are written
last, atomically, when the conversation expires or the proxy shuts down. Identity:
``track: proxy``, ``benchmark: proxy``, ``task_id`` = the conversation id, ``attempt: 1``.
Proxy runs are never graded (no ``verdict.json``) and their benchmark is ``proxy``, so no
resolve rate of the study ever counts them. Nothing here ever sees the upstream API key.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ctxpolicy.agent.messages import api_message
from ctxpolicy.agent.record import RunRecorder
from ctxpolicy.agent.runner import SCHEMA_VERSION, RunIdentity, totals_of
from ctxpolicy.agent.versions import hardware, software_versions
from ctxpolicy.grid import Cell
from ctxpolicy.policies import PolicySpec
from ctxpolicy.rundir import RUN_JSON, TRAJECTORY_JSON, CallRecord, run_dir_name, write_record, write_run_json
from ctxpolicy.threshold_settings import FIXED
from ctxpolicy.tokens import count_message

TRACK = "proxy"
BENCHMARK = "proxy"
TRAJECTORY_FORMAT = "ctxpolicy-proxy-1"


@dataclass(frozen=True)
class ProxySettings:
    """What every conversation of one proxy shares (recorded in run.json)."""

    policy: PolicySpec
    threshold: int | None
    upstream_url: str
    upstream_model: str | None
    summarizer_model: str | None
    cache_block_tokens: int = 16
    idle_timeout_s: float = 3600.0
    max_conversations: int = 256

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
        self.start = time.time()
        self.model: str | None = settings.upstream_model
        self.mode = "text"
        self.llm_s = 0.0
        self.steps = 0
        self.last_status = "ok"
        self.last_error: str | None = None
        self.finished = False
        self._ids: dict[int, tuple[dict, str]] = {}

    def store(self, sent: list[dict]) -> list[str]:
        """The ids of the messages of one request (each stored once); a tool message or tool call
        makes the conversation's mode ``tool``."""
        if self.mode == "text" and any(m.get("role") == "tool" or m.get("tool_calls") for m in sent):
            self.mode = "tool"
        return self._store(sent)

    def record_call(self, call: CallRecord) -> None:
        """One ``calls.jsonl`` line (``index`` is given here)."""
        if call.kind == "agent":
            self.steps = max(self.steps, call.step)
            self.last_status, self.last_error = call.status, call.error
            if call.model and not self.settings.upstream_model:
                self.model = call.model
        self.llm_s += call.latency_s
        self.recorder.record_call(call)

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
        """Write trajectory.json and run.json (last); idempotent."""
        if self.finished:
            return self.run_dir / RUN_JSON
        self.finished = True
        self.recorder.close()
        end = time.time()
        identity = self.identity()
        write_record(
            self.run_dir / TRAJECTORY_JSON,
            {
                "trajectory_format": TRAJECTORY_FORMAT,
                "messages": [api_message(m) for m in history],
                "info": {"ctxpolicy": {"identity": asdict(identity)}},
            },
        )
        failed = self.last_status != "ok"
        record = {
            "schema_version": SCHEMA_VERSION,
            "complete": True,
            "identity": asdict(identity),
            "outcome": "error" if failed else "submitted",
            "error": f"upstream failed on the last call: {self.last_error}" if failed else None,
            "submission": "",
            "timing": {
                "start": self.start,
                "end": end,
                "wall_s": end - self.start,
                "setup_s": 0.0,
                "agent_s": end - self.start,
                "llm_s": self.llm_s,
                "tool_s": 0.0,
            },
            "totals": totals_of(self.recorder.calls, self.steps, 0),
            "settings": {
                "mode": self.mode,
                "cache_block_tokens": self.settings.cache_block_tokens,
                "front_door": self.front_door,
                "idle_timeout_s": self.settings.idle_timeout_s,
                "max_conversations": self.settings.max_conversations,
            },
            "versions": {
                **software_versions(),
                "model": {
                    "name": self.model or "unknown",
                    "file": None,
                    "sha256": None,
                    "hub_id": None,
                    "revision": None,
                },
                "server": server,
                "summarizer": None,
            },
            "hardware": hardware(),
            "trajectory_file": TRAJECTORY_JSON,
            "traceback": None,
            "proxy": {"requests": requests, "history_rewrites": rewrites, "ended": ended},
        }
        return write_run_json(self.run_dir, record)

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
