"""All runs of one cell against one endpoint, a few at a time; ``cell.json`` written last.

Runs whose ``run.json`` is complete are skipped, so a killed cell, started again, redoes only
the runs it had not finished. Complete runs made with another threshold than the one the cell
now declares (e.g. before a recalibration) are kept and listed as stale, or, with
``redo_stale``, moved aside to ``CELL_DIR/stale/`` and run again.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.agent.plan import CellPlan, PlannedRun, cell_identity, endpoint_for_server, model_endpoint
from ctxpolicy.agent.runner import Endpoint, RunResult, execute_run
from ctxpolicy.agent.terminal_bench import harness_kwargs
from ctxpolicy.rundir import CELL_JSON, RUN_JSON, read_run_json, set_aside, write_cell_json
from ctxpolicy.rundir import is_complete_run

HARNESS_LOG = "harness.log"
ANY_THRESHOLD = object()  # the cell declares no threshold: none of its runs is stale


@dataclass(frozen=True)
class StaleRun:
    """A complete run recorded with ``threshold_tokens`` other than the cell's ``expected``."""

    run_dir: Path
    threshold_tokens: int | None
    expected: int | None


@dataclass
class Survey:
    """What is on disk before the cell runs: results to keep, runs to execute, stale runs."""

    done: dict[Path, RunResult] = field(default_factory=dict)
    pending: list[PlannedRun] = field(default_factory=list)
    stale: list[StaleRun] = field(default_factory=list)  # kept in ``done`` unless redone
    redo_stale: bool = False

    @property
    def kept_stale(self) -> list[StaleRun]:
        return [] if self.redo_stale else self.stale


def expected_threshold(cell_info: dict) -> object:
    return cell_info["threshold_tokens"] if "threshold_tokens" in cell_info else ANY_THRESHOLD


def survey(
    runs: Sequence[PlannedRun],
    *,
    threshold: object = ANY_THRESHOLD,
    redo_errors: bool = False,
    redo_stale: bool = False,
) -> Survey:
    """Sort the runs by what their directories hold; reads only, changes nothing."""
    state = Survey(redo_stale=redo_stale)
    for run in runs:
        if not is_complete_run(run.run_dir):
            state.pending.append(run)
            continue
        record = read_run_json(run.run_dir)
        if redo_errors and record.get("outcome") == "error":
            state.pending.append(run)
            continue
        recorded = (record.get("identity") or {}).get("threshold_tokens")
        if threshold is not ANY_THRESHOLD and recorded != threshold:
            state.stale.append(StaleRun(run.run_dir, recorded, threshold))
            if redo_stale:
                state.pending.append(run)
                continue
        state.done[run.run_dir] = RunResult(
            run.run_dir, record.get("outcome", "error"), record.get("error"), skipped=True
        )
    return state


def previous_result(run: PlannedRun, redo_errors: bool) -> RunResult | None:
    """The recorded result when this run need not run again, else None."""
    return survey([run], redo_errors=redo_errors).done.get(run.run_dir)


def report_stale(state: Survey) -> None:
    for run in state.stale:
        action = "moved to stale/ and run again" if state.redo_stale else "kept (--redo-stale reruns it)"
        print(
            f"ctxpolicy: {run.run_dir}: stale threshold: run has threshold_tokens {run.threshold_tokens}, "
            f"the cell now {run.expected}; {action}",
            file=sys.stderr,
        )


def _prepare(
    runs: Sequence[PlannedRun], cell_dir: Path, cell_info: dict, redo_errors: bool, redo_stale: bool
) -> tuple[Survey, list[dict]]:
    cell_dir.mkdir(parents=True, exist_ok=True)
    state = survey(runs, threshold=expected_threshold(cell_info), redo_errors=redo_errors, redo_stale=redo_stale)
    report_stale(state)
    moved = []
    if redo_stale:
        for run in state.stale:
            target = set_aside(run.run_dir, cell_dir)
            moved.append({**_stale_entry(run, cell_dir), "moved_to": _relative(target, cell_dir)})
    return state, moved


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
    redo_stale: bool = False,
    progress: bool = True,
    cancel: threading.Event | None = None,
) -> list[RunResult]:
    """Execute the runs not yet done and write cell.json.

    On KeyboardInterrupt (and ``ctxpolicy.agent.interrupt.Interrupted``) no run is submitted any
    more, ``cancel`` is set so that runs in flight record nothing, and the exception propagates
    at once, without waiting for them and without writing cell.json.
    """
    cell_dir = Path(cell_dir)
    start = time.time()
    state, moved = _prepare(runs, cell_dir, cell_info, redo_errors, redo_stale)
    results = dict(state.done)
    bar = tqdm(
        total=len(runs),
        initial=len(results),
        desc=cell_info.get("slug", cell_dir.name),
        unit="run",
        disable=not progress,
    )
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency))
    try:
        with bar:
            futures = [pool.submit(_safe, run) for run in state.pending]
            for future in as_completed(futures):
                result = future.result()
                results[result.run_dir] = result
                bar.update(1)
                bar.set_postfix(Counter(r.outcome for r in results.values()), refresh=False)
    except BaseException:
        if cancel is not None:
            cancel.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    ordered = [results[run.run_dir] for run in runs]
    unrecorded = [r.run_dir.name for r in ordered if not is_complete_run(r.run_dir)]
    if unrecorded:  # a cell counts only runs with a record; starting it again redoes these
        raise RunsUnrecorded(
            f"{cell_dir}: {len(unrecorded)} run(s) ended without a complete {RUN_JSON}: "
            f"{', '.join(unrecorded[:10])}; no {CELL_JSON} written"
        )
    write_cell_json(cell_dir, cell_record(cell_info, ordered, cell_dir, start, time.time(), state.kept_stale, moved))
    return ordered


class HarnessError(CtxpolicyError, RuntimeError):
    """An outside harness left runs without a complete record."""


class RunsUnrecorded(HarnessError):
    """Runs of this process ended without a complete record (e.g. the disk refused ``run.json``)."""


def run_cell_with_harness(
    runs: Sequence[PlannedRun],
    *,
    argv_for: Callable[[list[str]], list[str]],
    cell_dir: Path,
    cell_info: dict,
    redo_errors: bool = False,
    redo_stale: bool = False,
) -> list[RunResult]:
    """Let a benchmark's own harness (``tb run``) execute the runs of the tasks not yet complete.

    ``argv_for(task_ids)`` is the harness command; it calls ``ctxpolicy.agent.terminal_bench.run_task``
    for each trial, which writes the run directories. Raises HarnessError (and writes no cell.json)
    when runs are still incomplete afterwards, so that starting the cell again redoes them.
    On an interrupt the harness is killed (``subprocess.run`` does so) and the exception propagates.
    """
    cell_dir = Path(cell_dir)
    start = time.time()
    state, moved = _prepare(runs, cell_dir, cell_info, redo_errors, redo_stale)
    pending = list(dict.fromkeys(run.task_id for run in state.pending))
    if pending:
        with open(cell_dir / HARNESS_LOG, "a", encoding="utf-8") as log:
            subprocess.run(argv_for(pending), stdout=log, stderr=subprocess.STDOUT, check=False)
    results = []
    for run in runs:
        if run.run_dir in state.done and run.task_id not in pending:
            results.append(state.done[run.run_dir])
        elif is_complete_run(run.run_dir):
            record = read_run_json(run.run_dir)
            results.append(RunResult(run.run_dir, record.get("outcome", "error"), record.get("error")))
    missing = [run.run_dir.name for run in runs if not is_complete_run(run.run_dir)]
    if missing:
        raise HarnessError(
            f"{cell_dir / HARNESS_LOG}: the harness left {len(missing)} run(s) without a complete "
            f"run.json: {', '.join(missing[:10])}"
        )
    kept = survey(runs, threshold=expected_threshold(cell_info)).stale  # the harness may have redone some
    write_cell_json(cell_dir, cell_record(cell_info, results, cell_dir, start, time.time(), kept, moved))
    return results


def _relative(path: Path, cell_dir: Path) -> str:
    return str(path.relative_to(cell_dir)) if path.is_relative_to(cell_dir) else str(path)


def _stale_entry(run: StaleRun, cell_dir: Path) -> dict:
    return {"run_dir": _relative(run.run_dir, cell_dir), "threshold_tokens": run.threshold_tokens}


def limit_warnings(results: Sequence[RunResult]) -> list[str]:
    """A warning when most runs of the cell were stopped by the wall-time limit: their resource
    figures are undefined (time-limited runs are not eligible) and the limit, or the machine's
    load, decides the cell's results more than the policy does."""
    limited = sum(r.outcome == "time_limit" for r in results)
    if not results or limited * 2 <= len(results):
        return []
    return [
        f"{limited} of {len(results)} runs hit the wall-time limit: the cell's resource ratios are undefined; "
        "raise limits.wall_time_limit_s or run on a less busy machine"
    ]


def cell_record(
    cell_info: dict,
    results: Sequence[RunResult],
    cell_dir: Path,
    start: float,
    end: float,
    stale: Sequence[StaleRun] = (),
    redone_stale: Sequence[dict] = (),
) -> dict:
    return {
        "schema_version": 1,
        "complete": True,
        **cell_info,
        "timing": {"start": start, "end": end, "wall_s": end - start},
        "outcomes": dict(Counter(r.outcome for r in results)),
        "warnings": limit_warnings(results),
        "runs": [
            {"run_dir": _relative(r.run_dir, cell_dir), "outcome": r.outcome, "error": r.error, "skipped": r.skipped}
            for r in results
        ],
        "stale_threshold_runs": [_stale_entry(run, cell_dir) for run in stale],
        "redone_stale_runs": list(redone_stale),
    }


# --- a planned cell (``agent.plan.CellPlan``) executed: the endpoint chosen, the runs bound -------


@dataclass(frozen=True)
class CellOptions:
    """How run-cell executes a planned cell: where (``out``), against which servers (the study's
    ``config`` file, a running ``endpoint`` and its ``served_name``, a ``summarizer_endpoint``),
    what it redoes, and what a Harbor cell passes on to its harness (``harness_argv``, ``mode``,
    ``step_limit``, ``max_tokens``: ``agent.terminal_bench.harness_kwargs`` reads them by name)."""

    out: Path
    config: Path
    endpoint: str | None = None
    served_name: str | None = None
    summarizer_endpoint: str | None = None
    redo_errors: bool = False
    redo_stale: bool = False
    progress: bool = True
    harness_argv: str | None = None
    mode: str | None = None
    step_limit: int | None = None
    max_tokens: int | None = None


def execute_cell(plan: CellPlan, options: CellOptions) -> list[RunResult]:
    """Every run of ``plan`` in ``options.out``, cell.json written
    last. When no run is left to execute, no server is started (minutes of GPU for a cell.json):
    cell.json names the endpoint the runs recorded. Raises ``HarnessError`` and the serving
    errors; however it is left, no run in flight records itself afterwards."""
    import contextlib

    out = options.out
    runs = plan.runs(out)
    todo = survey(runs, threshold=plan.threshold, redo_errors=options.redo_errors, redo_stale=options.redo_stale)
    if not todo.pending:
        cell_info = {**plan.info(), "endpoint": previous_endpoint(out, runs)}
        return run_cell(runs, cell_dir=out, cell_info=cell_info, concurrency=1, progress=False)
    cancel = threading.Event()
    asked = time.monotonic()
    cell = plan.cell
    try:
        with contextlib.ExitStack() as servers:
            endpoint = servers.enter_context(
                cell_endpoint(
                    plan.study.model(cell.model),
                    options.config,
                    cell.model,
                    url=options.endpoint,
                    served_name=options.served_name,
                    log_path=out / "server.log",
                )
            )
            summary_endpoint = None
            if cell.summarizer and cell.summarizer != cell.model:
                summary_endpoint = servers.enter_context(
                    cell_endpoint(
                        plan.study.model(cell.summarizer),
                        options.config,
                        cell.summarizer,
                        url=options.summarizer_endpoint,
                        served_name=None,
                        log_path=out / f"server-{cell.summarizer}.log",
                    )
                )
            # seconds until the model server(s) answered: a start-up, or ~0 for a shared or given one
            cell_info = {
                **plan.info(),
                "endpoint": endpoint.server,
                "server_wait_s": round(time.monotonic() - asked, 3),
            }
            if hasattr(plan.adapter, "harness_argv"):
                return run_cell_with_harness(
                    runs,
                    argv_for=harness_command(plan, options, endpoint),
                    cell_dir=out,
                    cell_info=cell_info,
                    redo_errors=options.redo_errors,
                    redo_stale=options.redo_stale,
                )
            return run_cell(
                bind_runs(plan, runs, endpoint, summary_endpoint, cancel),
                cell_dir=out,
                cell_info=cell_info,
                concurrency=plan.concurrency,
                redo_errors=options.redo_errors,
                redo_stale=options.redo_stale,
                progress=options.progress,
                cancel=cancel,
            )
    except BaseException:
        cancel.set()
        raise


def bind_runs(
    plan: CellPlan,
    runs: list[PlannedRun],
    endpoint: Endpoint,
    summary_endpoint: Endpoint | None,
    cancel: threading.Event,
) -> list[PlannedRun]:
    """The runs with ``execute`` set: ``runner.execute_run`` against the endpoints, cancellable."""
    import dataclasses
    import functools

    tasks = {task.task_id: task for task in plan.tasks}
    bound = []
    for run in runs:
        task = tasks[run.task_id]
        identity = cell_identity(plan.study, plan.cell, task=task, attempt=run.attempt, threshold=plan.threshold)
        execute = functools.partial(
            execute_run,
            identity=identity,
            policy=plan.cell.spec,
            task=task,
            adapter=plan.adapter,
            settings=plan.settings_of[task.task_id],
            endpoint=endpoint,
            summarizer_endpoint=summary_endpoint,
            run_dir=run.run_dir,
            cancel=cancel,
        )
        bound.append(dataclasses.replace(run, execute=execute))
    return bound


def previous_endpoint(out: Path, runs: Sequence[PlannedRun]) -> dict | None:
    """The server recorded by the last cell.json, else by a run: for a cell.json written without one."""
    from ctxpolicy.rundir import read_json

    for path in [out / CELL_JSON, *(run.run_dir / RUN_JSON for run in runs)]:
        try:
            record = read_json(path)
            server = record["endpoint"] if path.name == CELL_JSON else record["versions"]["server"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if server:
            return server
    return None


def cell_endpoint(
    model_cfg: Mapping[str, Any],
    config_path: Path,
    model: str,
    *,
    url: str | None,
    served_name: str | None,
    log_path: Path,
):
    """The endpoint of ``model`` (its config block ``model_cfg``) for this cell (a context
    manager): the session's shared server
    when a local Snakemake run announced one (``ctxpolicy.serving.shared``; never for a given URL
    or `server: endpoint`), else ``agent.plan.model_endpoint``'s."""
    import contextlib
    import dataclasses
    import os

    from ctxpolicy.serving.shared import attach, session_from_environment

    session = None if url or model_cfg["server"] == "endpoint" else session_from_environment()
    if session is None:
        return model_endpoint(model_cfg, model, url=url, served_name=served_name, log_path=log_path)

    @contextlib.contextmanager
    def shared():
        handle = attach(session, config_path=config_path, model=model, model_cfg=model_cfg)
        print(f"ctxpolicy: {model}: shared server {handle.base_url} (log {handle.log_path})", file=sys.stderr)
        api_key = os.environ.get(model_cfg["api_key_env"]) if model_cfg.get("api_key_env") else None
        yield dataclasses.replace(endpoint_for_server(handle), api_key=api_key)

    return shared()


def harness_command(plan: CellPlan, options: CellOptions, endpoint: Endpoint) -> Callable[[list[str]], list[str]]:
    """For benchmarks graded by their own harness (Terminal-Bench, Harbor): the command that runs
    the given tasks; ``options`` a ``CellOptions`` (or anything with its field names)."""
    import shlex

    timeouts = {s.command_timeout_s for s in (getattr(plan, "settings_of", None) or {}).values()}
    kwargs = harness_kwargs(
        options,
        cell=plan.cell,
        thresholds=plan.thresholds_file,
        cell_dir=options.out,
        endpoint=endpoint,
        command_timeout_s=max(timeouts) if timeouts else None,  # one per benchmark and model
    )
    run_id = f"{plan.cell.slug}-{time.strftime('%Y%m%dT%H%M%S')}"
    extra = {"prefix": shlex.split(options.harness_argv)} if getattr(options, "harness_argv", None) else {}
    return lambda task_ids: plan.adapter.harness_argv(
        task_ids,
        model=endpoint.served_name,
        run_id=run_id,
        cell_dir=options.out,
        n_concurrent=plan.concurrency,
        n_attempts=plan.attempts,
        agent_kwargs=kwargs,
        **extra,
    )
