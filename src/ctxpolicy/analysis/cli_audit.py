"""Audit every compression step of recorded runs: anchors kept, summarised or lost,
constraints kept / preserved / lost / contradicted, and reacquisition commands afterwards.

    ctxpolicy audit --runs CELL_DIR [--runs ...] --out results/tables/events.parquet
                    [--judge-url URL --judge-model NAME] [--verdicts FILE]

Only complete runs are read (``run.json`` with ``complete: true``, read as ``cost --runs`` and
``view`` read them); ``stale/`` and ``workspace/`` are skipped, and every other run directory
(incomplete, unreadable, nested too deeply, an open proxy conversation) is reported on stderr as
"left out: PATH: reason". So is a run the tables cannot read (``ctxpolicy aggregate`` leaves out
the same ones) or one that cannot be audited; the others are audited. Without a judge, a
constraint counts as preserved only where the step's summary repeats it word for word. With one,
verdicts go to ``--verdicts`` (default: ``OUT`` with ``.verdicts.jsonl``), which also serves as
the cache that makes a re-run reproduce them. See docs/analysis.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ctxpolicy.errors import UsageError

ERROR_PREFIX = "audit: "  # cli.main starts our error lines with it


class AuditError(UsageError):
    """Bad arguments, a judge or runs that cannot be used: one line, exit code 2."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_out, add_runs

    add_runs(p, "cell directories (or any folders above run directories); repeatable")
    add_out(p, "the events table to write (.parquet)", required=True)
    p.add_argument(
        "--judge-url", help="OpenAI-compatible base URL of a constraint judge (e.g. http://127.0.0.1:8080/v1)"
    )
    p.add_argument("--judge-model", help="the judge's model name (required with --judge-url)")
    p.add_argument(
        "--judge-templates",
        type=Path,
        metavar="DIR",
        help="folder with judge_constraints.system.txt / .user.txt (default: as the summary templates)",
    )
    p.add_argument("--verdicts", type=Path, help="the judge's verdict file (default: OUT.verdicts.jsonl)")
    p.add_argument("--resamples", type=int, default=2000, help="task-bootstrap resamples of the printed rates")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--processes",
        type=int,
        default=None,
        help="worker processes without a judge endpoint (default: the usable CPUs, at most 8)",
    )


def main(args: argparse.Namespace) -> int:
    from ctxpolicy.analysis.judge import EndpointJudge, JudgeError, LexicalJudge, VerdictCache
    from ctxpolicy.analysis.table import frame, write_events
    from ctxpolicy.rundir import read_tree

    if bool(args.judge_url) != bool(args.judge_model):
        raise AuditError("--judge-url and --judge-model go together")
    if args.out.suffix != ".parquet":
        raise AuditError(f"--out {args.out}: must end in .parquet")
    try:
        if args.judge_url:
            verdicts = args.verdicts or args.out.with_suffix(".verdicts.jsonl")
            judge = EndpointJudge(
                args.judge_url, args.judge_model, cache=VerdictCache(verdicts), template_dir=args.judge_templates
            )
        else:
            judge = LexicalJudge()
        tree = read_tree(args.runs)  # complete runs; the others left out by path and reason
        for problem in tree.left_out:
            print(f"left out: {problem}", file=sys.stderr)
        run_dirs = tree.runs
        processes = _processes(args.processes, len(run_dirs)) if not args.judge_url else 1
        audited = audit_runs(run_dirs, judge, processes)
        rows, left_out = [], 0
        for run_rows, problem, warning in audited:
            if warning:
                print(f"audit: {warning}", file=sys.stderr)
            if problem is not None:  # this run only: reported, the others audited
                print(f"left out: {problem}", file=sys.stderr)
                left_out += 1
            rows += run_rows
    except (JudgeError, NotADirectoryError) as exc:  # a judge or --runs that cannot be used: the user's to fix
        raise AuditError(str(exc)) from None
    table = frame(rows)
    write_events(table, args.out)
    left_out += len(tree.left_out)
    also = f" ({left_out} left out)" if left_out else ""
    audited_runs = len(run_dirs) - (left_out - len(tree.left_out))
    print(f"audit: {len(rows)} compression steps from {audited_runs} runs{also} -> {args.out}")
    print(_per_policy(table, args.resamples, args.seed))
    return 0


def audit_runs(run_dirs: list[Path], judge, processes: int = 1) -> list[tuple[list[dict], str | None, str | None]]:
    """Each run's (rows, the reason it is left out or None, its no-action warning or None), in
    the runs' order: what ``ctxpolicy audit`` audits (``benchmarks/bench_replay.py`` times this).
    Runs are audited grouped by run name, so that the replays of one source follow each other
    and share the memos (the anchors', ``rundir``'s parsed base store); with ``processes`` > 1
    (the lexical judge only: it is pure) in that many worker processes, each given runs of a few
    sources at a time."""
    order = sorted(range(len(run_dirs)), key=lambda i: (run_dirs[i].name, i))
    if processes > 1:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(processes) as pool:
            chunk = max(1, min(64, len(order) // (processes * 4)))
            results = pool.map(_audit_lexical, [run_dirs[i] for i in order], chunksize=chunk)
            audited = dict(zip(order, results))
    else:
        audited = {i: _audit_one(run_dirs[i], judge) for i in order}
    return [audited[i] for i in range(len(run_dirs))]


def _processes(asked: int | None, runs: int) -> int:
    import os

    return max(1, min(asked or min(len(os.sched_getaffinity(0)), 8), runs))


def _audit_one(run_dir: Path, judge) -> tuple[list[dict], str | None, str | None]:
    """The run's rows, or no rows and the reason it is left out ("PATH: reason"); and its
    no-action warning, if any."""
    from ctxpolicy.analysis.audit import RecordError, audit_checked

    warnings: list[str] = []
    try:
        rows = audit_checked(run_dir, judge, warnings)
    except RecordError as exc:
        return [], str(exc), None
    return rows, None, warnings[0] if warnings else None


def _audit_lexical(run_dir: Path) -> tuple[list[dict], str | None, str | None]:
    from ctxpolicy.analysis.judge import LexicalJudge

    return _audit_one(run_dir, LexicalJudge())


def _per_policy(table, resamples: int, seed: int) -> str:
    """One line per policy: compression steps, anchor and constraint retention (the share of what
    was at risk that the compressed context still states) and reacquisitions per step, each with
    its task-bootstrap 95% interval."""
    from ctxpolicy.analysis.summary import by_policy

    def rate(row, name: str) -> str:
        if row[name] != row[name]:  # NaN: nothing at risk
            return "n/a"
        return f"{row[name]:.2f} (95% CI {row[name + '_lo']:.2f}-{row[name + '_hi']:.2f})"

    lines = []
    for row in by_policy(table, n_boot=resamples, seed=seed).to_dict("records"):
        lines.append(
            f"  {row['benchmark']}/{row['model']} {row['policy']} ({row['threshold_setting']}): "
            f"{row['n_events']} compression steps; anchor retention {rate(row, 'anchor_retention')}; "
            f"constraint retention {rate(row, 'constraint_retention')}; "
            f"reacquisitions per step {rate(row, 'reacq_per_event')}"
        )
    return "\n".join(lines) or "  no compression steps"
