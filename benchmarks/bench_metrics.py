"""Time and peak memory of aggregation plus every comparison on a study-sized synthetic corpus.

Targets (issue 4): 35,000 runs of about 100 calls, aggregation + all comparisons with
10,000-resample intervals, under 60 s and 4 GB on a 2-core machine.

    .venv/bin/python benchmarks/bench_metrics.py [--runs 35000] [--calls 100] [--processes 2]

The corpus (about 7 GB) is generated once into --workdir and reused while its parameters match;
generation is not part of the timed figures. Wall time depends on what else runs on the
machine, so the CPU time of all processes and the load average are printed too. Peak memory is reported for the main process and
for the largest parser worker; their sum (main + processes x worker) bounds the total.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import sys
import time
from pathlib import Path

from ctxpolicy.metrics.aggregate import aggregate, write_tables
from ctxpolicy.metrics.compare import (
    compare_to_baseline,
    outcome_breakdown,
    paired_differences,
)
from ctxpolicy.testing.runs import make_runs

MODELS = ["qwen", "devstral", "glm"]
BENCHMARKS = ["swebench", "terminalbench"]
POLICIES = ["FC", "TR/Th/0.5", "TRC/Th", "SU/Th/0.5", "S-p/Th/0.5", "OTRC/St", "OTRC+TR/St+Th/0.5"]
ATTEMPTS = 3


def corpus(workdir: Path, runs: int, calls: int, processes: int) -> Path:
    root = workdir / "runs"
    cells = len(MODELS) * len(BENCHMARKS) * len(POLICIES)
    tasks = math.ceil(runs / (cells * ATTEMPTS))
    params = {
        "tasks": tasks,
        "calls": calls,
        "models": MODELS,
        "benchmarks": BENCHMARKS,
        "policies": POLICIES,
        "attempts": ATTEMPTS,
        "version": 2,
    }
    marker = workdir / "params.json"
    if marker.exists() and json.loads(marker.read_text()) == params:
        print(f"reusing corpus in {root}")
        return root
    shutil.rmtree(workdir, ignore_errors=True)
    root.mkdir(parents=True)
    started = time.perf_counter()
    written = make_runs(
        root,
        models=MODELS,
        benchmarks=BENCHMARKS,
        policies=POLICIES,
        settings=["primary"],
        tasks=tasks,
        attempts=ATTEMPTS,
        calls_per_run=calls,
        seed=0,
        processes=processes,
        progress=sys.stderr.isatty(),
    )
    marker.write_text(json.dumps(params))
    print(f"generated {len(written):,} runs in {time.perf_counter() - started:.0f} s (not timed below)")
    return root


AGGREGATE_ONE = """
import sys
from pathlib import Path
from ctxpolicy.metrics.aggregate import aggregate, write_left_out, write_tables
tables = aggregate([Path(sys.argv[1])], processes=int(sys.argv[3]))
write_tables(tables, Path(sys.argv[2]))
write_left_out(tables, Path(sys.argv[2]))
"""
IDENTITY_FILES = ("runs.parquet", "calls.parquet", "left_out.json")


def identity(root: Path, rev: str, workdir: Path, processes: int) -> bool:
    """The tables of ``root`` from the code at git revision ``rev`` and from this checkout's
    ``src``, compared byte for byte (each aggregated in its own interpreter)."""
    import subprocess
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    same = True
    with tempfile.TemporaryDirectory(dir=workdir) as scratch:
        scratch = Path(scratch)
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "src"], check=True, capture_output=True)
        (scratch / "then").mkdir()
        subprocess.run(["tar", "-x", "-C", str(scratch / "then")], input=archive.stdout, check=True)
        for name, src in (("then", scratch / "then" / "src"), ("now", repo / "src")):
            env = {**os.environ, "PYTHONPATH": str(src)}
            subprocess.run(
                [sys.executable, "-c", AGGREGATE_ONE, str(root), str(scratch / f"{name}-tables"), str(processes)],
                env=env,
                check=True,
            )
        for file in IDENTITY_FILES:
            then, now = (scratch / f"{name}-tables" / file for name in ("then", "now"))
            equal = then.read_bytes() == now.read_bytes()
            same &= equal
            print(f"  {file:16s} {'identical' if equal else 'DIFFERENT'} ({now.stat().st_size:,} bytes)")
    return same


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (the parser workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=35_000)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ctxpolicy-bench-metrics"))
    parser.add_argument(
        "--identity",
        metavar="REV",
        help="compare the tables (runs.parquet, calls.parquet, left_out.json) byte for byte with those of "
        "git revision REV's code on this corpus (use a reduced --runs), instead of timing",
    )
    args = parser.parse_args()

    root = corpus(args.workdir, args.runs, args.calls, args.processes)
    if args.identity:
        print(f"tables of {root} from {args.identity} and from this checkout:")
        same = identity(root, args.identity, args.workdir, args.processes)
        print("identical" if same else "the tables differ")
        return 0 if same else 1
    phases = {}
    load_before = os.getloadavg()[0]
    cpu_started = cpu_seconds()
    started = time.perf_counter()
    tables = aggregate([root], processes=args.processes, progress=sys.stderr.isatty())
    phases["aggregate (parse + tables)"] = (time.perf_counter() - started, cpu_seconds() - cpu_started)
    mark, cpu_mark = time.perf_counter(), cpu_seconds()
    write_tables(tables, args.workdir / "tables")
    phases["write parquet"] = (time.perf_counter() - mark, cpu_seconds() - cpu_mark)
    mark, cpu_mark = time.perf_counter(), cpu_seconds()
    runs = tables.runs
    results = []
    for benchmark in BENCHMARKS:
        for model in MODELS:
            scope = {"model": model, "benchmark": benchmark}
            results.append(compare_to_baseline(runs, **scope, n_boot=args.n_boot))  # gains, losses, calls too
            results.append(paired_differences(runs, **scope, n_boot=args.n_boot, holm=True))
    results.append(outcome_breakdown(runs))
    phases["comparisons"] = (time.perf_counter() - mark, cpu_seconds() - cpu_mark)
    total = time.perf_counter() - started
    cpu = cpu_seconds() - cpu_started

    comparisons = sum(len(r) for r in results)
    print(
        f"runs: {len(runs):,} read, {len(tables.problems)} left out; calls: {len(tables.calls):,}; "
        f"comparison rows: {comparisons:,} ({args.n_boot:,} resamples each interval)"
    )
    print(f"  {'phase':28s} {'wall':>7s}   {'CPU':>7s}")
    for name, (seconds, cpu_phase) in phases.items():
        print(f"  {name:28s} {seconds:7.1f} s {cpu_phase:7.1f} s")
    main_mb, worker_mb = peak_mb(resource.RUSAGE_SELF), peak_mb(resource.RUSAGE_CHILDREN)
    bound_mb = main_mb + args.processes * worker_mb
    print(f"  {'total':28s} {total:7.1f} s   (target < 60 s)")
    print(
        f"CPU time, all processes: {cpu:.1f} s (on {args.processes} idle cores the wall time is at least "
        f"{cpu / args.processes:.1f} s); load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    print(
        f"peak memory: main {main_mb:,.0f} MB, largest worker {worker_mb:,.0f} MB, "
        f"bound {bound_mb:,.0f} MB   (target < 4096 MB)"
    )
    return 0 if total < 60 and bound_mb < 4096 else 1


if __name__ == "__main__":
    raise SystemExit(main())
