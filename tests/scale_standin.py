"""A paper-scale stand-in study for the figure tests: the study's 13 configurations × 3 models ×
2 benchmarks × 3 attempts, on a few tasks, made with ``ctxpolicy.metrics.synthetic.make_runs``.

It stands in for the "paper-shaped" synthetic study until that is wired in: ``build(root)``
writes the run directories, aggregates them with ``ctxpolicy aggregate`` (tables), audits them
(``events.parquet``), writes cohort files and a config (study ``synthetic-scale``: its figures carry the synthetic mark) and returns
``(tables_dir, config_path)``. Everything the figures read comes from those two paths.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import yaml

MODELS = ("synth-a", "synth-b", "synth-c")
BENCHMARKS = ("swebench", "terminalbench")
# the study's full comparison: FC, the 11 threshold-triggered configurations and OTRC/St
THRESHOLDED = ("TR/Th/0.5", "SU/Th/0.5", "SU-p/Th/0.5", "S/Th/0.5", "S-p/Th/0.5", "TRC/Th", "TRC+SU/Th",
               "TRC+S/Th", "OTRC+TR/St+Th/0.5", "OTRC+SU-p/St+Th/0.5", "OTRC+S-p/St+Th/0.5")
POLICIES = ("FC", *THRESHOLDED[:6], "TRC+SU/Th", "TRC+S/Th", "OTRC/St", *THRESHOLDED[8:])
SUMMARIZED = ("SU/Th/0.5", "TRC+SU/Th")  # Figure 19's policies, each with two other summarizers
SUMMARIZERS = ("synth-small", "synth-tiny")
TASKS = [f"task-{i:04d}" for i in range(12)]
SWEEP_TASKS = TASKS[:8]
ATTEMPTS = 3
CALLS_PER_RUN = 10


def _config(root: Path) -> dict:
    model = {"server": "llamacpp", "served_name": "qwen2.5-coder-0.5b-instruct",
             "gguf": "qwen2.5-coder-0.5b-instruct-q4_k_m", "ctx_size": 16384, "threads": 2, "parallel": 2,
             "prefix_caching": True, "cache_block_tokens": 16, "temperature": 0.2, "max_tokens": 512}
    adapters = {"swebench": "swebench", "terminalbench": "terminalbench"}
    return {
        "study": "synthetic-scale", "results_dir": str(root / "results"),
        "attempts": ATTEMPTS, "seed": 1234,
        "models": {name: dict(model) for name in (*MODELS, *SUMMARIZERS)},
        "benchmarks": {b: {"adapter": adapters[b], "environment": "docker",
                           "cohorts": {"main": str(root / "cohorts" / f"{b}_main.txt"),
                                       "sweep": str(root / "cohorts" / f"{b}_sweep.txt")}}
                       for b in BENCHMARKS},
        "thresholds": {b: {m: {"source": "preset", "tight": 1800 + 300 * i, "primary": 2400 + 300 * i,
                               "loose": 3000 + 300 * i} for i, m in enumerate(MODELS)} for b in BENCHMARKS},
        "grid": {
            "calibration": {"models": list(MODELS), "benchmarks": list(BENCHMARKS), "cohort": "main"},
            "full_comparison": {"models": list(MODELS), "benchmarks": list(BENCHMARKS), "cohort": "main",
                                "setting": "primary", "policies": list(POLICIES)},
            "summarizer": {"models": [MODELS[0]], "benchmarks": [BENCHMARKS[0]], "cohort": "sweep",
                           "setting": "primary", "policies": list(SUMMARIZED), "summarizers": list(SUMMARIZERS)},
        },
    }


def _write_runs(runs: Path) -> None:
    from ctxpolicy.metrics.synthetic import make_runs

    common = {"tasks": TASKS, "attempts": ATTEMPTS, "calls_per_run": CALLS_PER_RUN}
    for i, benchmark in enumerate(BENCHMARKS):
        make_runs(runs, models=list(MODELS), benchmarks=[benchmark], policies=["FC", *THRESHOLDED],
                  settings=["primary"], seed=11 + i, **common)
        make_runs(runs, models=list(MODELS), benchmarks=[benchmark], policies=["OTRC/St"], settings=[None],
                  seed=11 + i, **common)
    with tempfile.TemporaryDirectory() as tmp:  # Figure 19: other models summarizing for synth-a
        for k, summarizer in enumerate(SUMMARIZERS):
            made = make_runs(Path(tmp) / summarizer, models=[MODELS[0]], benchmarks=[BENCHMARKS[0]],
                             policies=list(SUMMARIZED), settings=["primary"], seed=31 + k,
                             **{**common, "tasks": SWEEP_TASKS})
            for run_dir in made:
                record = json.loads((run_dir / "run.json").read_text())
                cell = f"{run_dir.parent.name}__sum-{summarizer}"
                record["identity"].update(summarizer=summarizer, cell=cell, cohort="sweep", track="summarizer")
                (run_dir / "run.json").write_text(json.dumps(record))
                shutil.copytree(run_dir, runs / BENCHMARKS[0] / MODELS[0] / cell / run_dir.name)


def build(root: Path) -> tuple[Path, Path]:
    """Write the stand-in study under ``root``; return (tables_dir, config_path)."""
    from ctxpolicy import cli
    from ctxpolicy.analysis.audit import audit_run
    from ctxpolicy.analysis.table import frame, write_events
    from ctxpolicy.metrics.records import find_run_dirs

    root = Path(root)
    for benchmark in BENCHMARKS:
        for cohort, tasks in (("main", TASKS), ("sweep", SWEEP_TASKS)):
            path = root / "cohorts" / f"{benchmark}_{cohort}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(tasks) + "\n")
    runs, tables = root / "runs", root / "results" / "tables"
    _write_runs(runs)
    if cli.main(["aggregate", "--runs", str(runs), "--out", str(tables), "--processes", "1", "--strict"]) != 0:
        raise RuntimeError(f"ctxpolicy aggregate failed on {runs}")
    write_events(frame(row for run_dir in find_run_dirs([runs]) for row in audit_run(run_dir)),
                 tables / "events.parquet")
    config_path = root / "config.yaml"
    config_path.write_text(yaml.safe_dump(_config(root), sort_keys=False))
    return tables, config_path


if __name__ == "__main__":
    import sys

    print(build(Path(sys.argv[1])))
