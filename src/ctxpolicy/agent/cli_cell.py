"""``ctxpolicy run-cell``: its arguments, read into a planned cell (``agent.plan.plan_cell``) that
``agent.cell.execute_cell`` runs.

The cell is named by its id, --cell BENCHMARK/MODEL/SLUG (looked up in the study's grid), or, for
a cell outside the grid, by --benchmark, --model and --policy. What happens in the cell directory
(skipped complete runs, the lock, signals, stale runs) is told once, in the command's epilog
(``CELL_HELP``); docs/architecture.md ("Cells and the grid") has the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ctxpolicy.agent.cli_common import ERROR_PREFIX as ERROR_PREFIX  # cli.main starts our error lines with it
from ctxpolicy.agent.cli_common import ENDPOINT_HELP, add_common_arguments

if TYPE_CHECKING:
    from ctxpolicy.agent.cell import CellOptions
    from ctxpolicy.agent.plan import CellPlan
    from ctxpolicy.study import Study
    from ctxpolicy.study.grid import Cell


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


def select_cell(args: argparse.Namespace, study: Study) -> Cell:
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
    """The ``agent.plan.CellPlan`` the arguments ask for."""
    from ctxpolicy.agent.cli_common import settings_overrides, study_for_flags
    from ctxpolicy.agent.plan import plan_cell as plan

    study = study_for_flags(args)
    return plan(
        study,
        select_cell(args, study),
        thresholds=args.thresholds,
        attempts=args.attempts,
        concurrency=args.concurrency,
        tasks=args.tasks.split(",") if args.tasks else None,
        overrides=settings_overrides(args),
    )


def cell_options(args: argparse.Namespace) -> CellOptions:
    """The ``agent.cell.CellOptions`` the arguments give."""
    from ctxpolicy.agent.cell import CellOptions

    return CellOptions(
        out=args.out,
        config=Path(args.config),
        endpoint=args.endpoint,
        served_name=args.served_name,
        summarizer_endpoint=args.summarizer_endpoint,
        redo_errors=args.redo_errors,
        redo_stale=args.redo_stale,
        progress=not args.no_progress,
        harness_argv=getattr(args, "harness_argv", None),
        mode=args.mode,
        step_limit=args.step_limit,
        max_tokens=args.max_tokens,
    )


def main(args: argparse.Namespace) -> int:
    """Bad input (exit code 2), a busy cell, the serving and harness errors (exit code 1) leave as
    raised, for ``cli.main`` to report; a signal ends the process here, at once."""
    from ctxpolicy.agent.cell import execute_cell
    from ctxpolicy.agent.cell_lock import cell_lock
    from ctxpolicy.agent.interrupt import Interrupted, kill_descendants, raise_on_signals
    from ctxpolicy.sandbox import quota

    plan = plan_cell(args)
    with cell_lock(args.out), raise_on_signals():
        try:
            results = execute_cell(plan, cell_options(args))
        except Interrupted as exc:  # still holding the lock, further signals ignored
            kill_descendants()
            quota.release_all()  # the runs in flight never reach their own release
            print(
                f"ctxpolicy: {args.out}: {exc} received; runs in flight killed and not recorded, no cell.json",
                file=sys.stderr,
            )
            # Worker threads may still wait on a hung request: they must not delay the exit.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(exc.exit_code)
    return _summary(args.out, results)


def _summary(out: Path, results: list) -> int:
    from ctxpolicy.agent.cell import limit_warnings

    for warning in limit_warnings(results):
        print(f"ctxpolicy: WARNING: {out}: {warning}", file=sys.stderr)
    outcomes = Counter(result.outcome for result in results)
    print(json.dumps({"cell_dir": str(out), "runs": len(results), "outcomes": dict(outcomes)}))
    return 0
