"""A paper-scale stand-in for the figure tests: the study's shape (13 configurations, 3 models,
2 benchmarks, 3 attempts, the sweep's 3 thresholds × 3 depths on two models) at a size a test
can build in seconds (12 main tasks, 8 sweep tasks).

``build(root)`` writes synthetic runs (``ctxpolicy.metrics.synthetic.make_runs``), aggregates
them into ``root/tables`` and writes a matching config ``root/config.yaml``; it returns
``(runs, config, calls)`` like ``figure_helpers.read_fixture``. The integrator may swap it for
the paper-shaped data set; the tests only rely on that return shape and on ``PAIRS``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

MODELS = ("synth-a", "synth-b", "synth-c")
SWEEP_MODELS = MODELS[:2]
BENCHMARKS = ("swebench", "terminalbench")
SETTINGS = ("tight", "primary", "loose")
DEPTHS = (0.3, 0.5, 0.7)
TUNABLE = ("TR", "SU", "SU-p", "S", "S-p")
INVARIANT = ("TRC/Th", "TRC+SU/Th", "TRC+S/Th", "OTRC+TR/St+Th/0.5", "OTRC+SU-p/St+Th/0.5", "OTRC+S-p/St+Th/0.5")
FULL = ("FC", *(f"{p}/Th/0.5" for p in TUNABLE), *INVARIANT[:3], "OTRC/St", *INVARIANT[3:])
TASKS = [f"task-{i:04d}" for i in range(12)]
SWEEP_TASKS = TASKS[:8]
ATTEMPTS = 3
CALLS = 6
PRESET = {"swebench": {"tight": 10000, "primary": 15000, "loose": 20000},
          "terminalbench": {"tight": 2000, "primary": 3000, "loose": 4000}}
# the appendix's one-pair figures, as the paper numbers them (Figures 9–15; the others have no pair)
ABLATION_PAIRS = {9: "synth-a/swebench", 12: "synth-a/terminalbench", 13: "synth-b/terminalbench",
                  15: "synth-b/swebench", 10: "none", 11: "none", 14: "none"}


def _config(root: Path) -> dict:
    cohorts = {}
    for bench in BENCHMARKS:
        cohorts[bench] = {}
        for cohort, tasks in (("main", TASKS), ("sweep", SWEEP_TASKS)):
            path = root / "cohorts" / f"{bench}_{cohort}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(tasks) + "\n")
            cohorts[bench][cohort] = str(path)
    model = {"server": "llamacpp", "served_name": "qwen2.5-coder-0.5b-instruct",
             "gguf": "qwen2.5-coder-0.5b-instruct-q4_k_m", "ctx_size": 32768,
             "threads": 2, "parallel": 2, "prefix_caching": True, "cache_block_tokens": 16,
             "temperature": 0.2, "max_tokens": 512}
    return {
        "study": "synthetic-scale",
        "results_dir": str(root / "results"),
        "attempts": ATTEMPTS,
        "seed": 1234,
        "models": {m: dict(model) for m in MODELS},
        "benchmarks": {b: {"adapter": b, "environment": "bwrap", "cohorts": cohorts[b]} for b in BENCHMARKS},
        "thresholds": {b: {m: {"source": "preset", **PRESET[b]} for m in MODELS} for b in BENCHMARKS},
        "grid": {
            "calibration": {"models": list(MODELS), "benchmarks": list(BENCHMARKS), "cohort": "main"},
            "full_comparison": {"models": list(MODELS), "benchmarks": list(BENCHMARKS), "cohort": "main",
                                "setting": "primary", "policies": list(FULL)},
            "sweeps": {"models": list(SWEEP_MODELS), "benchmarks": list(BENCHMARKS), "cohort": "sweep",
                       "settings": list(SETTINGS), "depths": list(DEPTHS), "tunable": list(TUNABLE),
                       "invariant": list(INVARIANT)},
        },
    }


def _write_runs(runs_root: Path) -> None:
    from ctxpolicy.metrics.synthetic import make_runs

    common = {"benchmarks": list(BENCHMARKS), "attempts": ATTEMPTS, "calls_per_run": CALLS, "seed": 3}
    threshold_policies = [p for p in FULL if p not in ("FC", "OTRC/St")]
    make_runs(runs_root, models=list(MODELS), policies=["FC", *threshold_policies], settings=["primary"],
              tasks=TASKS, **common)
    make_runs(runs_root, models=list(MODELS), policies=["OTRC/St"], settings=[None], tasks=TASKS, **common)
    swept = [f"{p}/Th/{d:g}" for p in TUNABLE for d in DEPTHS if d != 0.5]
    make_runs(runs_root, models=list(SWEEP_MODELS), policies=swept, settings=list(SETTINGS),
              tasks=SWEEP_TASKS, **common)
    make_runs(runs_root, models=list(SWEEP_MODELS),
              policies=[*(f"{p}/Th/0.5" for p in TUNABLE), *INVARIANT], settings=["tight", "loose"],
              tasks=SWEEP_TASKS, **common)


def build(root: str | Path):
    """Write the stand-in under ``root``; return (runs, config, calls)."""
    from ctxpolicy.figures import inputs
    from ctxpolicy.metrics.aggregate import aggregate, write_tables

    root = Path(root)
    _write_runs(root / "runs")
    tables = aggregate([root / "runs"], processes=1)
    if tables.problems:
        raise RuntimeError(f"scale stand-in: runs left out: {tables.problems[:3]}")
    write_tables(tables, root / "tables")
    (root / "config.yaml").write_text(yaml.safe_dump(_config(root), sort_keys=False))
    return (inputs.read_runs(root / "tables"), inputs.read_config(root / "config.yaml"),
            inputs.read_calls(root / "tables"))
