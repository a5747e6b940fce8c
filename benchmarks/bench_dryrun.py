"""Time and peak memory of planning the whole study: `snakemake -n` on config/paper.yaml.

    .venv/bin/python benchmarks/bench_dryrun.py [--config config/paper.yaml] [--repeat 3] [TARGET ...]

Prints the job counts of the plan, then wall time and peak resident memory of each dry run.
Target: under 5 s for the paper config (jobs are per cell, so ~600 jobs instead of ~35,000).

Also times what every `snakemake` start pays before planning: `snakemake --version`, and the
`scontrol show config` that snakemake-executor-plugin-slurm runs at import. Target: under 1 s
for the latter whether the local SLURM runs or not (scripts/slurm-local.sh leaves a dormant
config when stopped; without it this probe took 9 s, and 59 s with no slurm.conf at all).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


def dry_run(config: str, targets: list[str]) -> tuple[float, float, str]:
    """One dry run in a child process: (seconds, peak RSS in MB of that child, its output)."""
    command = [str(SNAKEMAKE), *targets, "--dry-run", "--quiet", "rules", "--configfile", config]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if done.returncode != 0:
        sys.exit(f"bench_dryrun: snakemake failed ({done.returncode}):\n{done.stderr[-3000:]}")
    # ru_maxrss of children is the largest child so far: report it only when it grew
    return seconds, max(peak_kb, before) / 1024, done.stdout + done.stderr


def startup_seconds() -> float:
    start = time.perf_counter()
    subprocess.run([str(SNAKEMAKE), "--version"], capture_output=True, check=True)
    return time.perf_counter() - start


def slurm_probe_seconds() -> float | None:
    """The plugin's import-time probe, timed; None where SLURM is not installed."""
    if shutil.which("scontrol") is None:
        return None
    start = time.perf_counter()
    subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=120)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/paper.yaml")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("targets", nargs="*", help="targets (default: the whole study)")
    args = parser.parse_args()

    runs = [dry_run(args.config, args.targets) for _ in range(args.repeat)]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", runs[-1][2], flags=re.M))
    print(f"config: {args.config}   targets: {' '.join(args.targets) or '(all)'}   cpus: {os.cpu_count()}")
    for rule, count in sorted(jobs.items(), key=lambda kv: -int(kv[1])):
        print(f"  {rule:<28} {count:>6}")
    times = [r[0] for r in runs]
    print(
        f"dry run: median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}) "
        f"over {len(times)}; peak RSS {max(r[1] for r in runs):.0f} MB"
    )
    print(
        f"snakemake --version alone (start-up, for comparison): {startup_seconds():.2f} s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    probe = slurm_probe_seconds()
    if probe is not None:
        verdict = "ok" if probe < 1 else "a hidden wait at every snakemake start: see scripts/slurm-local.sh dormant"
        print(f"scontrol show config (run by the SLURM executor plugin at import): {probe:.2f} s ({verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
