"""Reading one run directory for a page: its record, its calls, its prompts rebuilt, its verdict.

``load_run`` is the only place in the view that reads run records; prompts come from the run-record
reader (``ctxpolicy.agent.record.rebuild_prompts``), never from parsing the message ids ourselves,
so harness, proxy, replay and imported runs show alike, and a new on-disk encoding needs a change
here only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.errors import UsageError
from ctxpolicy.rundir import (
    CALLS_JSONL,
    RunRecordError,
    read_jsonl,
    read_message_store,
    read_run_json,
    read_verdict,
    trajectory_messages,
)


class ViewInputError(UsageError, ValueError):
    """A run or cell directory the view cannot show; the message names the file and the reason."""


@dataclass
class LoadedRun:
    run_dir: Path
    record: dict
    """run.json"""
    calls: list[dict]
    """calls.jsonl lines, in order."""
    prompts: list[list[dict]]
    """The messages each call sent, rebuilt; ``prompts[i]`` belongs to ``calls[i]``."""
    verdict: dict | None
    history: list[dict] | None = None
    """The agent's whole history from ``trajectory.json`` where it holds one (harness runs; a
    replay's points to its source): the last call's answer is in no prompt."""
    replies: list[dict | None] | None = None
    """Each call's answer where its line names it (``reply_id``, proxy records), else None."""


def load_run(run_dir: str | Path) -> LoadedRun:
    """Read one run directory; ``ViewInputError`` naming the file when a record is missing or bad."""
    from ctxpolicy.agent.record import rebuild_prompts

    run_dir = Path(run_dir)
    try:
        record = read_run_json(run_dir)
        calls = list(read_jsonl(run_dir / CALLS_JSONL))
        prompts = rebuild_prompts(run_dir)
        verdict = read_verdict(run_dir)
    except RunRecordError as exc:
        raise ViewInputError(str(exc)) from None
    except FileNotFoundError as exc:
        raise ViewInputError(f"{exc.filename}: missing") from None
    except (KeyError, ValueError, TypeError) as exc:  # a bad line in calls.jsonl or messages.jsonl
        raise ViewInputError(f"{run_dir}: unreadable run record ({type(exc).__name__}: {exc})") from None
    if len(prompts) != len(calls):
        raise ViewInputError(f"{run_dir / CALLS_JSONL}: {len(calls)} calls but {len(prompts)} prompts rebuilt")
    if not isinstance(record.get("identity"), dict):
        raise ViewInputError(f"{run_dir / 'run.json'}: field identity is {record.get('identity')!r}, not an object")
    replies = None
    if any(c.get("reply_id") for c in calls):
        try:
            store = read_message_store(run_dir)
        except RunRecordError as exc:
            raise ViewInputError(str(exc)) from None
        lines = [store.get(c["reply_id"]) if c.get("reply_id") else None for c in calls]
        replies = [line.get("message") if isinstance(line, dict) else None for line in lines]
    return LoadedRun(run_dir, record, calls, prompts, verdict, trajectory_messages(run_dir), replies)
