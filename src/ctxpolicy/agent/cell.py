"""All runs of one cell against one endpoint, a few at a time; ``cell.json`` written last.

Runs whose ``run.json`` is complete are skipped, so a killed cell, started again, redoes only
the runs it had not finished.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ctxpolicy.agent.record import RUN_JSON, atomic_write_json, is_complete, read_json
from ctxpolicy.agent.runner import RunResult

CELL_JSON = "cell.json"
HARNESS_LOG = "harness.log"


@dataclass(frozen=True)
class PlannedRun:
    run_dir: Path
    task_id: str
    attempt: int
    execute: Callable[[], RunResult] | None = None  # None: an outside harness executes it


def previous_result(run: PlannedRun, redo_errors: bool) -> RunResult | None:
    """The recorded result when this run need not run again, else None."""
    if not is_complete(run.run_dir):
        return None
    record = read_json(run.run_dir / RUN_JSON)
    if redo_errors and record.get("outcome") == "error":
        return None
    return RunResult(run.run_dir, record.get("outcome", "error"), record.get("error"), skipped=True)


def _safe(run: PlannedRun) -> RunResult:
    try:
        return run.execute()
    except Exception as exc:  # execute_run already records its failures; this guards the cell itself
        return RunResult(run.run_dir, "error", f"{type(exc).__name__}: {exc}")


def run_cell(
    runs: Sequence[PlannedRun],
    *,
    cell_dir: Path,
    cell_info: dict,
    concurrency: int,
    redo_errors: bool = False,
    progress: bool = True,
) -> list[RunResult]:
    cell_dir = Path(cell_dir)
    cell_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    results: dict[Path, RunResult] = {}
    pending = []
    for run in runs:
        done = previous_result(run, redo_errors)
        if done is None:
            pending.append(run)
        else:
            results[run.run_dir] = done
    bar = tqdm(total=len(runs), initial=len(results), desc=cell_info.get("slug", cell_dir.name),
               unit="run", disable=not progress)
    with bar, ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(_safe, run) for run in pending]
        try:
            for future in as_completed(futures):
                result = future.result()
                results[result.run_dir] = result
                bar.update(1)
                bar.set_postfix(Counter(r.outcome for r in results.values()), refresh=False)
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)  # runs in flight finish; no cell.json
            raise
    ordered = [results[run.run_dir] for run in runs]
    atomic_write_json(cell_dir / CELL_JSON, cell_record(cell_info, ordered, cell_dir, start, time.time()))
    return ordered


class HarnessError(RuntimeError):
    """An outside harness left runs without a complete record."""


def run_cell_with_harness(
    runs: Sequence[PlannedRun],
    *,
    argv_for: Callable[[list[str]], list[str]],
    cell_dir: Path,
    cell_info: dict,
    redo_errors: bool = False,
) -> list[RunResult]:
    """Let a benchmark's own harness (``tb run``) execute the runs of the tasks not yet complete.

    ``argv_for(task_ids)`` is the harness command; it calls ``ctxpolicy.agent.terminal_bench.run_task``
    for each trial, which writes the run directories. Raises HarnessError (and writes no cell.json)
    when runs are still incomplete afterwards, so that starting the cell again redoes them.
    """
    cell_dir = Path(cell_dir)
    cell_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    before = {run.run_dir: previous_result(run, redo_errors) for run in runs}
    pending = list(dict.fromkeys(run.task_id for run in runs if before[run.run_dir] is None))
    if pending:
        with open(cell_dir / HARNESS_LOG, "a", encoding="utf-8") as log:
            subprocess.run(argv_for(pending), stdout=log, stderr=subprocess.STDOUT, check=False)
    results = []
    for run in runs:
        if before[run.run_dir] is not None and run.task_id not in pending:
            results.append(before[run.run_dir])
        elif is_complete(run.run_dir):
            record = read_json(run.run_dir / RUN_JSON)
            results.append(RunResult(run.run_dir, record.get("outcome", "error"), record.get("error")))
    missing = [run.run_dir.name for run in runs if not is_complete(run.run_dir)]
    if missing:
        raise HarnessError(f"{cell_dir / HARNESS_LOG}: the harness left {len(missing)} run(s) without a complete "
                           f"run.json: {', '.join(missing[:10])}")
    atomic_write_json(cell_dir / CELL_JSON, cell_record(cell_info, results, cell_dir, start, time.time()))
    return results


def cell_record(cell_info: dict, results: Sequence[RunResult], cell_dir: Path, start: float, end: float) -> dict:
    return {
        "schema_version": 1,
        "complete": True,
        **cell_info,
        "timing": {"start": start, "end": end, "wall_s": end - start},
        "outcomes": dict(Counter(r.outcome for r in results)),
        "runs": [
            {"run_dir": str(r.run_dir.relative_to(cell_dir)) if r.run_dir.is_relative_to(cell_dir) else str(r.run_dir),
             "outcome": r.outcome, "error": r.error, "skipped": r.skipped}
            for r in results
        ],
    }
