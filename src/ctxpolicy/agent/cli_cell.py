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
from pathlib import Path

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


def main(args: argparse.Namespace) -> int:
    from ctxpolicy.agent.cell import PlannedRun, run_cell
    from ctxpolicy.agent.cli_common import (
        load_study,
        make_adapter,
        model_endpoint,
        resolve_policy_threshold,
        serving_errors,
        settings_overrides,
    )
    from ctxpolicy.agent.plan import PlanError, make_identity, run_dir_name
    from ctxpolicy.agent.runner import execute_run
    from ctxpolicy.agent.settings import SettingsError, build_settings
    from ctxpolicy.benchmarks.base import BenchmarkError
    from ctxpolicy.config import ConfigError
    from ctxpolicy.grid import Cell
    from ctxpolicy.policies import PolicySpecError

    try:
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
        cell = Cell(args.track, args.benchmark, args.model, args.policy, setting, args.cohort, args.summarizer)
        settings_of = {t.task_id: build_settings(config, args.benchmark, args.model, task_timeout_s=t.timeout_s,
                                                 overrides=settings_overrides(args)) for t in tasks}
    except (ConfigError, PlanError, PolicySpecError, SettingsError, BenchmarkError) as exc:
        return fail(str(exc))
    if concurrency < 1 or attempts < 1:
        return fail(f"--concurrency {concurrency} and --attempts {attempts} must be 1 or more")

    out: Path = args.out
    cell_info = {"slug": cell.slug, "track": cell.track, "benchmark": cell.benchmark, "model": cell.model,
                 "policy": str(policy), "threshold_setting": setting, "threshold_tokens": threshold,
                 "cohort": cell.cohort, "summarizer": cell.summarizer, "attempts": attempts,
                 "concurrency": concurrency}
    try:
        with contextlib.ExitStack() as servers:
            endpoint = servers.enter_context(model_endpoint(
                config, args.model, url=args.endpoint, served_name=args.served_name, log_path=out / "server.log"))
            summary_endpoint = None
            if args.summarizer and args.summarizer != args.model:
                summary_endpoint = servers.enter_context(model_endpoint(
                    config, args.summarizer, url=args.summarizer_endpoint, served_name=None,
                    log_path=out / f"server-{args.summarizer}.log"))
            runs = []
            for task in tasks:
                for attempt in range(1, attempts + 1):
                    identity = make_identity(config=config, benchmark=args.benchmark, cohort=args.cohort,
                                             model=args.model, policy=policy, task=task, attempt=attempt,
                                             threshold_setting=setting, threshold_tokens=threshold,
                                             summarizer=args.summarizer, cell=cell.slug, track=args.track)
                    run_dir = out / run_dir_name(task.task_id, attempt)
                    runs.append(PlannedRun(run_dir, task.task_id, attempt, functools.partial(
                        execute_run, identity=identity, task=task, adapter=adapter,
                        settings=settings_of[task.task_id], endpoint=endpoint,
                        summarizer_endpoint=summary_endpoint, run_dir=run_dir)))
            results = run_cell(runs, cell_dir=out, cell_info={**cell_info, "endpoint": endpoint.server},
                               concurrency=concurrency, redo_errors=args.redo_errors, progress=not args.no_progress)
    except serving_errors() as exc:
        print(f"ctxpolicy: {exc}", file=sys.stderr)
        return 1
    outcomes: dict[str, int] = {}
    for result in results:
        outcomes[result.outcome] = outcomes.get(result.outcome, 0) + 1
    print(json.dumps({"cell_dir": str(out), "runs": len(results), "outcomes": outcomes}))
    return 0
