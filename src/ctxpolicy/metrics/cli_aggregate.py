"""Build results/tables/runs.parquet and calls.parquet from run directories.

Every directory under the --runs roots that holds a run file is read. Runs that are missing,
partial, corrupt or hold a value of the wrong type are listed on stderr ("left out: PATH:
reason", naming the field and value) and in left_out.json next to the tables, and the rest are
aggregated; the exit code is 0 when tables were written (1 when any run was left out and
--strict is given, 2 for bad arguments or an unwritable --out).
Columns: docs/schema.md (SECTION tables). Definitions: docs/metrics.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ctxpolicy.errors import UsageError


ERROR_PREFIX = "aggregate: "  # cli.main starts our error lines with it


class AggregateError(UsageError):
    """Bad arguments, no runs, or tables that cannot be written: one line, exit code 2."""


def add_arguments(parser) -> None:
    from ctxpolicy.cli_args import add_out, add_runs
    from ctxpolicy.metrics.cost import DEFAULT_BLOCK, DEFAULT_DISCOUNT

    add_runs(parser, "directories of run directories (repeatable), e.g. results/runs")
    add_out(parser, "output directory (default results/tables)", default=Path("results/tables"))
    parser.add_argument(
        "--block", type=int, default=DEFAULT_BLOCK, help=f"cache block size in tokens (default {DEFAULT_BLOCK})"
    )
    parser.add_argument(
        "--discount",
        type=float,
        default=DEFAULT_DISCOUNT,
        help=f"price of a cached input token relative to a fresh one (default {DEFAULT_DISCOUNT:g})",
    )
    parser.add_argument("--processes", type=int, default=None, help="parser processes (default: all cores)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when any run was left out")


def no_action_warnings(runs) -> list[str]:
    """One warning per run whose agent calls hold no command the run's action format recognises."""
    from ctxpolicy.policies.actions import no_action_warning

    if runs is None or not len(runs):
        return []
    silent = runs[(runs["agent_calls"] > 0) & (runs["retrieval_cmds"] + runs["execution_cmds"] == 0)]
    return [no_action_warning(row.run_dir, int(row.agent_calls), None) for row in silent.itertuples()]


def main(args) -> int:
    from ctxpolicy.metrics.aggregate import aggregate, write_left_out, write_tables
    from ctxpolicy.metrics.records import RecordError

    if args.block < 1 or not 0 <= args.discount <= 1:
        raise AggregateError(f"--block must be >= 1 and --discount in [0, 1]: got {args.block}, {args.discount}")
    try:
        tables = aggregate(
            args.runs, block=args.block, discount=args.discount, processes=args.processes, progress=sys.stderr.isatty()
        )
    except RecordError as exc:  # --runs names no run directory: the user's to fix
        raise AggregateError(str(exc)) from None
    for problem in tables.problems:
        print(f"left out: {problem.path}: {problem.reason}", file=sys.stderr)
    for line in no_action_warnings(tables.runs):
        print(line, file=sys.stderr)
    try:
        runs_path, calls_path = write_tables(tables, args.out)
        write_left_out(tables, args.out)
    except OSError as exc:
        raise AggregateError(f"{exc.filename or args.out}: cannot write the tables ({exc.strerror or exc})") from None
    print(
        f"{len(tables.runs)} runs -> {runs_path}; {len(tables.calls)} calls -> {calls_path}; "
        f"{len(tables.problems)} left out"
    )
    return 1 if args.strict and tables.problems else 0
