"""A public corpus's whole path at the size of a SWE-bench submission, in one Snakemake call.

    .venv/bin/python benchmarks/bench_corpus.py [--runs 500] [--cores 2] [--keep DIR] [--seed N]

Writes ``--runs`` synthetic mini-swe-agent 1.x trajectories shaped like a real SWE-bench
Verified submission (``ctxpolicy.testing.priced_corpus``, every call with its provider usage and
price): the number of calls drawn log-normally around a median of 36, the longest run 145
calls; each run's tool outputs scaled so that the longest prompts reach about 100K tokens. Then
runs the workflow of an imported-only study over it (``imported:`` with config/paper.yaml's
grid, its 65 configurations) in one ``snakemake --cores N`` call: import, calibrate, replay of
every configuration (the ``imported_replay`` jobs), aggregate, the two imported figures.

Prints the corpus's shape (calls per run, peak prompt), each step's wall time from the
Snakemake log (first start to last finish of its jobs, their number and summed job time), the
whole call's wall time, the CPU time of its processes, the apparent size on disk of each part
(``du --apparent-size``: corpus, imported runs, replays, tables, figures) and the load average.
Target (issue 33, 2 idle cores, 500 runs): import to figures under 5 minutes and under 700 MB;
the exit status is 1 when a full-size run misses it. A smaller ``--runs`` proves the path and
prints the same figures, but its times are mostly each job's start-up (up to 8 replay jobs, each a
fresh interpreter): they do not scale to the full size. The full size needs about 1 GB of free
disk; run it on an idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_study import job_intervals  # noqa: E402

FULL_RUNS = 500
MEDIAN_CALLS, MAX_CALLS, MIN_CALLS = 36, 145, 6
CALLS_SPREAD = 0.55  # sigma of log(calls): a submission's runs from a handful of calls to ~145
PEAK_TOKENS = 100_000  # the longest prompts of the longest runs
TOKENS_PER_STEP = 255  # server prompt tokens a step adds at verbosity 1 (measured on priced_corpus)
TARGET_S, TARGET_MB = 300, 700
MODEL = "gpt-4o"  # a model litellm's price map knows (the corpus carries prices)
STEPS = {  # step -> the rules whose jobs it is
    "import": ("import_corpus",),
    "calibrate": ("imported_thresholds",),
    "replay (65 configurations)": ("imported_replay",),
    "aggregate": ("aggregate_imported_replay",),
    "figures": ("figure_imported_replay", "figure_imported_sweep"),
}


def corpus_plan(runs: int, seed: int) -> list[tuple[int, float]]:
    """(calls, verbosity) of each run: calls log-normal around the median, the longest pinned at
    ``MAX_CALLS``; verbosity so that a run's last prompt grows with its length and the longest
    reach about ``PEAK_TOKENS`` (a long run reads more files, and bigger ones)."""
    rng = np.random.default_rng(seed)
    calls = np.clip(np.round(MEDIAN_CALLS * np.exp(rng.normal(0, CALLS_SPREAD, runs))), MIN_CALLS, MAX_CALLS)
    calls = calls.astype(int)
    calls[int(np.argmax(calls))] = MAX_CALLS
    longest = PEAK_TOKENS / (MAX_CALLS * TOKENS_PER_STEP)
    verbosity = [max(0.5, longest * (c / MAX_CALLS) ** 0.5 * rng.uniform(0.8, 1.1)) for c in calls]
    return [(int(c), float(v)) for c, v in zip(calls, verbosity)]


def _write_one(job: tuple[Path, int, int, float, int]) -> tuple[int, int]:
    from ctxpolicy.testing.priced_corpus import trajectory

    folder, n, calls, verbosity, seed = job
    data = trajectory(n, steps=calls, model=MODEL, seed=seed, verbosity=verbosity)
    (folder / f"task-{n:03d}.traj.json").write_text(json.dumps(data), encoding="utf-8")
    prompts = [m["extra"]["response"]["usage"]["prompt_tokens"] for m in data["messages"] if m["role"] == "assistant"]
    return len(prompts), max(prompts)


def write_corpus(folder: Path, runs: int, seed: int, workers: int) -> list[tuple[int, int]]:
    """The corpus as ``folder/task-NNN.traj.json``; (calls, peak prompt tokens) of each run."""
    folder.mkdir(parents=True)
    jobs = [(folder, n, calls, verbosity, seed) for n, (calls, verbosity) in enumerate(corpus_plan(runs, seed))]
    if workers <= 1:
        return [_write_one(job) for job in jobs]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_write_one, jobs, chunksize=8))


def study_config(workdir: Path, corpus: Path) -> Path:
    """An imported-only study over CORPUS with config/paper.yaml's grid (policies and settings)."""
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text(encoding="utf-8"))["grid"]
    keep = {"full_comparison": ("setting", "policies"), "sweeps": ("settings", "depths", "tunable", "invariant")}
    config = {
        "study": "bench-corpus",
        "results_dir": "results",
        "figures_dir": "figures",
        "imported": {"path": str(corpus), "format": "auto", "benchmark": "swebench", "model": MODEL, "round": 100},
        "grid": {part: {key: paper[part][key] for key in keys} for part, keys in keep.items()},
    }
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def step_times(log: Path) -> dict[str, tuple[float, int, float]]:
    """step -> (wall s from its first job's start to its last job's finish, jobs, summed job s)."""
    _, intervals = job_intervals(log)
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for rule, begin, end in intervals:
        if rule == "all":
            continue
        step = next((name for name, rules in STEPS.items() if rule in rules), f"other ({rule})")
        spans[step].append((begin, end))
    return {
        step: (max(e for _, e in jobs) - min(b for b, _ in jobs), len(jobs), sum(e - b for b, e in jobs))
        for step, jobs in spans.items()
    }


def apparent_size(path: Path) -> int:
    if not path.exists():
        return 0
    done = subprocess.run(["du", "-s", "-b", "--apparent-size", str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.split()[0])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def _workdir(keep: Path | None):
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield Path(tempfile.mkdtemp(prefix="bench-corpus-", dir=keep))
        return
    folder = Path(tempfile.mkdtemp(prefix="bench-corpus-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=FULL_RUNS, help=f"trajectories (default {FULL_RUNS})")
    parser.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="write under a new folder in DIR and keep it")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")

    with _workdir(args.keep) as workdir:
        print(f"work directory: {workdir}")
        started = time.monotonic()
        shape = write_corpus(workdir / "corpus", args.runs, args.seed, args.cores)
        calls, peaks = np.array([c for c, _ in shape]), np.array([p for _, p in shape])
        print(f"corpus: {len(shape)} trajectories written in {time.monotonic() - started:.1f} s (not timed below)")
        print(f"  calls per run: median {np.median(calls):.0f}, max {calls.max()}, total {calls.sum():,}")
        print(f"  peak prompt per run (tokens): median {np.median(peaks):,.0f}, max {peaks.max():,}")

        config = study_config(workdir, workdir / "corpus")
        snakemake = str(Path(sys.executable).with_name("snakemake"))
        command = [snakemake, "-s", str(ROOT / "Snakefile"), "-d", str(workdir), "--cores", str(args.cores)]
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        env.pop("SNAKEMAKE_PROFILE", None)
        cpu_before, started = _children_cpu(), time.monotonic()
        done = subprocess.run(
            [*command, "--configfile", str(config)], cwd=ROOT, env=env, capture_output=True, text=True
        )
        wall, cpu = time.monotonic() - started, _children_cpu() - cpu_before
        if done.returncode != 0:
            print((done.stdout + done.stderr)[-4000:], file=sys.stderr)
            print(f"snakemake failed (exit {done.returncode}) after {wall:.1f} s", file=sys.stderr)
            return 2

        logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"), key=lambda p: p.stat().st_mtime)
        print(f"one snakemake call, --cores {args.cores}: {wall:.1f} s wall, {cpu:.1f} s CPU of its processes")
        for step, (span, jobs, summed) in step_times(logs[-1]).items():
            print(f"  {step:28s} {span:7.1f} s wall  ({jobs} jobs, {summed:.1f} s summed)")

        results = workdir / "results"
        parts = {
            "corpus (input)": workdir / "corpus",
            "imported runs": results / "imported" / "runs",
            "replays": results / "imported" / "replay",
            "tables": results / "tables",
            "figures": workdir / "figures",
        }
        sizes = {name: apparent_size(path) for name, path in parts.items()}
        written = sum(size for name, size in sizes.items() if name != "corpus (input)")
        everything = apparent_size(results) + sizes["figures"]
        print("disk (apparent size):")
        for name, size in sizes.items():
            print(f"  {name:28s} {size / 1e6:9.1f} MB")
        print(f"  {'written by the workflow':28s} {everything / 1e6:9.1f} MB (the parts above: {written / 1e6:.1f} MB)")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

        if args.runs != FULL_RUNS:
            print(f"reduced run ({args.runs} of {FULL_RUNS} trajectories): the target applies to the full size")
            return 0
        met = wall < TARGET_S and everything < TARGET_MB * 1e6
        print(f"target: under {TARGET_S} s and {TARGET_MB} MB: {'met' if met else 'MISSED'}")
        return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
