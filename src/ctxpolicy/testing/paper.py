"""A paper-shaped synthetic data set: the study's whole grid as run directories, no GPU needed.

``make_paper_dataset(out_dir)`` expands ``config/synthetic-paper.yaml`` (the study's grid with
synthetic models ``synth-a``/``synth-b``/``synth-c`` in the roles of Qwen, Devstral and GLM) and
writes, under ``out_dir``: ``runs/{benchmark}/{model}/{cell slug}/{task}__a{k}/`` (messages,
calls, run record and verdict of every run, by ``ctxpolicy.testing.runs``),
``thresholds/{benchmark}/{model}.json`` (the preset files the workflow writes) and
``config.yaml`` (the config it used, with ``results_dir`` pointing at ``out_dir`` and the cohorts
cut to ``task_cap`` tasks when one is given). Each (benchmark, model) has its own profile:
prompt growth that puts the presets near the 5th/15th/25th percentiles of the FC peaks, latency,
caching, and how each policy changes run length and success. See docs/synthetic.md.

    python -m ctxpolicy.testing.paper --out DIR [--seed N] [--task-cap N] [--processes N] [--tables]
"""

from __future__ import annotations

import argparse
import sys
import time
import zlib
from dataclasses import replace
from pathlib import Path

import yaml

from ctxpolicy.study.config import REPO_ROOT, validate_config
from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.study.grid import Cell, cohort_tasks, expand_grid, resolve_threshold
from ctxpolicy.policies import parse_spec
from ctxpolicy.testing.runs import Profile, RunSpec, write_runs

CONFIG = REPO_ROOT / "config" / "synthetic-paper.yaml"
TASK_TIMEOUTS_S = (360, 600, 900, 1200, 1800)  # Terminal-Bench tasks carry their own timeouts
HARNESS_TIMEOUTS = {"terminalbench": 0.06}  # share of submitted runs the harness stops for time
UNSOLVABLE_SALT = "unsolvable-16"  # about 1 task in 12 no policy solves; one among each cohort's first 6


MISSING_SALT = "missing-30"  # about 1 in 30 of the later attempts was never recorded (a crashed job)


def missing_attempt(cell_slug: str, task_id: str, attempt: int) -> bool:
    """Whether a run is left out of the data set, as a run whose job died before it wrote anything
    would be: attempts after the first only, drawn from the cell, task and attempt alone."""
    return attempt > 1 and zlib.crc32(f"{MISSING_SALT}:{cell_slug}:{task_id}:{attempt}".encode()) % 30 == 0


def unsolvable(task_id: str) -> bool:
    """Whether no policy solves the task (any cohort, any cell): drawn from the id alone."""
    return zlib.crc32(f"{UNSOLVABLE_SALT}:{task_id}".encode()) % 12 == 0


# How each policy moves success, per model (the same policy does differently across models).
_SHIFTS = {
    "synth-a": {
        "FC": 0.0,
        "TR": -0.05,
        "SU": -0.10,
        "SU-p": -0.03,
        "S": -0.07,
        "S-p": -0.03,
        "TRC": 0.02,
        "TRC+SU": 0.03,
        "TRC+S": 0.0,
        "OTRC": -0.01,
        "OTRC+TR": -0.08,
        "OTRC+SU-p": -0.02,
        "OTRC+S-p": -0.03,
    },
    "synth-b": {
        "FC": 0.0,
        "TR": -0.02,
        "SU": -0.04,
        "SU-p": -0.06,
        "S": -0.02,
        "S-p": -0.05,
        "TRC": -0.03,
        "TRC+SU": -0.01,
        "TRC+S": -0.04,
        "OTRC": -0.06,
        "OTRC+TR": -0.10,
        "OTRC+SU-p": -0.07,
        "OTRC+S-p": -0.05,
    },
    "synth-c": {
        "FC": 0.0,
        "TR": -0.06,
        "SU": -0.12,
        "SU-p": -0.05,
        "S": -0.11,
        "S-p": -0.04,
        "TRC": 0.01,
        "TRC+SU": -0.02,
        "TRC+S": -0.03,
        "OTRC": 0.0,
        "OTRC+TR": -0.05,
        "OTRC+SU-p": -0.02,
        "OTRC+S-p": -0.01,
    },
}
# A smaller summarizer hurts plain summarization more than a summary of cleared history.
SUMMARIZER_SHIFT = {
    ("synth-sum-a", "SU"): -0.16,
    ("synth-sum-b", "SU"): -0.25,
    ("synth-sum-a", "TRC+SU"): -0.05,
    ("synth-sum-b", "TRC+SU"): -0.02,
}
SETTING_SHIFT = {"tight": -0.04, "primary": 0.0, "loose": 0.02}
DEPTH_SHIFT = -0.12  # per unit of depth above the canonical 0.5, for depth-tunable primitives

_SWE = dict(
    task_tokens=(1200.0, 1400.0),
    completion_tokens=(120, 900),
    command_s=3.0,
    latency=(0.5, 0.0001, 0.00002, 0.015),
    summary_latency=(1.0, 0.0002),
    otrc_one_per_step=True,
    retrieval_share=(0.45, 0.1),
    length_factor={"TR": 1.15, "OTRC+TR": 1.3, "OTRC": 1.1},
)
_TB = dict(
    system_tokens=500,
    task_tokens=(200.0, 150.0),
    completion_tokens=(80, 560),
    command_s=7.0,
    latency=(0.8, 0.0003, 0.00003, 0.03),
    summary_latency=(1.5, 0.0004),
    otrc_one_per_step=True,
    retrieval_share=(0.3, 0.12),
    success_shift=-0.15,
    length_factor={"TR": 1.4, "OTRC+TR": 2.2, "OTRC": 1.2, "TRC": 1.2},
    compressed_length=1.25,
)
# (benchmark, model) -> (mean agent steps of an average FC run, profile)
PROFILES: dict[tuple[str, str], tuple[float, Profile]] = {
    ("swebench", "synth-a"): (
        30,
        Profile(
            **_SWE,
            system_tokens=1500,
            observation_tokens=(5.7, 0.9),
            length_spread=3.0,
            prefix_caching=False,
            policy_shift=_SHIFTS["synth-a"],
        ),
    ),
    ("swebench", "synth-b"): (
        27,
        Profile(
            **{
                **_SWE,
                "length_factor": {"OTRC": 2.2, "OTRC+TR": 2.4, "OTRC+SU-p": 2.0, "OTRC+S-p": 2.0},
                "loop_share": {"OTRC+TR": 0.12, "OTRC+SU-p": 0.08, "OTRC+S-p": 0.08},
            },
            system_tokens=1500,
            observation_tokens=(5.9, 0.9),
            length_spread=1.6,
            success_shift=-0.08,
            policy_shift=_SHIFTS["synth-b"],
        ),
    ),
    ("swebench", "synth-c"): (
        28,
        Profile(
            **{**_SWE, "summary_latency": (30.0, 0.012), "completion_tokens": (80, 560)},
            system_tokens=1500,
            observation_tokens=(5.2, 0.9),
            length_spread=1.7,
            success_shift=-0.12,
            policy_shift=_SHIFTS["synth-c"],
        ),
    ),
    ("terminalbench", "synth-a"): (
        14,
        Profile(
            **_TB,
            observation_tokens=(4.5, 0.9),
            length_spread=2.8,
            prefix_caching=False,
            policy_shift=_SHIFTS["synth-a"],
        ),
    ),
    ("terminalbench", "synth-b"): (
        14,
        Profile(**_TB, observation_tokens=(5.3, 0.9), length_spread=2.8, policy_shift=_SHIFTS["synth-b"]),
    ),
    ("terminalbench", "synth-c"): (
        15,
        Profile(**_TB, observation_tokens=(4.0, 0.9), length_spread=2.8, policy_shift=_SHIFTS["synth-c"]),
    ),
}


class PaperDataError(CtxpolicyError, ValueError):
    """A config the generator cannot serve (a model or benchmark without a profile)."""


def load_paper_config(
    path: str | Path = CONFIG, *, task_cap: int | None = None, results_dir: str | Path | None = None
) -> dict:
    """The validated config, cohorts cut to their first ``task_cap`` tasks (``cohort_limit``)
    and ``results_dir`` set."""
    path = Path(path)
    config = validate_config(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))
    if task_cap is not None:
        for bench in config["benchmarks"].values():
            bench["cohort_limit"] = {cohort: task_cap for cohort in bench["cohorts"]}
    if results_dir is not None:
        config["results_dir"] = str(results_dir)
    return config


def stratum_of(task_id: str) -> str:
    """``synth-swe-repoa-001`` -> ``repoa``: the synthetic ids name their stratum."""
    return task_id.rsplit("-", 1)[0].split("-", 2)[-1]


def _profile(cell: Cell, depth: float | None) -> tuple[float, Profile]:
    try:
        steps, profile = PROFILES[(cell.benchmark, cell.model)]
    except KeyError:
        raise PaperDataError(
            f"no synthetic profile for model {cell.model!r} on benchmark {cell.benchmark!r}; "
            f"known pairs: {', '.join('/'.join(k[::-1]) for k in PROFILES)}"
        ) from None
    spec = parse_spec(cell.policy)
    shift = SETTING_SHIFT.get(cell.setting or "primary", 0.0)
    if spec.depth_tunable and depth is not None:
        shift += DEPTH_SHIFT * (depth - 0.5)
    if cell.summarizer:
        shift += SUMMARIZER_SHIFT.get((cell.summarizer, spec.primitive), -0.05)
    return steps, replace(profile, success_shift=profile.success_shift + shift) if shift else profile


def _versions(config: dict, model: str) -> dict:
    name = config["models"][model]["served_name"]
    return {
        "ctxpolicy": "synthetic",
        "git_commit": None,
        "git_dirty": False,
        "model": {"name": name, "file": None, "sha256": None, "hub_id": None, "revision": None},
        "server": {"kind": "synthetic", "version": None, "url": None},
    }


def _wall_limit(config: dict, benchmark: str, task_id: str) -> float | None:
    limit = config["benchmarks"][benchmark]["limits"]["wall_time_limit_s"]
    if limit is not None:
        return float(limit)
    return float(TASK_TIMEOUTS_S[zlib.crc32(task_id.encode()) % len(TASK_TIMEOUTS_S)])


def run_specs(config: dict, *, seed: int = 0) -> list[RunSpec]:
    """Every run of the config's grid: each cell's cohort tasks times attempts ``1..A``, less the
    ``missing_attempt`` ones."""
    specs = []
    for cell in expand_grid(config):
        steps, profile = _profile(cell, parse_spec(cell.policy).depth)
        threshold = resolve_threshold(config, cell)
        versions = _versions(config, cell.model)
        limits = config["benchmarks"][cell.benchmark]["limits"]
        root = cell.run_root(config["results_dir"])
        for index, task_id in enumerate(cohort_tasks(config, cell.benchmark, cell.cohort)):
            for attempt in range(1, config["attempts"] + 1):
                if missing_attempt(cell.slug, task_id, attempt):
                    continue
                specs.append(
                    RunSpec(
                        root / f"{task_id}__a{attempt}",
                        cell.benchmark,
                        cell.model,
                        cell.policy,
                        cell.setting,
                        threshold,
                        task_id,
                        index,
                        attempt,
                        steps,
                        seed,
                        step_limit=limits["step_limit"],
                        wall_limit_s=_wall_limit(config, cell.benchmark, task_id),
                        cohort=cell.cohort,
                        track=cell.track,
                        stratum=stratum_of(task_id),
                        summarizer=cell.summarizer,
                        model_name=config["models"][cell.model]["served_name"],
                        profile=profile,
                        versions=versions,
                        harness_timeouts=HARNESS_TIMEOUTS.get(config["benchmarks"][cell.benchmark]["adapter"], 0.0),
                        unsolvable=unsolvable(task_id),
                    )
                )
    return specs


def write_thresholds(config: dict) -> list[Path]:
    """The preset thresholds files, as ``ctxpolicy calibrate --preset`` writes them for the workflow."""
    from ctxpolicy.atomic import atomic_write_json
    from ctxpolicy.study.grid import thresholds_path
    from ctxpolicy.metrics.calibrate import preset_thresholds

    written = []
    for benchmark, per_model in config["thresholds"].items():
        for model in per_model:
            path = Path(thresholds_path(config, benchmark, model))
            atomic_write_json(path, preset_thresholds(per_model[model], benchmark, model), indent=1)
            written.append(path)
    return written


def make_paper_dataset(
    out_dir: str | Path,
    *,
    config: str | Path = CONFIG,
    seed: int = 0,
    task_cap: int | None = None,
    processes: int = 1,
    progress: bool = False,
) -> Path:
    """Write the data set under ``out_dir`` (runs/, thresholds/, config.yaml); return config.yaml.

    A run's files depend only on ``seed`` and its identity, never on ``processes``.
    """
    out_dir = Path(out_dir)
    cfg = load_paper_config(config, task_cap=task_cap, results_dir=out_dir)
    write_thresholds(cfg)  # the Th cells read their threshold from these files, as run-cell does
    specs = run_specs(cfg, seed=seed)
    write_runs(specs, processes=processes, progress=progress)
    used = out_dir / "config.yaml"
    used.write_text(
        f"# written by ctxpolicy.testing.paper from {config} (seed {seed}, task cap {task_cap})\n"
        + yaml.safe_dump(cfg, sort_keys=False),
        encoding="utf-8",
    )
    return used


def build_tables(
    out_dir: str | Path,
    *,
    processes: int = 1,
    audit: bool = True,
    audit_attempts: int | None = None,
    audit_sweep_tasks: int | None = None,
) -> Path:
    """``ctxpolicy aggregate`` (and the compression audit) of the data set -> ``out_dir/tables``.

    The audit is the slow part (one row per compression step, and OTRC compresses every step);
    for quick test data, ``audit_attempts`` = N audits only attempts 1..N of every task, and
    ``audit_sweep_tasks`` = N only the first N tasks of each cell at another threshold setting
    than the primary one (the sweep's tight and loose cells, most of the steps: the retention and
    reacquisition figures leave them out, so a few show that they do)."""
    from ctxpolicy.metrics.aggregate import aggregate, write_left_out, write_tables

    out_dir = Path(out_dir)
    tables_dir = out_dir / "tables"
    tables = aggregate([out_dir / "runs"], processes=processes)
    write_tables(tables, tables_dir)
    write_left_out(tables, tables_dir)
    if tables.problems:
        raise PaperDataError(f"{len(tables.problems)} synthetic run(s) left out, e.g. {tables.problems[0]}")
    if audit:
        skipped = _sweep_runs_left_out(out_dir, audit_sweep_tasks) if audit_sweep_tasks is not None else set()
        _audit(out_dir / "runs", tables_dir / "events.parquet", processes, audit_attempts, skipped)
    _write_replays(tables_dir)
    return tables_dir


def _write_replays(tables_dir: Path) -> None:
    """``tables/replay/runs.parquet``: a replay track in the shape ``ctxpolicy replay`` gives
    (``testing.replays.replay_table``, invented numbers like the rest), so the cost decomposition
    draws something from this data set too."""
    import pandas as pd

    from ctxpolicy.atomic import atomic_output
    from ctxpolicy.testing.replays import replay_table

    replays = replay_table(pd.read_parquet(tables_dir / "runs.parquet"))
    (tables_dir / "replay").mkdir(parents=True, exist_ok=True)
    with atomic_output(tables_dir / "replay" / "runs.parquet") as tmp:
        replays.to_parquet(tmp, index=False)


def _audit_rows(run_dir: Path) -> list[dict]:
    from ctxpolicy.analysis.audit import audit_run

    return audit_run(run_dir)


def _sweep_runs_left_out(out_dir: Path, tasks: int) -> set[tuple[str, ...]]:
    """(benchmark, model, cell slug, task id) of the runs of cells at a threshold setting other
    than ``primary`` whose task is not among the first ``tasks`` of its cohort."""
    config = load_paper_config(out_dir / "config.yaml")
    return {
        (*cell.key, task_id)
        for cell in expand_grid(config)
        if cell.setting not in (None, "primary")
        for task_id in cohort_tasks(config, cell.benchmark, cell.cohort)[tasks:]
    }


def _audit(
    runs_root: Path, out: Path, processes: int, attempts: int | None = None, skipped: set[tuple[str, ...]] = frozenset()
) -> None:
    from concurrent.futures import ProcessPoolExecutor

    from ctxpolicy.analysis.table import frame, write_events
    from ctxpolicy.metrics.records import find_run_dirs

    run_dirs = find_run_dirs([runs_root])
    if attempts is not None:
        run_dirs = [d for d in run_dirs if int(d.name.rsplit("__a", 1)[1]) <= attempts]
    if skipped:
        run_dirs = [d for d in run_dirs if (*d.parts[-4:-1], d.name.rsplit("__a", 1)[0]) not in skipped]
    if processes > 1:
        with ProcessPoolExecutor(processes) as pool:
            chunks = list(pool.map(_audit_rows, run_dirs, chunksize=64))
    else:
        chunks = [_audit_rows(d) for d in run_dirs]
    write_events(frame(row for rows in chunks for row in rows), out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctxpolicy.testing.paper", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the data set's directory")
    parser.add_argument("--config", type=Path, default=CONFIG, help="default: config/synthetic-paper.yaml")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--task-cap", type=int, default=None, help="only the first N tasks of every cohort")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument(
        "--tables",
        action="store_true",
        help="also aggregate into OUT/tables (runs, calls), audit (events.parquet) and write a "
        "replay track (replay/runs.parquet)",
    )
    parser.add_argument("--no-audit", action="store_true", help="with --tables: leave out events.parquet")
    parser.add_argument(
        "--audit-attempts",
        type=int,
        default=None,
        metavar="N",
        help="with --tables: audit only attempts 1..N (the audit is the slow part)",
    )
    parser.add_argument(
        "--audit-sweep-tasks",
        type=int,
        default=None,
        metavar="N",
        help="with --tables: audit only the first N tasks of each cell at another threshold setting than primary",
    )
    args = parser.parse_args(argv)
    if args.task_cap is not None and args.task_cap < 1:
        parser.error(f"--task-cap must be at least 1, got {args.task_cap}")
    started = time.perf_counter()
    try:
        used = make_paper_dataset(
            args.out,
            config=args.config,
            seed=args.seed,
            task_cap=args.task_cap,
            processes=args.processes,
            progress=sys.stderr.isatty(),
        )
    except (PaperDataError, ValueError, OSError) as exc:
        print(f"paper data set: {exc}", file=sys.stderr)
        return 2
    generated = time.perf_counter() - started
    print(f"runs written in {generated:.1f} s -> {args.out / 'runs'} (config {used})")
    if args.tables:
        try:
            tables = build_tables(
                args.out,
                processes=args.processes,
                audit=not args.no_audit,
                audit_attempts=args.audit_attempts,
                audit_sweep_tasks=args.audit_sweep_tasks,
            )
        except PaperDataError as exc:
            print(f"paper data set: {exc}", file=sys.stderr)
            return 1
        print(f"tables built in {time.perf_counter() - started - generated:.1f} s -> {tables}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
