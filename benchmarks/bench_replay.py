"""Replay throughput: synthetic FC transcripts replayed through every configuration of the study.

    .venv/bin/python benchmarks/bench_replay.py [--runs 300] [--steps 40] [--workers 2]
                                                [--config config/paper.yaml] [--limit-configs N]

Writes ``--runs`` synthetic FC runs of ``--steps`` steps (``ctxpolicy.testing.transcripts``), then
replays each through every (policy, threshold setting) of the config's calibration, full
comparison and sweeps (65 for config/paper.yaml), without a summarizer (placeholder summaries),
in ``--workers`` processes, writing every replay as ``ctxpolicy replay`` does. Prints the
per-step time (median, p99: the policy's work and the call record, one step at a time), the time
spent writing run directories, the total wall time, and the load average.
Target: under 2 ms median per replayed step, and the full workload under 15 minutes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = {"tight": 6000, "primary": 9000, "loose": 12000}  # the synthetic runs end near 18,000 tokens


def configurations(config: str) -> list[tuple[str, str | None]]:
    from ctxpolicy.config import load_config
    from ctxpolicy.grid import expand_grid

    cells = expand_grid(load_config(config))
    seen = {
        (c.policy, c.setting) for c in cells if c.track in ("calibration", "full", "sweep") and c.summarizer is None
    }
    return sorted(seen, key=lambda c: (c[0], c[1] or ""))


def _replay_one_source(job: tuple[str, str, list[tuple[str, str | None]]]) -> tuple[list[float], float, int]:
    from ctxpolicy.policies import HistoryDump, parse_spec
    from ctxpolicy.replay.engine import replay_source
    from ctxpolicy.replay.output import write_replay
    from ctxpolicy.replay.placeholder import PlaceholderSummarizer
    from ctxpolicy.replay.source import read_source_run

    run_dir, out, configs = job
    source = read_source_run(Path(run_dir))
    summarizer = PlaceholderSummarizer()
    steps: list[float] = []
    writing = 0.0
    for policy, setting in configs:
        spec = parse_spec(policy)
        dump = HistoryDump(Path(out) / "dump" / Path(run_dir).name) if "DUMP" in spec.stages else None
        replayed = replay_source(
            source, spec, threshold=THRESHOLDS.get(setting), summarizer=summarizer, dump=dump, step_seconds=steps
        )
        began = time.perf_counter()
        write_replay(replayed, Path(out), setting=setting, summarizer=None, real_summaries=False)
        writing += time.perf_counter() - began
    return steps, writing, len(configs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--config", default=str(ROOT / "config" / "paper.yaml"))
    parser.add_argument("--limit-configs", type=int, default=None, help="only the first N configurations")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    configs = configurations(args.config)[: args.limit_configs]
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        cell = Path(tmp) / "FC"
        began = time.perf_counter()
        with ProcessPoolExecutor(args.workers) as pool:
            sources = list(
                pool.map(
                    _write_source,
                    [
                        (str(cell / f"task-{k:04d}__a1"), args.seed, f"task-{k:04d}", args.steps)
                        for k in range(args.runs)
                    ],
                )
            )
        generated = time.perf_counter() - began
        print(f"generated {args.runs} synthetic FC runs of {args.steps} steps in {generated:.1f} s")
        jobs = [(s, str(Path(tmp) / "replay"), configs) for s in sources]
        began = time.perf_counter()
        with ProcessPoolExecutor(args.workers) as pool:
            results = list(pool.map(_replay_one_source, jobs, chunksize=1))
        total = time.perf_counter() - began
    steps = np.array([t for r in results for t in r[0]])
    writing = sum(r[1] for r in results)
    replays = sum(r[2] for r in results)
    load = os.getloadavg()
    print(f"configurations: {len(configs)}; replays: {replays}; replayed steps: {len(steps)}; workers: {args.workers}")
    print(
        f"per step: median {1000 * np.median(steps):.3f} ms, p99 {1000 * np.percentile(steps, 99):.3f} ms, "
        f"mean {1000 * steps.mean():.3f} ms (target: median under 2 ms)"
    )
    print(
        f"writing run directories: {writing:.1f} s of worker time ({1000 * writing / max(replays, 1):.1f} ms per replay)"
    )
    full = args.runs == 300 and args.steps == 40 and len(configs) == 65
    scale = (300 * 65 * 40) / max(len(steps), 1)
    print(
        f"total wall time: {total:.1f} s"
        + (
            ""
            if full
            else f" (this reduced size; the full 300 x 65 x 40 workload scales to about {total * scale / 60:.1f} min)"
        )
        + " (target: under 15 minutes for the full workload)"
    )
    print(f"load average (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    return 0


def _write_source(job: tuple[str, int, str, int]) -> str:
    from ctxpolicy.testing.transcripts import write_fc_run

    run_dir, seed, task_id, steps = job
    return str(write_fc_run(Path(run_dir), seed=seed, task_id=task_id, steps=steps))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    raise SystemExit(main())
