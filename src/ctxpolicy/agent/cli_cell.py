"""Execute all runs of one cell (every task of the cohort × attempts 1..A) against one model server.

Runs go a few at a time (--concurrency, default: the benchmark's `concurrency` in the config)
into CELL_DIR/{task_id}__a{attempt}/; the cell's model server is started and stopped here, its
log kept in CELL_DIR/server.log, unless --endpoint names a running one. Runs already complete
(run.json with complete: true) are skipped, so a killed cell started again redoes only the
missing ones. CELL_DIR/cell.json, written last, lists every run and its outcome.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxpolicy.agent.cli_common import ENDPOINT_HELP, add_common_arguments, fail


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ENDPOINT_HELP
    add_common_arguments(parser)
    parser.add_argument("--cohort", default="main", help="cohort of tasks (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, help="runs at once (default: the benchmark's concurrency)")
    parser.add_argument("--attempts", type=int, help="attempts per task (default: the config's attempts)")
    parser.add_argument("--tasks", help="comma-separated task ids: run only these of the cohort")
    parser.add_argument("--redo-errors", action="store_true", help="run again the runs whose outcome was error")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--out", type=Path, required=True, help="the cell directory")


@dataclass(frozen=True)
class CellPlan:
    config: dict
    adapter: Any
    tasks: list
    attempts: int
    concurrency: int
    cell: Any  # ctxpolicy.grid.Cell
    policy: Any  # ctxpolicy.policies.PolicySpec
    setting: str | None
    threshold: int | None
    settings_of: dict  # task id -> RunSettings

    def info(self) -> dict:
        """The cell's description at the top of cell.json."""
        cell = self.cell
        return {"slug": cell.slug, "track": cell.track, "benchmark": cell.benchmark, "model": cell.model,
                "policy": str(self.policy), "threshold_setting": self.setting, "threshold_tokens": self.threshold,
                "cohort": cell.cohort, "summarizer": cell.summarizer, "attempts": self.attempts,
                "concurrency": self.concurrency}


def plan_cell(args: argparse.Namespace) -> CellPlan:
    from ctxpolicy.agent.cli_common import load_study, make_adapter, resolve_policy_threshold, settings_overrides
    from ctxpolicy.agent.plan import PlanError
    from ctxpolicy.agent.settings import build_settings
    from ctxpolicy.grid import Cell

    config = load_study(args)
    policy, setting, threshold = resolve_policy_threshold(args, config)
    adapter = make_adapter(config, args.benchmark)
    tasks = adapter.tasks(args.cohort)
    if args.tasks:
        wanted = args.tasks.split(",")
        unknown = sorted(set(wanted) - {t.task_id for t in tasks})
        if unknown:
            raise PlanError(f"--tasks: {', '.join(unknown)} not in cohort {args.cohort}")
        tasks = [t for t in tasks if t.task_id in wanted]
    attempts = args.attempts or int(config.get("attempts", 1))
    concurrency = args.concurrency or int(config["benchmarks"][args.benchmark].get("concurrency", 1))
    if concurrency < 1 or attempts < 1:
        raise PlanError(f"--concurrency {concurrency} and --attempts {attempts} must be 1 or more")
    cell = Cell(args.track, args.benchmark, args.model, args.policy, setting, args.cohort, args.summarizer)
    settings_of = {t.task_id: build_settings(config, args.benchmark, args.model, task_timeout_s=t.timeout_s,
                                             overrides=settings_overrides(args)) for t in tasks}
    return CellPlan(config, adapter, tasks, attempts, concurrency, cell, policy, setting, threshold, settings_of)


def planned_runs(plan: CellPlan, out: Path, endpoint: Any, summary_endpoint: Any) -> list:
    from ctxpolicy.agent.cell import PlannedRun
    from ctxpolicy.agent.plan import make_identity, run_dir_name
    from ctxpolicy.agent.runner import execute_run

    cell = plan.cell
    runs = []
    for task in plan.tasks:
        for attempt in range(1, plan.attempts + 1):
            identity = make_identity(config=plan.config, benchmark=cell.benchmark, cohort=cell.cohort,
                                     model=cell.model, policy=plan.policy, task=task, attempt=attempt,
                                     threshold_setting=plan.setting, threshold_tokens=plan.threshold,
                                     summarizer=cell.summarizer, cell=cell.slug, track=cell.track)
            run_dir = out / run_dir_name(task.task_id, attempt)
            runs.append(PlannedRun(run_dir, task.task_id, attempt, functools.partial(
                execute_run, identity=identity, task=task, adapter=plan.adapter,
                settings=plan.settings_of[task.task_id], endpoint=endpoint,
                summarizer_endpoint=summary_endpoint, run_dir=run_dir)))
    return runs


def harness_command(plan: CellPlan, args: argparse.Namespace, endpoint: Any):
    """For benchmarks graded by their own harness (Terminal-Bench): the command running given tasks."""
    from ctxpolicy.agent.terminal_bench import harness_kwargs

    kwargs = harness_kwargs(args, cell_dir=args.out, endpoint=endpoint, track=plan.cell.track)
    run_id = f"{plan.cell.slug}-{time.strftime('%Y%m%dT%H%M%S')}"
    return lambda task_ids: plan.adapter.harness_argv(
        task_ids, model=endpoint.served_name, run_id=run_id, cell_dir=args.out, n_concurrent=plan.concurrency,
        n_attempts=plan.attempts, agent_kwargs=kwargs)


def main(args: argparse.Namespace) -> int:
    from ctxpolicy.agent.cell import HarnessError, run_cell, run_cell_with_harness
    from ctxpolicy.agent.cli_common import input_errors, model_endpoint, serving_errors

    try:
        plan = plan_cell(args)
    except input_errors() as exc:
        return fail(str(exc))
    out: Path = args.out
    try:
        with contextlib.ExitStack() as servers:
            endpoint = servers.enter_context(model_endpoint(
                plan.config, args.model, url=args.endpoint, served_name=args.served_name,
                log_path=out / "server.log"))
            summary_endpoint = None
            if args.summarizer and args.summarizer != args.model:
                summary_endpoint = servers.enter_context(model_endpoint(
                    plan.config, args.summarizer, url=args.summarizer_endpoint, served_name=None,
                    log_path=out / f"server-{args.summarizer}.log"))
            runs = planned_runs(plan, out, endpoint, summary_endpoint)
            cell_info = {**plan.info(), "endpoint": endpoint.server}
            if hasattr(plan.adapter, "harness_argv"):
                results = run_cell_with_harness(runs, argv_for=harness_command(plan, args, endpoint),
                                                cell_dir=out, cell_info=cell_info, redo_errors=args.redo_errors)
            else:
                results = run_cell(runs, cell_dir=out, cell_info=cell_info, concurrency=plan.concurrency,
                                   redo_errors=args.redo_errors, progress=not args.no_progress)
    except (*serving_errors(), HarnessError) as exc:
        print(f"ctxpolicy: {exc}", file=sys.stderr)
        return 1
    outcomes = Counter(result.outcome for result in results)
    print(json.dumps({"cell_dir": str(out), "runs": len(results), "outcomes": dict(outcomes)}))
    return 0
