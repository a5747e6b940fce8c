"""Which notebook makes which figure or table, from which inputs.

``TARGETS`` maps a target name (``fig2``, ``fig9``, ``table3``, …) to a dict::

    {"notebook": "notebooks/fig2.ipynb",             # the source notebook
     "executed": "results/notebooks/fig2.ipynb",     # where the DAG keeps the executed copy
     "outputs": ["figures/fig2.pdf", "figures/fig2.png",
                 "figures/fig2.data.csv", "figures/fig2.notes.json"],
     "inputs": ["results/tables/runs.parquet"],      # data files (the config file is not listed)
     "params": {"slot": 0},                          # extra papermill parameters
     "scope": "full"}                                # which tracks' runs it reads (ctxpolicy.grid.SCOPES)

``TARGETS`` is the layout for ``results_dir: results`` and lists only inputs that do not
depend on the config. The workflow should call ``targets_for(config)`` instead: it takes the
loaded config mapping and returns the same shape with every input resolved (the tables under
``{results_dir}/tables``, the cohort files named by ``benchmarks.*.cohorts``, the threshold
files ``{results_dir}/thresholds/{benchmark}/{model}.json`` named by ``thresholds``).
``scope`` names the tracks whose runs a target reads (``ctxpolicy.grid.SCOPES``: the
workflow hands it ``{results_dir}/tables/{scope}/`` instead of all tables, so a sweep figure
does not wait for the summarizer cells). Target names and outputs never depend on the config: a figure whose data a config cannot
provide is still produced, with a note saying what is missing.

Every notebook has a ``parameters`` cell with at least ``tables_dir``, ``config_path``,
``out_dir``, ``n_boot`` and ``seed``; the workflow runs::

    papermill NOTEBOOK EXECUTED -p tables_dir {results_dir}/tables -p config_path CONFIG \\
        -p out_dir figures [-p KEY VALUE for each of params]

``papermill_args(name, ...)`` builds that argument list.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ctxpolicy.threshold_settings import SETTINGS

# a figure's picture, the numbers it draws and its missing-data notes (a JSON list of strings)
FIGURE_SUFFIXES = (".pdf", ".png", ".data.csv", ".notes.json")
TABLE_SUFFIXES = (".csv", ".md", ".tex")

RUNS = "tables/runs.parquet"
CALLS = "tables/calls.parquet"
REPLAY_RUNS = "tables/replay/runs.parquet"  # replay-track runs (workflow/rules/replay.smk)
EVENTS = "tables/events.parquet"  # ctxpolicy audit (docs/analysis.md)

ABLATION_SLOTS = 7  # Figures 9–15: one per (benchmark, model) of the sweep block, in config order
GAINS_LOSSES_SETTINGS = SETTINGS  # Figures 16–18: one per threshold setting


def _figure(stem: str, notebook: str, data: tuple[str, ...], params: dict | None = None,
            scope: str = "full") -> dict:
    return {"notebook": f"notebooks/{notebook}.ipynb",
            "executed": f"results/notebooks/{stem}.ipynb",
            "outputs": [f"figures/{stem}{s}" for s in FIGURE_SUFFIXES],
            "inputs": [f"results/{d}" for d in data],
            "params": dict(params or {}),
            "scope": scope}


def _table(stems: tuple[str, ...], notebook: str, data: tuple[str, ...], scope: str = "full") -> dict:
    return {"notebook": f"notebooks/{notebook}.ipynb",
            "executed": f"results/notebooks/{notebook}.ipynb",
            "outputs": [f"figures/{stem}{s}" for stem in stems for s in TABLE_SUFFIXES],
            "inputs": [f"results/{d}" for d in data],
            "params": {},
            "scope": scope}


def _build_targets() -> dict[str, dict]:
    t: dict[str, dict] = {
        "fig2": _figure("fig2", "fig2", (RUNS,)),
        "fig3": _figure("fig3", "fig3", (RUNS, CALLS), scope="sweep"),  # calls: firings per attempt
        "fig4": _figure("fig4", "fig4", (RUNS,)),
        "fig5": _figure("fig5", "fig5", (RUNS,)),
        "fig6": _figure("fig6", "fig6", (RUNS, CALLS)),
    }
    for slot in range(ABLATION_SLOTS):
        stem = f"fig{9 + slot}"
        t[stem] = _figure(stem, "fig9_15", (RUNS,), {"slot": slot, "name": stem}, scope="sweep")
    for i, setting in enumerate(GAINS_LOSSES_SETTINGS):
        stem = f"fig{16 + i}"
        t[stem] = _figure(stem, "fig16_18", (RUNS,), {"setting": setting, "name": stem}, scope="sweep")
    t["fig19"] = _figure("fig19", "fig19", (RUNS,), scope="summarizer")
    t["fig20"] = _figure("fig20", "fig20", (RUNS,))
    t["fig21"] = _figure("fig21", "fig21", (RUNS,))
    t["reacquisition"] = _figure("reacquisition", "reacquisition", (RUNS, EVENTS))
    t["retention"] = _figure("retention", "retention", (EVENTS,), scope="sweep")  # depths of the sweep too
    t["cost_models"] = _figure("cost_models", "cost_models", (RUNS,))
    t["cost_decomposition"] = _figure("cost_decomposition", "cost_decomposition", (RUNS, REPLAY_RUNS))
    t["table1_4"] = _table(("table1", "table4"), "table1_4", ())
    t["table3"] = _table(("table3",), "table3", (RUNS,))  # strata as the runs recorded them
    t["table5"] = _table(("table5",), "table5", (RUNS,), scope="all")  # every run's environment
    t["table6"] = _table(("table6",), "table6", ())
    return t


TARGETS: dict[str, dict] = _build_targets()


def cohort_files(config: Mapping[str, Any]) -> list[str]:
    """The cohort files named in the config, in config order."""
    files: list[str] = []
    for bench in (config.get("benchmarks") or {}).values():
        for path in ((bench or {}).get("cohorts") or {}).values():
            if path and str(path) not in files:
                files.append(str(path))
    return files


def threshold_files(config: Mapping[str, Any]) -> list[str]:
    """``{results_dir}/thresholds/{benchmark}/{model}.json`` for every entry of ``thresholds``."""
    results_dir = str(config.get("results_dir") or "results")
    return [f"{results_dir}/thresholds/{benchmark}/{model}.json"
            for benchmark, models in (config.get("thresholds") or {}).items()
            for model in (models or {})]


def targets_for(config: Mapping[str, Any]) -> dict[str, dict]:
    """``TARGETS`` with every input resolved for this config (see the module docstring)."""
    results_dir = str(config.get("results_dir") or "results").rstrip("/")
    resolved = copy.deepcopy(TARGETS)
    for spec in resolved.values():
        spec["inputs"] = [results_dir + p[len("results"):] if p.startswith("results/") else p
                          for p in spec["inputs"]]
        spec["executed"] = results_dir + spec["executed"][len("results"):]
    resolved["table3"]["inputs"] += cohort_files(config)
    resolved["table6"]["inputs"] = threshold_files(config)
    return resolved


def papermill_args(name: str, *, config_path: str, tables_dir: str = "results/tables",
                   out_dir: str = "figures", executed: str | None = None,
                   extra: Mapping[str, Any] | None = None) -> list[str]:
    """The papermill command line (without the program name) for one target."""
    spec = TARGETS[name]
    args = [spec["notebook"], executed or spec["executed"],
            "-p", "tables_dir", tables_dir, "-p", "config_path", config_path,
            "-p", "out_dir", out_dir]
    for key, value in {**spec["params"], **(extra or {})}.items():
        args += ["-p", key, str(value)]
    return args
