"""Execute all runs of one cell (every task of the cohort × attempts 1..A) against one model server.

The cell is named by its id, --cell BENCHMARK/MODEL/SLUG (its path under results_dir/runs/, looked
up in the config's grid), or, for a cell outside the grid, by --benchmark, --model and --policy.
Its tasks are the cohort cut to the benchmark's cohort_limit (ctxpolicy.grid.cell_tasks); a Th
policy's threshold is read from the thresholds file (ctxpolicy.grid.resolve_threshold).

Runs go a few at a time (--concurrency, default: the benchmark's `concurrency` in the config)
into CELL_DIR/{task_id}__a{attempt}/; the cell's model server is started and stopped here, its
log kept in CELL_DIR/server.log, unless --endpoint names a running one, or a local Snakemake run
shares one server per model between its cells (ctxpolicy.serving.shared: the Snakefile announces
the session in CTXPOLICY_SHARED_SERVERS). Runs already complete
(run.json with complete: true) are skipped, so a killed cell started again redoes only the
missing ones; when none is missing, no server is started and only cell.json is written again.
CELL_DIR/cell.json, written last, lists every run and its outcome.

One run-cell per cell: CELL_DIR/.lock is held (flock) while it works; a second one exits 1 at
once, naming the holder's pid. SIGINT/SIGTERM stop it promptly: no new runs, the model server
stopped, every process it started killed, runs in flight left without run.json (a restart
redoes them), no cell.json; exit code 130/143.

Complete runs recorded with other threshold_tokens than the cell now resolves (e.g. after a
recalibration) are kept, reported on stderr and listed in cell.json `stale_threshold_runs`;
--redo-stale moves them to CELL_DIR/stale/ and runs them again (listed in `redone_stale_runs`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import shlex
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxpolicy.agent.cli_common import ENDPOINT_HELP, add_common_arguments, fail, input_errors


CELL_HELP = """\
the cell directory:
  runs already complete are skipped; when all are, no model server is started;
  CELL_DIR/.lock (flock) lets one run-cell at a time work on the cell; a second exits 1 at once;
  SIGINT/SIGTERM: runs in flight are killed and not recorded, the server stopped; exit 130/143;
  runs with another threshold than the cell's now are stale: kept and listed in cell.json
      stale_threshold_runs, or, with --redo-stale, moved to CELL_DIR/stale/ and run again."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_out

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = f"{CELL_FORMS_HELP}\n\n{ENDPOINT_HELP}\n\n{CELL_HELP}"
    parser.add_argument(
        "--cell",
        metavar="BENCHMARK/MODEL/SLUG",
        help="a cell of the config's grid, by its path under results_dir/runs/ "
        "(instead of --benchmark, --model, --policy, --setting, --summarizer, --cohort, --track)",
    )
    add_common_arguments(parser, cell_flags_required=False)
    parser.add_argument("--cohort", help="cohort of tasks (default: main)")
    parser.add_argument("--concurrency", type=int, help="runs at once (default: the benchmark's concurrency)")
    parser.add_argument("--attempts", type=int, help="attempts per task (default: the config's attempts)")
    parser.add_argument("--tasks", help="comma-separated task ids: run only these of the cell's tasks")
    parser.add_argument("--redo-errors", action="store_true", help="run again the runs whose outcome was error")
    parser.add_argument(
        "--redo-stale",
        action="store_true",
        help="move complete runs whose threshold_tokens differ from the cell's now (e.g. after "
        "recalibration) to CELL_DIR/stale/ and run them again; without it they are kept, "
        "reported on stderr and listed in cell.json stale_threshold_runs",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_out(parser, "the cell directory", required=True)
    parser.add_argument(
        "--harness-argv",
        help="Harbor cells: the config-fixed `harbor run ...` (the rule's shell writes it, see "
        "ctxpolicy.benchmarks.harbor.cell_prefix); run-cell adds the tasks and agent kwargs",
    )


CELL_FORMS_HELP = """\
the cell:
  --cell BENCHMARK/MODEL/SLUG: a cell of the config's grid (ids: `ctxpolicy grid --json`);
  or --benchmark B --model M --policy P [--setting S] [--summarizer M2] [--cohort C]: any cell.
  Either way the cohort is cut to the benchmark's cohort_limit, and a Th policy's threshold is
  read from the thresholds file ({results_dir}/thresholds/B/M.json, or --thresholds FILE),
  whether calibrated (ctxpolicy calibrate) or written from a preset (ctxpolicy calibrate --preset)."""


@dataclass(frozen=True)
class CellPlan:
    study: Any  # ctxpolicy.study.Study
    adapter: Any
    tasks: list
    attempts: int
    concurrency: int
    cell: Any  # ctxpolicy.grid.Cell, its policy parsed once (cell.spec)
    threshold: int | None
    thresholds_file: Path | None  # where ``threshold`` was read; None without a threshold
    settings_of: dict  # task id -> RunSettings

    def info(self) -> dict:
        """The cell's description at the top of cell.json."""
        cell = self.cell
        return {
            "slug": cell.slug,
            "track": cell.track,
            "benchmark": cell.benchmark,
            "model": cell.model,
            "policy": str(cell.spec),
            "threshold_setting": cell.setting,
            "threshold_tokens": self.threshold,
            "cohort": cell.cohort,
            "summarizer": cell.summarizer,
            "attempts": self.attempts,
            "concurrency": self.concurrency,
        }


def select_cell(args: argparse.Namespace, study: Any) -> Any:
    """The cell to run: ``--cell ID`` looked up in the grid, or the one the flags describe."""
    from ctxpolicy.agent.cli_common import CELL_FLAGS, cell_from_flags
    from ctxpolicy.agent.plan import PlanError

    if args.cell:
        given = [f"--{name}" for name in (*CELL_FLAGS, "cohort") if getattr(args, name) is not None]
        if given:
            raise PlanError(f"--cell {args.cell} names the whole cell; leave out {', '.join(given)}")
        return study.cell_by_id(args.cell)
    missing = [f"--{name}" for name in ("benchmark", "model", "policy") if getattr(args, name) is None]
    if missing:
        raise PlanError(
            f"name the cell: --cell BENCHMARK/MODEL/SLUG, or --benchmark, --model and --policy "
            f"(missing: {', '.join(missing)})"
        )
    return cell_from_flags(args, cohort=args.cohort or "main")


def plan_cell(args: argparse.Namespace) -> CellPlan:
    from ctxpolicy.agent.cli_common import load_study, make_adapter, settings_overrides
    from ctxpolicy.agent.plan import PlanError
    from ctxpolicy.agent.settings import build_settings
    from ctxpolicy.study import Pair

    study = load_study(args)
    cell = select_cell(args, study)
    threshold = study.resolve_threshold(cell, args.thresholds)
    thresholds_file = (
        None if cell.setting is None else (args.thresholds or study.thresholds_file(Pair(cell.model, cell.benchmark)))
    )
    for option, value in (("--concurrency", args.concurrency), ("--attempts", args.attempts)):
        if value is not None and value < 1:  # 0 must not fall back to the config's value
            raise PlanError(f"{option} {value}: must be 1 or more")
    adapter = make_adapter(study, cell.benchmark)
    wanted = study.tasks(cell)
    if args.tasks:
        asked = args.tasks.split(",")
        unknown = sorted(set(asked) - set(wanted))
        if unknown:
            raise PlanError(
                f"--tasks: {', '.join(unknown)} not among the cell's tasks (cohort {cell.cohort}, "
                "cut to the benchmark's cohort_limit)"
            )
        wanted = asked
    tasks = [t for t in adapter.tasks(cell.cohort) if t.task_id in set(wanted)]
    attempts = args.attempts or study.attempts
    concurrency = args.concurrency or study.concurrency(cell.benchmark)
    settings_of = {
        t.task_id: build_settings(
            study.config, cell.benchmark, cell.model, task_timeout_s=t.timeout_s, overrides=settings_overrides(args)
        )
        for t in tasks
    }
    return CellPlan(study, adapter, tasks, attempts, concurrency, cell, threshold, thresholds_file, settings_of)


def planned_runs(plan: CellPlan, out: Path) -> list:
    """Every run of the cell, not yet bound to an endpoint (``execute`` None)."""
    from ctxpolicy.agent.cell import PlannedRun
    from ctxpolicy.agent.plan import run_dir_name

    return [
        PlannedRun(out / run_dir_name(task.task_id, attempt), task.task_id, attempt)
        for task in plan.tasks
        for attempt in range(1, plan.attempts + 1)
    ]


def bind_runs(plan: CellPlan, runs: list, endpoint: Any, summary_endpoint: Any, cancel: threading.Event) -> list:
    """The runs with ``execute`` set: ``execute_run`` against the endpoints, cancellable."""
    from ctxpolicy.agent.plan import cell_identity
    from ctxpolicy.agent.runner import execute_run

    tasks = {task.task_id: task for task in plan.tasks}
    bound = []
    for run in runs:
        task = tasks[run.task_id]
        identity = cell_identity(plan.study, plan.cell, task=task, attempt=run.attempt, threshold=plan.threshold)
        bound.append(
            dataclasses.replace(
                run,
                execute=functools.partial(
                    execute_run,
                    identity=identity,
                    task=task,
                    adapter=plan.adapter,
                    settings=plan.settings_of[task.task_id],
                    endpoint=endpoint,
                    summarizer_endpoint=summary_endpoint,
                    run_dir=run.run_dir,
                    cancel=cancel,
                ),
            )
        )
    return bound


def previous_endpoint(out: Path, runs: list) -> dict | None:
    """The server recorded by the last cell.json, else by a run: for a cell.json written without one."""
    from ctxpolicy.agent.cell import CELL_JSON
    from ctxpolicy.agent.record import RUN_JSON, read_json

    for path in [out / CELL_JSON, *(run.run_dir / RUN_JSON for run in runs)]:
        try:
            record = read_json(path)
            server = record["endpoint"] if path.name == CELL_JSON else record["versions"]["server"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if server:
            return server
    return None


@contextlib.contextmanager
def cell_endpoint(
    config: dict, config_path: Path, model: str, *, url: str | None, served_name: str | None, log_path: Path
):
    """The endpoint of ``model`` for this cell: the session's shared server when a local Snakemake
    run announced one (never for --endpoint or `server: endpoint`), else ``model_endpoint``'s."""
    from ctxpolicy.agent.cli_common import model_endpoint
    from ctxpolicy.agent.plan import endpoint_for_server
    from ctxpolicy.serving.shared import attach, session_from_environment

    model_cfg = config["models"][model]
    session = None if url or model_cfg["server"] == "endpoint" else session_from_environment()
    if session is None:
        with model_endpoint(config, model, url=url, served_name=served_name, log_path=log_path) as endpoint:
            yield endpoint
        return
    handle = attach(session, config_path=config_path, model=model, model_cfg=model_cfg)
    print(f"ctxpolicy: {model}: shared server {handle.base_url} (log {handle.log_path})", file=sys.stderr)
    api_key = os.environ.get(model_cfg["api_key_env"]) if model_cfg.get("api_key_env") else None
    yield dataclasses.replace(endpoint_for_server(handle), api_key=api_key)


def harness_command(plan: CellPlan, args: argparse.Namespace, endpoint: Any):
    """For benchmarks graded by their own harness (Terminal-Bench): the command running given tasks."""
    from ctxpolicy.agent.terminal_bench import harness_kwargs

    kwargs = harness_kwargs(args, cell=plan.cell, thresholds=plan.thresholds_file, cell_dir=args.out, endpoint=endpoint)
    run_id = f"{plan.cell.slug}-{time.strftime('%Y%m%dT%H%M%S')}"
    extra = {"prefix": shlex.split(args.harness_argv)} if getattr(args, "harness_argv", None) else {}
    return lambda task_ids: plan.adapter.harness_argv(
        task_ids,
        model=endpoint.served_name,
        run_id=run_id,
        cell_dir=args.out,
        n_concurrent=plan.concurrency,
        n_attempts=plan.attempts,
        agent_kwargs=kwargs,
        **extra,
    )


def main(args: argparse.Namespace) -> int:
    from ctxpolicy.agent.cell_lock import CellBusy, cell_lock
    from ctxpolicy.agent.interrupt import Interrupted, kill_descendants, raise_on_signals

    try:
        plan = plan_cell(args)
    except input_errors() as exc:
        return fail(str(exc))
    try:
        with cell_lock(args.out), raise_on_signals():
            try:
                return _run(plan, args)
            except Interrupted as exc:  # still holding the lock, further signals ignored
                kill_descendants()
                print(
                    f"ctxpolicy: {args.out}: {exc} received; runs in flight killed and not recorded, no cell.json",
                    file=sys.stderr,
                )
                # Worker threads may still wait on a hung request: they must not delay the exit.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(exc.exit_code)
    except CellBusy as exc:
        print(f"ctxpolicy: {exc}", file=sys.stderr)
        return 1


def _run(plan: CellPlan, args: argparse.Namespace) -> int:
    from ctxpolicy.agent.cell import HarnessError, run_cell, run_cell_with_harness, survey
    from ctxpolicy.agent.cli_common import serving_errors

    out: Path = args.out
    runs = planned_runs(plan, out)
    todo = survey(runs, threshold=plan.threshold, redo_errors=args.redo_errors, redo_stale=args.redo_stale)
    if not todo.pending:  # nothing to execute: no server (minutes of GPU) for a cell.json
        results = run_cell(
            runs,
            cell_dir=out,
            cell_info={**plan.info(), "endpoint": previous_endpoint(out, runs)},
            concurrency=1,
            progress=False,
        )
        return _summary(out, results)
    cancel = threading.Event()
    asked = time.monotonic()
    try:
        with contextlib.ExitStack() as servers:
            cell = plan.cell
            endpoint = servers.enter_context(
                cell_endpoint(
                    plan.study.config,
                    args.config,
                    cell.model,
                    url=args.endpoint,
                    served_name=args.served_name,
                    log_path=out / "server.log",
                )
            )
            summary_endpoint = None
            if cell.summarizer and cell.summarizer != cell.model:
                summary_endpoint = servers.enter_context(
                    cell_endpoint(
                        plan.study.config,
                        args.config,
                        cell.summarizer,
                        url=args.summarizer_endpoint,
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
                results = run_cell_with_harness(
                    runs,
                    argv_for=harness_command(plan, args, endpoint),
                    cell_dir=out,
                    cell_info=cell_info,
                    redo_errors=args.redo_errors,
                    redo_stale=args.redo_stale,
                )
            else:
                runs = bind_runs(plan, runs, endpoint, summary_endpoint, cancel)
                results = run_cell(
                    runs,
                    cell_dir=out,
                    cell_info=cell_info,
                    concurrency=plan.concurrency,
                    redo_errors=args.redo_errors,
                    redo_stale=args.redo_stale,
                    progress=not args.no_progress,
                    cancel=cancel,
                )
    except (*serving_errors(), HarnessError) as exc:
        print(f"ctxpolicy: {exc}", file=sys.stderr)
        return 1
    except BaseException:
        cancel.set()  # however we leave, no run in flight may record itself afterwards
        raise
    return _summary(out, results)


def _summary(out: Path, results: list) -> int:
    from ctxpolicy.agent.cell import limit_warnings

    for warning in limit_warnings(results):
        print(f"ctxpolicy: WARNING: {out}: {warning}", file=sys.stderr)
    outcomes = Counter(result.outcome for result in results)
    print(json.dumps({"cell_dir": str(out), "runs": len(results), "outcomes": dict(outcomes)}))
    return 0
