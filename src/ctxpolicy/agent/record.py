"""The run directory on disk: message store, call log, atomic records, and reading them back.

Layout and line formats are the contract in docs/architecture.md ("Run directory").
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ctxpolicy import atomic
from ctxpolicy.agent.messages import api_message, message_id

RUN_JSON = "run.json"
CALLS_JSONL = "calls.jsonl"
MESSAGES_JSONL = "messages.jsonl"
TRAJECTORY_JSON = "trajectory.json"
PATCH_DIFF = "patch.diff"
WORKSPACE = "workspace"

# What a rerun of a run directory removes before starting again (verdicts belong to a past run too).
_RUN_OUTPUTS = (RUN_JSON, CALLS_JSONL, MESSAGES_JSONL, TRAJECTORY_JSON, PATCH_DIFF, "verdict.json")


def atomic_write_json(path: Path, data: Any) -> None:
    """The run directory's JSON layout: indented, UTF-8 as is, anything else as ``str``."""
    atomic.atomic_write_json(path, data, indent=2, ensure_ascii=False, default=str)


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def is_complete(run_dir: Path) -> bool:
    """True when ``run_dir/run.json`` exists, parses and says ``complete: true``."""
    try:
        return read_json(Path(run_dir) / RUN_JSON).get("complete") is True
    except (OSError, ValueError, AttributeError):
        return False


def reset_run_dir(run_dir: Path) -> None:
    """Remove what a previous, unfinished attempt at this run left behind."""
    run_dir = Path(run_dir)
    for name in _RUN_OUTPUTS:
        (run_dir / name).unlink(missing_ok=True)
    for stale in run_dir.glob(f".{RUN_JSON}.*.tmp"):
        stale.unlink(missing_ok=True)
    shutil.rmtree(run_dir / WORKSPACE, ignore_errors=True)


def rebuild_prompts(run_dir: Path) -> list[list[dict]]:
    """Every prompt of the run, in call order, rebuilt from ``messages.jsonl`` and ``calls.jsonl``."""
    run_dir = Path(run_dir)
    store = {line["id"]: line["message"] for line in read_jsonl(run_dir / MESSAGES_JSONL)}
    prompts = []
    for call in read_jsonl(run_dir / CALLS_JSONL):
        missing = [mid for mid in call["message_ids"] if mid not in store]
        if missing:
            raise ValueError(f"{run_dir / CALLS_JSONL}: call {call['index']} names unknown message ids {missing}")
        prompts.append([store[mid] for mid in call["message_ids"]])
    return prompts


class RunRecorder:
    """Appends to ``messages.jsonl`` (each distinct message once) and ``calls.jsonl`` (one line per call).

    Lines are flushed as they are written so that a killed run still shows what it did; the
    record that counts is ``run.json``, written last by the runner.
    """

    def __init__(self, run_dir: Path, count_tokens: Callable[[dict], int]):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._count_tokens = count_tokens
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._messages = open(self.run_dir / MESSAGES_JSONL, "a", encoding="utf-8")
        self._calls = open(self.run_dir / CALLS_JSONL, "a", encoding="utf-8")
        self.calls: list[dict] = []

    def store(self, messages: Iterable[dict]) -> list[str]:
        """Store the messages not seen yet; return the ordered ids of all of them."""
        ids = []
        with self._lock:
            for message in messages:
                sent = api_message(message)
                mid = message_id(sent)
                if mid not in self._known:
                    line = {"id": mid, "tokens": self._count_tokens(sent), "message": sent}
                    self._messages.write(json.dumps(line, ensure_ascii=False) + "\n")
                    self._known.add(mid)
                ids.append(mid)
            self._messages.flush()
        return ids

    def record_call(self, call: dict) -> dict:
        """Give the call the next index, append it to ``calls.jsonl`` and return it."""
        with self._lock:
            line = {"index": len(self.calls), **call}
            self._calls.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            self._calls.flush()
            self.calls.append(line)
        return line

    def close(self) -> None:
        for handle in (self._messages, self._calls):
            if not handle.closed:
                handle.close()

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
