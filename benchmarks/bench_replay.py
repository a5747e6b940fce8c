"""Replay and audit at the study's size: synthetic FC transcripts through every configuration.

    .venv/bin/python benchmarks/bench_replay.py [--runs 300] [--min-steps 40] [--max-steps 150]
                                                [--shape real] [--workers 2] [--no-audit]
                                                [--config config/paper.yaml] [--limit-configs N]

Writes ``--runs`` synthetic FC runs (``ctxpolicy.testing.transcripts``, shape ``real``: messages
from tens of tokens to a few over 50K) of a length drawn uniformly from ``--min-steps`` to
``--max-steps``, then replays each through every (policy, threshold setting) of the config's
grid (``Study.configurations``: 65 for config/paper.yaml), without a summarizer
(placeholder summaries), in ``--workers`` processes, writing every replay as ``ctxpolicy replay``
does (schema version 2, summary requests as content pieces, ``replay.output.ReplayBatch``: one
disk sync per source). Then audits every replay exactly as ``ctxpolicy audit`` does
(``analysis.cli_audit.audit_runs``: the complete runs it finds, grouped by source, the same
checks and worker processes). Prints the per-step time (median, p99), the time spent writing run
directories, the replay and audit wall and CPU times (the CPU time over the workers is about
what the wall time is on idle cores: on a shared machine, the figure to read), the replays'
apparent size on disk (``du --apparent-size``) and the load average; a reduced run also prints
what the full workload (300 runs x 65 configurations) scales to, by replayed steps. ``--keep
DIR`` writes everything under a new folder in DIR and keeps it (else a temporary folder,
deleted). The full workload needs about 0.6 GB of disk and well under 8 GB of memory.
Targets (2 idle cores): replay of the full workload under 10 minutes and under 1 GB apparent
size; its audit under 10 minutes. ``--aggregate`` also times aggregating the replays into tables
(each in a fresh interpreter, as ``ctxpolicy aggregate`` does), and ``--against REV`` the same
with git revision REV's code right after, under the same load.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = {  # the synthetic runs end near 18,000 tokens (plain, 40 steps) or 25,000-90,000 (real, 40-150)
    "plain": {"tight": 6000, "primary": 9000, "loose": 12000},
    "real": {"tight": 16000, "primary": 24000, "loose": 32000},
}
FULL_RUNS, FULL_CONFIGS = 300, 65


def configurations(config: str) -> list[tuple[str, str | None]]:
    """Every (policy, threshold setting) of the config's grid (``ctxpolicy.study.Study.configurations``,
    the one owner, which the imported corpus's workflow replays too), sorted."""
    from ctxpolicy.study import load_study

    seen = {(c.policy, c.setting) for c in load_study(config).configurations()}
    return sorted(seen, key=lambda c: (c[0], c[1] or ""))


def _replay_one_source(job: tuple[str, str, list[tuple[str, str | None]], str]) -> tuple[list[float], float, int]:
    from ctxpolicy.policies import HistoryDump, parse_spec
    from ctxpolicy.replay.engine import replay_source
    from ctxpolicy.replay.output import ReplayBatch
    from ctxpolicy.replay.placeholder import PlaceholderSummarizer
    from ctxpolicy.replay.source import read_source_run

    run_dir, out, configs, shape = job
    source = read_source_run(Path(run_dir))
    summarizer = PlaceholderSummarizer()
    steps: list[float] = []
    writing = 0.0
    batch = ReplayBatch()
    for policy, setting in configs:
        spec = parse_spec(policy)
        dump = HistoryDump(Path(out) / "dump" / Path(run_dir).name) if "DUMP" in spec.stages else None
        replayed = replay_source(
            source,
            spec,
            threshold=THRESHOLDS[shape].get(setting),
            summarizer=summarizer,
            dump=dump,
            step_seconds=steps,
        )
        began = time.perf_counter()
        batch.write(replayed, Path(out), setting=setting, summarizer=None, real_summaries=False)
        writing += time.perf_counter() - began
    began = time.perf_counter()
    batch.close()  # as ctxpolicy replay: one sync per source, then the run.json files
    writing += time.perf_counter() - began
    return steps, writing, len(configs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=FULL_RUNS)
    parser.add_argument("--min-steps", type=int, default=40)
    parser.add_argument("--max-steps", type=int, default=150)
    parser.add_argument("--shape", choices=("real", "plain"), default="real")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--config", default=str(ROOT / "config" / "paper.yaml"))
    parser.add_argument("--limit-configs", type=int, default=None, help="only the first N configurations")
    parser.add_argument("--no-audit", action="store_true", help="replay only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="write under this folder and keep it")
    parser.add_argument(
        "--aggregate", action="store_true", help="also aggregate the replays into tables, as ctxpolicy aggregate does"
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="with --aggregate: aggregate the same replays with git revision REV's code too, right after (same load)",
    )
    args = parser.parse_args()

    configs = configurations(args.config)[: args.limit_configs]
    rng = np.random.default_rng(args.seed)
    lengths = rng.integers(args.min_steps, args.max_steps + 1, size=args.runs)
    with _workdir(args.keep) as tmp:
        cell = Path(tmp) / "FC"
        began = time.perf_counter()
        jobs = [
            (str(cell / f"task-{k:04d}__a1"), args.seed, f"task-{k:04d}", int(n), args.shape)
            for k, n in enumerate(lengths)
        ]
        with ProcessPoolExecutor(args.workers) as pool:
            sources = list(pool.map(_write_source, jobs))
        generated = time.perf_counter() - began
        source_size = _apparent_size(cell)
        print(
            f"generated {args.runs} synthetic FC runs ({args.shape}) of {args.min_steps}-{args.max_steps} steps "
            f"(mean {lengths.mean():.0f}) in {generated:.1f} s; {source_size / 1e6:.1f} MB"
        )
        replay_root = Path(tmp) / "replay"
        jobs = [(s, str(replay_root), configs, args.shape) for s in sources]
        began, cpu = time.perf_counter(), _children_cpu()
        with ProcessPoolExecutor(args.workers) as pool:
            results = list(pool.map(_replay_one_source, jobs, chunksize=1))
        total, replay_cpu = time.perf_counter() - began, _children_cpu() - cpu
        size = _apparent_size(replay_root)
        audit_s = events = left_out = None
        if not args.no_audit:  # exactly as ctxpolicy audit: its run discovery, its audit_runs
            from ctxpolicy.analysis.cli_audit import audit_runs
            from ctxpolicy.analysis.judge import LexicalJudge
            from ctxpolicy.metrics.records import find_run_dirs
            from ctxpolicy.rundir import is_complete_run

            began, cpu = time.perf_counter(), _children_cpu() + _own_cpu()
            audited = audit_runs(
                [d for d in find_run_dirs([replay_root]) if is_complete_run(d)], LexicalJudge(), args.workers
            )
            audit_s, audit_cpu = time.perf_counter() - began, _children_cpu() + _own_cpu() - cpu
            events = sum(len(rows) for rows, _, _ in audited)
            left_out = sum(problem is not None for _, problem, _ in audited)
        aggregated = _aggregate_replays(replay_root, args.workers, args.against) if args.aggregate else None
    steps = np.array([t for r in results for t in r[0]])
    writing = sum(r[1] for r in results)
    replays = sum(r[2] for r in results)
    load = os.getloadavg()
    full_steps = FULL_CONFIGS * FULL_RUNS * (args.min_steps + args.max_steps) / 2
    scale = full_steps / max(len(steps), 1)
    full = args.runs == FULL_RUNS and len(configs) == FULL_CONFIGS

    def scaled(value: float, unit: str, factor: float = 1.0) -> str:
        return (
            ""
            if full
            else f" (the full {FULL_RUNS} x {FULL_CONFIGS} workload: about {value * scale / factor:.1f} {unit})"
        )

    print(f"configurations: {len(configs)}; replays: {replays}; replayed steps: {len(steps)}; workers: {args.workers}")
    print(
        f"per step: median {1000 * np.median(steps):.3f} ms, p99 {1000 * np.percentile(steps, 99):.3f} ms, "
        f"mean {1000 * steps.mean():.3f} ms"
    )
    print(
        f"writing run directories: {writing:.1f} s of worker time ({1000 * writing / max(replays, 1):.1f} ms per replay)"
    )
    print(f"replay wall time: {total:.1f} s" + scaled(total, "min", 60) + " (target: under 10 minutes)")
    print(
        f"replay CPU time: {replay_cpu:.1f} s, on {args.workers} idle cores about {replay_cpu / args.workers:.1f} s"
        + scaled(replay_cpu / args.workers, "min", 60)
    )
    print(
        f"replays' apparent size (du --apparent-size): {size / 1e6:.1f} MB"
        + scaled(size, "GB", 1e9)
        + " (target: under 1 GB)"
    )
    if audit_s is not None:
        print(
            f"audit wall time: {audit_s:.1f} s for {replays} replays ({left_out} left out), {events} compression steps"
            + scaled(audit_s, "min", 60)
            + " (target: under 10 minutes)"
        )
        print(
            f"audit CPU time: {audit_cpu:.1f} s, on {args.workers} idle cores about {audit_cpu / args.workers:.1f} s"
            + scaled(audit_cpu / args.workers, "min", 60)
        )
    for label, (wall, cpu_s, n_runs) in (aggregated or {}).items():
        print(
            f"aggregate ({label}): {wall:.1f} s wall, {cpu_s:.1f} s CPU for {n_runs} replays"
            + scaled(wall, "s")
            + f"; on {args.workers} idle cores about {cpu_s / args.workers:.1f} s"
            + scaled(cpu_s / args.workers, "s")
        )
    print(f"load average (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    return 0


@contextlib.contextmanager
def _workdir(keep: Path | None):
    """A fresh folder for the sources and replays: under ``keep``, kept; else temporary, deleted."""
    if keep is None:
        with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
            yield tmp
        return
    keep.mkdir(parents=True, exist_ok=True)
    kept = tempfile.mkdtemp(prefix="bench-replay-", dir=keep)
    print(f"writing under {kept} (kept)")
    yield kept


AGGREGATE_TIMED = """
import os, sys, time
from pathlib import Path
from ctxpolicy.metrics.aggregate import aggregate
began, cpu = time.perf_counter(), os.times()
tables = aggregate([Path(sys.argv[1])], processes=int(sys.argv[2]))
after = os.times()
used = sum(after[:4]) - sum(cpu[:4])
print(time.perf_counter() - began, used, len(tables.runs))
"""


def _aggregate_replays(root: Path, workers: int, against: str | None) -> dict[str, tuple[float, float, int]]:
    """Wall and CPU seconds (all processes) of aggregating the replays, each in a fresh
    interpreter: this checkout's code, then (``against``) git revision REV's."""
    codes = {"this checkout": ROOT / "src"}
    with tempfile.TemporaryDirectory(prefix="bench-replay-rev-") as scratch:
        if against:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", against, "src"], check=True, capture_output=True
            )
            subprocess.run(["tar", "-x", "-C", scratch], input=archive.stdout, check=True)
            codes[against] = Path(scratch) / "src"
        timed = {}
        for label, src in codes.items():
            out = subprocess.run(
                [sys.executable, "-c", AGGREGATE_TIMED, str(root), str(workers)],
                env={**os.environ, "PYTHONPATH": str(src)},
                check=True,
                capture_output=True,
                text=True,
            )
            wall, cpu_s, n_runs = out.stdout.split()
            timed[label] = (float(wall), float(cpu_s), int(n_runs))
    return timed


def _children_cpu() -> float:
    """CPU seconds of the worker processes that have ended (a pool's, once it is shut down):
    on a shared machine the wall times depend on the load, the CPU times much less."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _apparent_size(path: Path) -> int:
    out = subprocess.run(["du", "-s", "--apparent-size", "--block-size=1", str(path)], capture_output=True, text=True)
    return int(out.stdout.split()[0])


def _write_source(job: tuple[str, int, str, int, str]) -> str:
    from ctxpolicy.testing.transcripts import write_fc_run

    run_dir, seed, task_id, steps, shape = job
    return str(write_fc_run(Path(run_dir), seed=seed, task_id=task_id, steps=steps, shape=shape))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
