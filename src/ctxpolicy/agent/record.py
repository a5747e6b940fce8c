"""The agent's recorder: the message store and the call log as a run grows, and prompts rebuilt from them.

File names, completeness, record I/O and the call line are the run directory's contract; their
one home is ``ctxpolicy.rundir`` (docs/architecture.md, "Run directory"): import them from there.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from ctxpolicy.agent.messages import api_message, message_id
from ctxpolicy.rundir import (
    CALLS_JSONL,
    MESSAGES_JSONL,
    CallRecord,
    PromptEncoder,
    read_calls,
    read_message_store,
)
from ctxpolicy.tokens import count_messages

__all__ = ["RunRecorder", "rebuild_prompts", "summary_call_record"]


def rebuild_prompts(run_dir: Path) -> list[list[dict]]:
    """Every prompt of the run, in call order, rebuilt from its message store and ``calls.jsonl``
    (either schema version, through ``ctxpolicy.rundir``'s one reader)."""
    run_dir = Path(run_dir)
    store = {mid: line["message"] for mid, line in read_message_store(run_dir).items()}
    prompts = []
    for call in read_calls(run_dir):
        missing = [mid for mid in call["message_ids"] if mid not in store]
        if missing:
            raise ValueError(f"{run_dir / CALLS_JSONL}: call {call['index']} names unknown message ids {missing}")
        prompts.append([store[mid] for mid in call["message_ids"]])
    return prompts


class RunRecorder:
    """Appends to ``messages.jsonl`` (each distinct message once) and ``calls.jsonl`` (one line per call,
    its prompt encoded by ``ctxpolicy.rundir.PromptEncoder``: schema version 2).

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
        self._encoder = PromptEncoder()
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

    def record_call(self, call: CallRecord) -> dict:
        """Give the call the next index, append it to ``calls.jsonl`` and return it as a dict (its
        whole prompt in ``message_ids``, as every reader sees it)."""
        with self._lock:
            numbered = call.numbered(len(self.calls))
            self._calls.write(self._encoder.line(numbered))
            self._calls.flush()
            line = numbered.to_json()
            self.calls.append(line)
        return line

    def close(self) -> None:
        for handle in (self._messages, self._calls):
            if not handle.closed:
                handle.close()

    @property
    def closed(self) -> bool:
        return self._calls.closed

    def reopened(self) -> RunRecorder:
        """A recorder that appends to the same files after ``close``, knowing what this one wrote
        (a proxy call that ended after its conversation was recorded)."""
        again = RunRecorder(self.run_dir, self._count_tokens)
        again._known = set(self._known)
        again.calls = list(self.calls)
        return again

    def resume_from(self, calls: list[dict], store: Iterable[str]) -> None:
        """Go on after the run's existing lines (read back with ``rundir.read_calls`` and
        ``read_message_store``): the next call gets the next index, stored messages are not stored
        again, and prompts are encoded against the last lines (a proxy conversation taken up again)."""
        with self._lock:
            self._known.update(store)
            self.calls = list(calls)
            for line in self.calls:
                self._encoder.encode_line(line)

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def summary_call_record(
    call, *, step: int, latency_s: float, message_ids: list[str], attempts: int | None, index: int = -1
) -> CallRecord:
    """The ``calls.jsonl`` line of one summarizer call (a ``policies.SummaryCall``), for the agent
    harness and the offline replay alike; its local estimate is the request's token count."""
    return CallRecord.summary(
        index=index,
        step=step,
        start=call.start,
        end=call.end,
        latency_s=latency_s,
        error=call.error,
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        cached_tokens=call.cached_tokens,
        request_tokens=count_messages(call.request_messages),
        message_ids=message_ids,
        attempts=attempts,
        model=call.model,
    )
