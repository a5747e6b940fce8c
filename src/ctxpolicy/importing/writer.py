"""One imported trajectory written as a run directory, through the project's own writers.

A run directory appears whole or not at all: it is written as a partial folder beside its place
(``rundir.partial_dir``, which no reader counts) and renamed into place once ``run.json`` is in.
The message store and the call log are written by ``agent.record.RunRecorder`` (so they are in
whatever encoding the harness writes), each line a ``rundir.CallRecord``; ``trajectory.json``
and, last, ``run.json`` through ``rundir``. The run is an FC run of the ``imported`` track:
``{root}/{benchmark}/{model}/imported/{task}__a{n}``.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import time
from pathlib import Path

from ctxpolicy import __version__, gitstate
from ctxpolicy.agent.record import RunRecorder
from ctxpolicy.importing.formats import SOURCE_FORMATS, Trajectory
from ctxpolicy.policies import actions
from ctxpolicy.rundir import (
    RUN_JSON,
    TRAJECTORY_JSON,
    CallRecord,
    owns_run_dir,
    partial_dir,
    read_json,
    run_dir,
    write_record,
    write_run_json,
    write_verdict,
)
from ctxpolicy.tokens import count_message

SCHEMA_VERSION = 2
TRACK = "imported"
CELL = "imported"
COHORT = "imported"
CACHE_BLOCK_TOKENS = 16  # the metrics' default prefix-cache block (``ctxpolicy cost --block``)
OUTCOME_OF_STATUS = {  # exit statuses of mini-swe-agent and SWE-agent -> our outcomes
    "submitted": "submitted",
    "limitsexceeded": "step_limit",
    "exit_cost": "step_limit",
    "exit_api_calls": "step_limit",
    "timeexceeded": "time_limit",
    "exit_time": "time_limit",
    "formaterror": "format_error_limit",
    "repeatedformaterror": "format_error_limit",
    "exit_format": "format_error_limit",
    "exit_context": "context_overflow",
    "contextwindowexceedederror": "context_overflow",
}


@functools.cache
def _code_state() -> dict:
    return gitstate.code_state()


def outcome_of(exit_status: str | None, submission: str) -> tuple[str, str | None]:
    """(outcome, error): the exit status as our outcome; one we do not know is an ``error``."""
    if exit_status is None:
        return ("submitted", None) if submission else ("error", "the source records no exit status")
    key = exit_status.strip().lower()
    if key in OUTCOME_OF_STATUS:
        return OUTCOME_OF_STATUS[key], None
    if key.startswith("submitted"):  # SWE-agent: "submitted (exit_cost)" and the like
        return "submitted", None
    return "error", f"exit status {exit_status}"


def counts_source(trajectory: Trajectory) -> str:
    """``provider`` (every call has its usage), ``local`` (none has) or ``mixed``."""
    with_usage = sum(call.has_usage for call in trajectory.calls)
    return "provider" if with_usage == len(trajectory.calls) else "local" if with_usage == 0 else "mixed"


def existing_attempt(root: Path, benchmark: str, model: str, task_id: str, sha256: str) -> tuple[int, bool]:
    """(attempt, already): the first attempt number free for this task, or the one that already
    holds this very source file (same sha256: nothing to do)."""
    attempt = 1
    while True:
        target = run_dir(root, benchmark, model, CELL, task_id, attempt)
        if not (target / RUN_JSON).exists():
            return attempt, False
        try:
            recorded = (read_json(target / RUN_JSON).get("imported") or {}).get("source_sha256")
        except (OSError, ValueError, AttributeError, RecursionError):
            recorded = None
        if recorded == sha256:
            return attempt, True
        attempt += 1


def write_imported_run(
    trajectory: Trajectory,
    *,
    root: Path,
    benchmark: str,
    model: str,
    source: Path,
    sha256: str,
    attempt: int,
    verdict: dict | None = None,
) -> Path:
    """Write one run directory and return it: whole or not at all. Everything is written into a
    partial folder beside it (``rundir.partial_dir``: no reader counts it), ``run.json`` last, then
    the folder is renamed into place; on any failure the partial folder is removed. A leftover of an
    earlier import that never finished (a run directory of ours without ``run.json``) is replaced."""
    target = run_dir(root, benchmark, model, CELL, trajectory.task_id, attempt)
    partial = partial_dir(target)
    try:
        _write_run(partial, trajectory, benchmark, model, source, root, sha256, attempt, verdict)
        if os.path.lexists(target):
            if target.is_symlink() or not owns_run_dir(target) or (target / RUN_JSON).exists():
                raise FileExistsError(
                    17, "a folder that is not an unfinished import of ours is in the way", str(target)
                )
            shutil.rmtree(target)
        os.rename(partial, target)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return target


def _write_run(
    folder: Path,
    trajectory: Trajectory,
    benchmark: str,
    model: str,
    source: Path,
    root: Path,
    sha256: str,
    attempt: int,
    verdict: dict | None,
) -> None:
    lines: list[dict] = []
    known: dict[int, tuple[dict, str, int]] = {}  # id(message) -> (message, its id, its tokens)
    with RunRecorder(folder, count_message) as recorder:
        for step, call in enumerate(trajectory.calls, 1):
            # each prompt repeats the messages of the one before as the same objects: each is
            # hashed and counted once, not once per call
            fresh = list({id(m): m for m in call.prompt if id(m) not in known}.values())
            for message, mid in zip(fresh, recorder.store(fresh)):
                known[id(message)] = (message, mid, count_message(message))
            ids = [known[id(m)][1] for m in call.prompt]
            local = sum(known[id(m)][2] for m in call.prompt)
            usage = call.has_usage
            lines.append(
                recorder.record_call(
                    CallRecord.answered(
                        step=step,
                        start=None,
                        end=call.end,
                        latency_s=None,
                        prompt_tokens=call.prompt_tokens if usage else local,
                        completion_tokens=call.completion_tokens if usage else count_message(call.reply),
                        cached_tokens=call.cached_tokens if usage else None,
                        est_tokens_before=local,
                        est_tokens_after=local,
                        message_ids=ids,
                        events=[],
                        finish_reason=call.finish_reason,
                        model=call.model,
                        usage_source=None if usage else "local",
                        provider_cost_usd=call.cost,
                        price_source=call.cost_source if call.cost is not None else None,
                    )
                )
            )
        recorder.store([trajectory.calls[-1].reply])  # the last answer is in no prompt: stored for the counts
    last = trajectory.calls[-1]
    sent = [*last.prompt, last.reply]
    write_record(
        folder / TRAJECTORY_JSON,
        {
            "trajectory_format": "mini-swe-agent-1.1",
            "messages": sent,
            "info": {"exit_status": trajectory.exit_status, "submission": trajectory.submission},
        },
    )
    if verdict is not None:
        write_verdict(folder, verdict)
    write_run_json(folder, run_record(trajectory, benchmark, model, source, root, sha256, attempt, lines))


def run_record(
    trajectory: Trajectory,
    benchmark: str,
    model: str,
    source: Path,
    root: Path,
    sha256: str,
    attempt: int,
    calls: list[dict],
) -> dict:
    outcome, error = outcome_of(trajectory.exit_status, trajectory.submission)
    reported = [c["cached_tokens"] for c in calls if c["cached_tokens"] is not None]
    ends = [c["end"] for c in calls if c["end"] is not None]
    costs = [call.cost for call in trajectory.calls]
    git = _code_state()
    return {
        "schema_version": SCHEMA_VERSION,
        "complete": True,
        "identity": {
            "benchmark": benchmark,
            "cohort": COHORT,
            "task_id": trajectory.task_id,
            "stratum": benchmark,
            "model": model,
            "policy": "FC",
            "primitive": "FC",
            "trigger": None,
            "threshold_setting": None,
            "threshold_tokens": None,
            "depth": None,
            "summarizer": None,
            "attempt": attempt,
            "seed": 0,
            "cell": CELL,
            "track": TRACK,
        },
        "outcome": outcome,
        "error": error,
        "submission": trajectory.submission,
        "timing": {
            "start": None,
            "end": max(ends) if ends else None,
            "wall_s": None,
            "setup_s": None,
            "agent_s": None,
            "llm_s": None,
            "tool_s": None,
        },
        "totals": {
            "steps": len(calls),
            "agent_calls": len(calls),
            "summary_calls": 0,
            "prompt_tokens": sum(c["prompt_tokens"] for c in calls),
            "completion_tokens": sum(c["completion_tokens"] for c in calls),
            "cached_tokens": sum(reported) if reported else None,
            "compression_events": 0,
            "format_errors": 0,
            "peak_prompt_tokens": max(c["prompt_tokens"] for c in calls),
            "failed_calls": 0,
        },
        "settings": {
            "cache_block_tokens": CACHE_BLOCK_TOKENS,
            "mode": "tool" if trajectory.action_format == actions.TOOL_CALLS else "text",
            "action_format": trajectory.action_format or actions.DEFAULT,
            "protected_prefix": trajectory.prefix_length,
        },
        "versions": {
            "ctxpolicy": __version__,
            "git_commit": git.get("commit"),
            "git_dirty": git.get("dirty"),
            "mini_swe_agent": None,
            "litellm": None,
            "python": platform.python_version(),
            "model": {
                "name": trajectory.model_name or model,
                "file": None,
                "sha256": None,
                "hub_id": None,
                "revision": None,
            },
            "server": {"kind": None, "version": None, "url": f"imported:{trajectory.source_format}"},
        },
        "imported": {
            "format": SOURCE_FORMATS[trajectory.source_format],
            "source_file": os.path.relpath(Path(source).resolve(), Path(root).resolve()),
            "source_sha256": sha256,
            "counts": counts_source(trajectory),
            "action_recognised": trajectory.action_format is not None,
            "exit_status": trajectory.exit_status,
            "prompts_from": trajectory.prompts_from,
            "cost_usd": sum(costs) if costs and all(c is not None for c in costs) else None,
            "source_totals": trajectory.totals,
            "notes": trajectory.notes,
            "imported_at": time.time(),
        },
        "trajectory_file": TRAJECTORY_JSON,
    }
