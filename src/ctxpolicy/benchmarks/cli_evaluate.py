"""Grade a cell's runs with the benchmark's own harness.

  ctxpolicy evaluate --config C --benchmark B --runs CELL_DIR [CELL_DIR ...] [--force]

Grades every complete run directory of each CELL_DIR that has no verdict.json yet (all of them
with --force), writes verdict.json into each, and CELL_DIR/eval.json with the cell's summary.
"""

from __future__ import annotations

import argparse
from pathlib import Path

ERROR_PREFIX = "error: "  # cli.main starts our error lines with it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_config, add_runs, deprecated_positional

    add_config(parser, "config file", required=True)
    parser.add_argument("--benchmark", required=True, help="a benchmark of the config")
    runs = add_runs(parser, "the cells' directories of run directories (repeatable; required)", required=False)
    deprecated_positional(parser, "legacy_cell_dir", metavar="CELL_DIR", replacement=runs)
    parser.add_argument("--force", action="store_true", help="grade again runs that already have a verdict")


def main(args: argparse.Namespace) -> int:
    """A BenchmarkError or ConfigError (exit code 2) leaves as raised, for ``cli.main`` to report."""
    from ctxpolicy.benchmarks import BenchmarkError, get_adapter
    from ctxpolicy.study.config import load_config
    from ctxpolicy.paths import REPO_ROOT

    if not args.runs:
        raise BenchmarkError("evaluate: --runs CELL_DIR is required")
    config = load_config(args.config)
    if args.benchmark not in config["benchmarks"]:
        raise BenchmarkError(
            f"{args.config}: benchmarks.{args.benchmark} not found (have {', '.join(config['benchmarks'])})"
        )
    for cell_dir in args.runs:
        if not cell_dir.is_dir():
            raise BenchmarkError(f"--runs: cell directory not found: {cell_dir}")
    adapter = get_adapter(args.benchmark, config["benchmarks"][args.benchmark], REPO_ROOT)
    for cell_dir in args.runs:
        summary = evaluate_cell(adapter, args.benchmark, cell_dir, force=args.force)
        print(
            f"{cell_dir}: {summary['n_resolved']}/{summary['n_graded']} resolved "
            f"({summary['n_runs']} complete runs, {summary['n_incomplete']} incomplete)"
        )
    return 0


def evaluate_cell(adapter, benchmark: str, cell_dir: Path, *, force: bool = False) -> dict:
    from ctxpolicy import rundir

    run_dirs = rundir.runs_of_cell(cell_dir)
    complete = [d for d in run_dirs if rundir.is_complete_run(d)]
    pending = [d for d in complete if force or not (d / rundir.VERDICT_JSON).is_file()]
    if pending:
        if getattr(adapter, "grades_in_environment", True):
            adapter.check_environment()
        adapter.evaluate(pending, cell_dir / "eval_logs")
    summary = summarize(benchmark, cell_dir, complete, incomplete=len(run_dirs) - len(complete))
    rundir.write_eval_json(cell_dir, summary)
    return summary


def summarize(benchmark: str, cell_dir: Path, run_dirs: list[Path], incomplete: int) -> dict:
    from ctxpolicy import rundir
    from ctxpolicy.benchmarks.base import BenchmarkError, read_run

    runs = {}
    for run_dir in run_dirs:
        record = read_run(run_dir)
        try:
            verdict = rundir.read_verdict(run_dir)
        except rundir.RunRecordError as exc:
            raise BenchmarkError(str(exc)) from None
        runs[run_dir.name] = {
            "task_id": record.task_id,
            "attempt": record.attempt,
            "resolved": verdict["resolved"] if verdict else None,
            "harness": verdict["harness"] if verdict else None,
        }
    graded = [r for r in runs.values() if r["resolved"] is not None]
    resolved = sum(r["resolved"] for r in graded)
    return {
        "benchmark": benchmark,
        "cell": cell_dir.name,
        "n_runs": len(runs),
        "n_incomplete": incomplete,
        "n_graded": len(graded),
        "n_resolved": resolved,
        "resolved_rate": resolved / len(graded) if graded else None,
        "runs": runs,
    }
