"""Time and peak memory of aggregation plus every comparison on a study-sized synthetic corpus.

Targets (issue 33, tightening issue 4's 60 s and 4 GB): 35,000 runs of about 100 calls,
aggregation + all comparisons with 10,000-resample intervals, under 30 s and no more than 1.9 GB
on 2 idle cores. The modules the timed code imports are imported before the clock starts
(statsmodels, which the comparisons import when first asked, is timed and printed apart); numba and
the compiled loops of ``metrics.tree_kernels`` load inside the clock, as in any aggregate (about
0.5 s from numba's cache; a first run in a fresh checkout compiles them, 2.3 s more). After
the timed figures, a profile of the reader on a few hundred runs says where its time goes
(``--profile N``).

    .venv/bin/python benchmarks/bench_metrics.py [--runs 35000] [--calls 100] [--processes 2] [--calls-version 2]

The corpus's calls.jsonl is written in schema version 2 by default, as every writer of ours
(the harness, the proxy, the replay) writes it; ``--calls-version 1`` writes the whole-prompt
version 1 of older records (about 7 GB at the default size, against about 2.5 GB).

``--identity REV`` (at a reduced ``--runs``) instead aggregates the corpus with the code of git
revision REV and with this checkout's, and compares runs.parquet, calls.parquet and
left_out.json byte for byte: a change to the reader must not change a table.

The corpus is generated once into --workdir and reused while its parameters match;
generation is not part of the timed figures. Wall time depends on what else runs on the
machine, so the CPU time of all processes and the load average are printed too, and what the
aggregate read from disk rather than from the page cache (a corpus just evicted by other work
reads a third slower, in CPU time too). So that runs compare, the corpus is read into the page
cache before the clock starts (``--cold``: not; the page cache's growth meanwhile, the part read
back from disk, is printed beside it). Peak memory is reported
for the main process and for the largest parser worker; their sum (main + processes x worker)
bounds the total; the pages the main process and the workers faulted in are printed beside it
(on a virtual machine whose host backs fresh memory slowly, each costs time: ``metrics.pages``).
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
from ctxpolicy.metrics.cost import DEFAULT_BLOCK, DEFAULT_DISCOUNT
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
TARGET_S = 30  # issue 33: the study's size on 2 idle cores (it was 104 s)
TARGET_MB = 1946  # issue 33: no more than the 1.9 GB peak it had


def corpus(workdir: Path, runs: int, calls: int, processes: int, calls_version: int = 2) -> Path:
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
        "calls_version": calls_version,
    }
    marker = workdir / "params.json"
    if marker.exists() and {"calls_version": 1, **json.loads(marker.read_text())} == params:  # older markers: version 1
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
        calls_version=calls_version,
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


def damaged_copy(root: Path, out: Path, runs: int = 60) -> Path:
    """The first ``runs`` run directories of ``root`` copied under ``out``, every sixth left as it
    is and the others damaged in turn (a wrong type in run.json, no verdict, calls.jsonl cut
    short, a verdict linked out of the run directory, a corrupt store line), so that the runs left
    out and their reasons are compared too."""
    from ctxpolicy.metrics.records import find_run_dirs

    for number, run_dir in enumerate(find_run_dirs([root])[:runs]):
        copy = out / run_dir.relative_to(root)
        shutil.copytree(run_dir, copy)
        kind = number % 6
        if kind == 1:
            text = (copy / "run.json").read_text()
            (copy / "run.json").write_text(text.replace('"attempt": ', '"attempt": "x", "was": ', 1))
        elif kind == 2:
            (copy / "verdict.json").unlink()
        elif kind == 3:
            (copy / "calls.jsonl").write_bytes((copy / "calls.jsonl").read_bytes()[:500])
        elif kind == 4:
            (copy / "verdict.json").unlink()
            (copy / "verdict.json").symlink_to("/etc/hostname")
        elif kind == 5:
            (copy / "messages.jsonl").write_bytes(b"{not json\n" + (copy / "messages.jsonl").read_bytes())
    return out


def identity(root: Path, rev: str, workdir: Path, processes: int) -> bool:
    """The tables of ``root`` (and of a damaged copy of part of it) from the code at git revision
    ``rev`` and from this checkout's ``src``, compared byte for byte (each aggregated in its own
    interpreter)."""
    import subprocess
    import tempfile

    repo = Path(__file__).resolve().parents[1]
    same = True
    with tempfile.TemporaryDirectory(dir=workdir) as scratch:
        scratch = Path(scratch)
        archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "src"], check=True, capture_output=True)
        (scratch / "then").mkdir()
        subprocess.run(["tar", "-x", "-C", str(scratch / "then")], input=archive.stdout, check=True)
        corpora = {"corpus": root, "damaged copy": damaged_copy(root, scratch / "damaged")}
        for label, corpus in corpora.items():
            print(f"  {label}:")
            for name, src in (("then", scratch / "then" / "src"), ("now", repo / "src")):
                env = {**os.environ, "PYTHONPATH": str(src)}
                tables = scratch / label / name
                subprocess.run(
                    [sys.executable, "-c", AGGREGATE_ONE, str(corpus), str(tables), str(processes)], env=env, check=True
                )
            for file in IDENTITY_FILES:
                then, now = (scratch / label / name / file for name in ("then", "now"))
                equal = then.read_bytes() == now.read_bytes()
                same &= equal
                print(f"    {file:16s} {'identical' if equal else 'DIFFERENT'} ({now.stat().st_size:,} bytes)")
    return same


def where_time_goes(root: Path, runs: int, processes: int) -> None:
    """A profile of the reader (one process) on the first ``runs`` run directories, read in chunks
    of the size the aggregate gives a worker on the whole corpus: the share of its time in each
    step. Steps nest (the chunk's columns include the cost methods)."""
    import cProfile
    import pstats

    from ctxpolicy import rundir
    from ctxpolicy.metrics import call_ids, chunk, commands, cost, encoded_prompts, records, typed_lines
    from ctxpolicy.metrics.aggregate import chunk_size
    from ctxpolicy.metrics.cost_methods import anthropic

    steps = {
        "read_runs (all)": records.read_runs,
        "  parse_run (each run on its own)": records.parse_run,
        "    file reads (rundir.read_bytes)": rundir.read_bytes,
        "    JSON lines parse": records._parse_lines,
        "    run/verdict checks": records._check_record,
        "    store + command counts": records._read_stores,
        "      command counting": commands.count_commands,
        "    calls.jsonl (_read_calls)": records._read_calls,
        "      compiled path (typed_lines)": typed_lines.read,
        "        prompts' tree (encode)": encoded_prompts.encode,
        "          tree built (compiled)": encoded_prompts._tree,
        "      id arrays cut out (version 1)": call_ids.split_lines,
        "      field checks (general path)": records._check_call_types,
        "    id arrays -> codes": records._sequences,
        "  a chunk's columns (chunk.tables)": chunk.tables,
        "    prefix numbers": cost.prefix_codes,
        "    exact prefix simulation": cost.exact_cached_flat,
        "    ideal cache (compiled tree walk)": cost.shared_prefix_tokens,
        "    Anthropic cache": anthropic.count,
        "    estimate (A.5.2)": cost.estimated_cached,
        "    run rows (chunk._rows)": chunk._rows,
        "      bills (chunk._bills)": chunk._bills,
    }
    every = records.find_run_dirs([root])
    size = chunk_size(len(every), processes)
    dirs = every[:runs]
    records.read_runs(
        dirs[:20], DEFAULT_BLOCK, DEFAULT_DISCOUNT
    )  # warm the caches (schemas, validators) out of the profile
    profile = cProfile.Profile()
    profile.enable()
    for at in range(0, len(dirs), size):
        records.read_runs(dirs[at : at + size], DEFAULT_BLOCK, DEFAULT_DISCOUNT)
    profile.disable()
    stats = pstats.Stats(profile).stats
    by_code = {(file, line, name): cumulative for (file, line, name), (_, _, _, cumulative, _) in stats.items()}
    total = sum(stats[key][2] for key in stats)  # own time of every function: the profile's whole time
    print(
        f"where the reader's time goes (cProfile, one process, {len(dirs)} runs in chunks of {size}, "
        f"{total / len(dirs) * 1e3:.2f} ms a run):"
    )
    for label, function in steps.items():
        code = function.__code__
        seconds = by_code.get((code.co_filename, code.co_firstlineno, code.co_name), 0.0)
        print(f"  {label:38s} {seconds / total:6.1%}")


def cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (the parser workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main_cpu_seconds() -> float:
    """User + system CPU of this process alone (the aggregate's merging and tables)."""
    t = os.times()
    return t.user + t.system


def disk_blocks_read() -> int:
    """512-byte blocks this process and its finished children (the parser workers) read from
    disk rather than from the page cache."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_inblock + resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock


PAGE_MB = resource.getpagesize() / 2**20


def page_faults() -> tuple[int, int]:
    """Pages this process, and its finished children (the parser workers), have faulted in
    (minor faults: memory mapped on first touch, fresh or the page cache's)."""
    return tuple(resource.getrusage(who).ru_minflt for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def peak_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # ru_maxrss is in KiB on Linux


def load_late_imports() -> float:
    """Import, before the clock starts, what the timed code imports only when first asked
    (as the modules at the top of this file are): statsmodels, for Holm's correction, which
    loads scipy.stats, 0.8 s a process whatever the corpus's size. The seconds it took."""
    started = time.perf_counter()
    import statsmodels.stats.multitest  # noqa: F401

    return time.perf_counter() - started


def page_cache_mb() -> float:
    """The page cache's size (``Cached`` in /proc/meminfo), in MB; NaN where there is no such file."""
    try:
        with open("/proc/meminfo") as meminfo:
            kib = next(int(line.split()[1]) for line in meminfo if line.startswith("Cached:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return math.nan
    return kib / 1024


def into_page_cache(root: Path) -> float:
    """Read every file of the corpus into the page cache before the clock starts: the kernel is
    asked for all of them first (``posix_fadvise`` WILLNEED, so the disk reads them in parallel),
    then each is read through, so that none is still on its way when the clock starts (WILLNEED
    alone left 75-180 MB for the aggregate to read from disk). This machine's page cache loses
    parts of a 3 GB corpus between runs, and a corpus read from disk measures the disk, not the
    reader. The seconds it took; ``--cold`` skips it."""
    started = time.perf_counter()
    paths = [os.path.join(folder, name) for folder, _, names in os.walk(root) for name in names]
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)
    buffer = bytearray(1 << 20)
    for path in paths:
        with open(path, "rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=35_000)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ctxpolicy-bench-metrics"))
    parser.add_argument(
        "--calls-version",
        type=int,
        choices=(1, 2),
        default=2,
        help="calls.jsonl's schema version: 2, as every writer writes it (default), or 1 (whole prompts)",
    )
    parser.add_argument(
        "--identity",
        metavar="REV",
        help="compare the tables (runs.parquet, calls.parquet, left_out.json) byte for byte with those of "
        "git revision REV's code on this corpus (use a reduced --runs), instead of timing",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=400,
        metavar="N",
        help="also print where the reader's time goes, from a profile of N runs in one process (0: not)",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="leave the page cache as it is (by default the corpus is read into it before the clock starts)",
    )
    args = parser.parse_args()

    root = corpus(args.workdir, args.runs, args.calls, args.processes, args.calls_version)
    print(f"calls.jsonl schema version {args.calls_version}")
    if args.identity:
        print(f"tables of {root} from {args.identity} and from this checkout:")
        same = identity(root, args.identity, args.workdir, args.processes)
        print("identical" if same else "the tables differ")
        return 0 if same else 1
    imports_s = load_late_imports()
    cached_before = page_cache_mb()
    cache_s = math.nan if args.cold else into_page_cache(root)
    cache_grew_mb = page_cache_mb() - cached_before
    phases = {}
    load_before = os.getloadavg()[0]
    blocks_before = disk_blocks_read()
    cpu_started, main_started = cpu_seconds(), main_cpu_seconds()
    faults_started = page_faults()
    started = time.perf_counter()
    tables = aggregate([root], processes=args.processes, progress=sys.stderr.isatty())
    phases["aggregate (parse + tables)"] = (time.perf_counter() - started, cpu_seconds() - cpu_started)
    main_cpu = main_cpu_seconds() - main_started
    disk_mb = (disk_blocks_read() - blocks_before) * 512 / 1e6
    phases["  of which parser workers"] = (math.nan, phases["aggregate (parse + tables)"][1] - main_cpu)
    phases["  of which main process"] = (math.nan, main_cpu)
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
        wall = "" if math.isnan(seconds) else f"{seconds:7.1f} s"
        print(f"  {name:28s} {wall:>9s} {cpu_phase:7.1f} s")
    main_mb, worker_mb = peak_mb(resource.RUSAGE_SELF), peak_mb(resource.RUSAGE_CHILDREN)
    bound_mb = main_mb + args.processes * worker_mb
    print(f"  {'total':28s} {total:7.1f} s   (target < {TARGET_S} s on 2 idle cores)")
    print(f"  {'(imports, before the clock)':28s} {imports_s:7.1f} s")
    if not args.cold:
        print(
            f"  {'(corpus into page cache)':28s} {cache_s:7.1f} s   (the page cache grew {max(cache_grew_mb, 0):,.0f} MB "
            "meanwhile: the part of the corpus read back from disk)"
        )
    print(
        f"CPU time, all processes: {cpu:.1f} s (on {args.processes} idle cores the wall time is at least "
        f"{cpu / args.processes:.1f} s); load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    print(
        f"read from disk by the aggregate: {disk_mb:,.0f} MB (0: the corpus was in the page cache; a corpus "
        "read from disk took a third longer here, in CPU time too; --cold leaves the cache as it is)"
    )
    print(
        f"peak memory: main {main_mb:,.0f} MB, largest worker {worker_mb:,.0f} MB, "
        f"bound {bound_mb:,.0f} MB   (target < {TARGET_MB} MB)"
    )
    faults = [now - then for now, then in zip(page_faults(), faults_started)]
    print(
        "pages faulted in, timed part: "
        + ", ".join(f"{who} {n:,} (~{n * PAGE_MB:,.0f} MB)" for who, n in zip(("main", "workers"), faults))
    )
    if args.profile:
        where_time_goes(root, args.profile, args.processes)
    return 0 if total < TARGET_S and bound_mb < TARGET_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
