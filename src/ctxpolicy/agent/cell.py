"""All runs of one cell against one endpoint, a few at a time; ``cell.json`` written last.

Runs whose ``run.json`` is complete are skipped, so a killed cell, started again, redoes only
the runs it had not finished.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class PlannedRun:
    run_dir: Path
    task_id: str
    attempt: int
    execute: Callable[[], RunResult]


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
        futures = {pool.submit(_safe, run): run for run in pending}
        for future in as_completed(futures):
            result = future.result()
            results[result.run_dir] = result
            bar.update(1)
            bar.set_postfix(Counter(r.outcome for r in results.values()), refresh=False)
    ordered = [results[run.run_dir] for run in runs]
    atomic_write_json(cell_dir / CELL_JSON, cell_record(cell_info, ordered, cell_dir, start, time.time()))
    return ordered


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
