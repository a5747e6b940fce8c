"""Tables 1/4 (the grid), 3 (tasks per evaluation), 5 (environment) and 6 (thresholds).

Every table is built from what the study recorded or configured, never typed by hand.
Each builder returns ``(table, note)``; the note says what is missing, or is ``None``.
Every builder takes ``pairs`` (a list of (model, benchmark), ``inputs.parse_pairs``; None: all)
and keeps only those pairs' rows (Table 3, per benchmark, keeps the pairs' benchmarks); the
study's tables show everything, so the workflow passes no pairs for them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pandas as pd

from ctxpolicy import rundir
from ctxpolicy.figures import style
from ctxpolicy.study import Study

FILLED, OPEN = "●", "○"
TRACK_LABELS = {
    "calibration": "calibration (FC)",
    "full": "full comparison",
    "sweep": "threshold/depth sweep",
    "summarizer": "summarizer comparison",
}


# ---------------------------------------------------------------- Table 1/4: the grid


def grid_cells(study: Study, pairs: list[tuple[str, str]] | None = None) -> list:
    """The study's cells (``Study.cells``), only those of ``pairs`` when given."""
    cells = list(study.cells)
    return cells if pairs is None else [c for c in cells if (c.model, c.benchmark) in set(pairs)]


def _mark(tracks: set[str]) -> str:
    return FILLED if tracks & {"full", "calibration"} else OPEN if tracks else ""


def table1(cells: list) -> pd.DataFrame:
    """One row per policy; per threshold setting ● in the full comparison, ○ in a sweep only."""
    settings = sorted({c.setting for c in cells if c.setting}, key=style.setting_sort_key)
    rows = []
    for spec in style.order_policies(c.policy for c in cells):
        mine = [c for c in cells if c.policy == spec]
        parsed = style.spec_of(spec)
        trigger, depth = (parsed.trigger, parsed.depth) if parsed else (None, None)
        row = {
            "policy": style.policy_label(spec),
            "trigger": trigger or "–",
            "depth": "–" if depth is None else f"{depth:g}",
        }
        for s in settings:
            row[s] = _mark({c.track for c in mine if c.setting == s})
        row["no threshold"] = _mark({c.track for c in mine if not c.setting})
        row["summarizers"] = ", ".join(sorted({c.summarizer for c in mine if c.summarizer})) or "–"
        row["models"] = ", ".join(sorted({c.model for c in mine}))
        row["benchmarks"] = ", ".join(sorted({c.benchmark for c in mine}))
        rows.append(row)
    return pd.DataFrame(rows)


def table4(cells: list, study: Study) -> tuple[pd.DataFrame, str | None]:
    """Cells and runs per track, benchmark and model."""
    rows: dict[tuple, dict] = {}
    unreadable: set[str] = set()
    for c in cells:
        key = (c.track, c.benchmark, c.model)
        row = rows.setdefault(
            key,
            {
                "track": TRACK_LABELS.get(c.track, c.track),
                "benchmark": c.benchmark,
                "model": c.model,
                "cohort": c.cohort,
                "policies": set(),
                "cells": 0,
                "tasks": 0,
                "runs": 0,
            },
        )
        row["policies"].add(c.policy)
        row["cells"] += 1
        try:
            n = len(study.tasks(c))
        except Exception:  # an unreadable cohort is reported in the note, not fatal
            unreadable.add(f"{c.benchmark}/{c.cohort}")
            n = 0
        row["tasks"] = max(row["tasks"], n)
        row["runs"] += n * study.attempts
    table = pd.DataFrame([{**r, "policies": len(r["policies"])} for r in rows.values()])
    note = f"cohort files unreadable, counted as 0 tasks: {', '.join(sorted(unreadable))}" if unreadable else None
    return table, note


# ---------------------------------------------------------------- Table 3: tasks per evaluation


def default_stratum(task_id: str) -> str:
    """For tasks no run has recorded yet: ``tinyweb-001`` → ``tinyweb``,
    ``astropy__astropy-12907`` → ``astropy/astropy``; ids without a number → ``other``."""
    stem = re.sub(r"[-_]\d+$", "", task_id)
    return stem.replace("__", "/") if stem != task_id else "other"


def table3(
    study: Study, runs: pd.DataFrame | None = None, pairs: list[tuple[str, str]] | None = None
) -> tuple[pd.DataFrame, str | None]:
    """Tasks the study runs per benchmark, cohort and stratum (``cohort_limit`` applied, as
    ``ctxpolicy.study.grid.cohort_tasks`` applies it); strata as the runs recorded them."""
    from ctxpolicy.cohort_file import CohortError, read_cohort
    from ctxpolicy.study.config import ConfigError

    known = {}
    if runs is not None and not runs.empty:
        known = dict(zip(runs["task_id"].astype(str), runs["stratum"].astype(str)))
    rows, missing, limited = [], [], []
    benchmarks = None if pairs is None else {b for _, b in pairs}
    for benchmark in study.benchmarks:
        if benchmarks is not None and benchmark not in benchmarks:
            continue
        for cohort, path in study.benchmark(benchmark)["cohorts"].items():
            try:
                tasks = study.cohort_tasks(benchmark, cohort)
                listed = len(read_cohort(study.cohort_path(benchmark, cohort)))
            except (ConfigError, CohortError):
                missing.append(str(path))
                continue
            if len(tasks) < listed:
                limited.append(f"{benchmark}/{cohort} {len(tasks)} of {listed}")
            strata = pd.Series([known.get(t) or default_stratum(t) for t in tasks], dtype="object")
            counts = strata.value_counts().sort_index()
            for stratum, n in counts.items():
                rows.append({"benchmark": benchmark, "cohort": cohort, "stratum": stratum, "tasks": int(n)})
            rows.append({"benchmark": benchmark, "cohort": cohort, "stratum": "all", "tasks": len(tasks)})
    notes = []
    if limited:
        notes.append(f"cohort_limit: the study runs only the first tasks of these cohort files: {', '.join(limited)}")
    if missing:
        notes.append(f"cohort files missing: {', '.join(missing)}")
    if not rows and not missing:
        notes.append("the config names no cohort files")
    return pd.DataFrame(rows, columns=["benchmark", "cohort", "stratum", "tasks"]), "; ".join(notes) or None


# ---------------------------------------------------------------- Table 5: environment


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif value is not None:
        out[prefix] = str(value)


IGNORED_FIELDS = (".url",)  # loopback ports change with every server start


def cell_records(runs: pd.DataFrame) -> tuple[list[dict], list[str]]:
    """One ``run.json`` per cell: the first readable one in run-directory order. A cell's runs
    share one server and one checkout (``ctxpolicy run-cell``), so one record speaks for all.
    Returns the records and the cells that had none."""
    records, unreadable = [], []
    for cell, group in runs.groupby(["benchmark", "model", "cell"], observed=True, sort=True):
        for run_dir in sorted(group["run_dir"].dropna().astype(str)):
            try:
                records.append(rundir.read_run_json(run_dir))
                break
            except rundir.RunRecordError:
                continue
        else:
            unreadable.append("/".join(map(str, cell)))
    return records, unreadable


def table5(runs: pd.DataFrame, pairs: list[tuple[str, str]] | None = None) -> tuple[pd.DataFrame, str | None]:
    """Versions, serving and inference settings as the runs recorded them, per model."""
    from ctxpolicy.figures.inputs import select_pairs

    runs = select_pairs(runs, pairs)
    records, unreadable = cell_records(runs)
    if not records:
        why = "no runs in the runs table" if runs.empty else "no run.json readable under the run_dir paths"
        return pd.DataFrame(columns=["model", "field", "value"]), f"no environment recorded: {why}"
    values: dict[tuple[str, str], set[str]] = {}
    for rec in records:
        model = str((rec.get("identity") or {}).get("model", "?"))
        flat: dict[str, str] = {}
        _flatten(
            "",
            {
                "versions": rec.get("versions") or {},
                "settings": rec.get("settings") or {},
                "hardware": rec.get("hardware") or {},
            },
            flat,
        )
        for field, value in flat.items():
            if field.endswith(IGNORED_FIELDS):
                continue
            if field.endswith(("git_commit", "sha256")):
                value = value[:12]
            values.setdefault((model, field), set()).add(value)
    rows = [{"model": m, "field": f, "value": " | ".join(sorted(v))} for (m, f), v in sorted(values.items())]
    note = f"cells without a readable run.json: {', '.join(unreadable)}" if unreadable else None
    return pd.DataFrame(rows), note


# ---------------------------------------------------------------- Table 6: thresholds


def table6(study: Study, pairs: list[tuple[str, str]] | None = None) -> tuple[pd.DataFrame, str | None]:
    rows, missing = [], []
    for pair in study.threshold_pairs():
        benchmark, model = pair.benchmark, pair.model
        if pairs is not None and (model, benchmark) not in set(pairs):
            continue
        spec = dict(study.threshold_source(pair))
        path = study.thresholds_file(pair)
        try:
            values = json.loads(path.read_text())
        except (OSError, ValueError):
            values = spec if spec["source"] == "preset" else None
        if values is None:
            missing.append(str(path))
            continue
        preset = str(values.get("source", spec["source"])) == "preset"
        rows.append(
            {
                "benchmark": benchmark,
                "model": model,
                "source": "preset*" if preset else "calibrated",
                **{s: values.get(s) for s in style.SETTING_ORDER},
            }
        )
    notes = []
    if any(r["source"].startswith("preset") for r in rows):
        notes.append("* preset thresholds from the config, not calibrated")
    if missing:
        notes.append(f"no thresholds file yet: {', '.join(missing)}")
    if not rows and not missing:
        notes.append("the config lists no thresholds")
    return (
        pd.DataFrame(rows, columns=["benchmark", "model", "source", *style.SETTING_ORDER]),
        "; ".join(notes) or None,
    )


TABLE2_COLUMNS = ("system", "source", "table2_analogue", "preset", "spec", "threshold", "mapping")


def table2() -> pd.DataFrame:
    """Table 2 beside ours: each deployed mechanism with the study's closest analogue and our
    preset for it (``policies.PRESETS``), then our presets without a Table 2 row (Codex) and the
    neighbouring study's policies (``policies.NEIGHBOUR_PRESETS``), each with its spec, its
    threshold (a fraction of the context window; none for step- and turn-triggered ones) and
    what the mapping does."""
    from ctxpolicy.policies.presets import NEIGHBOUR_PRESETS, PRESETS, TABLE2_ANALOGUES

    rows = []
    by_row = {p.table2_row: p for p in PRESETS.values() if p.table2_row}
    for system, analogue in TABLE2_ANALOGUES.items():
        mine = by_row.get(system)
        rows.append(
            {
                "system": system,
                "source": "Table 2",
                "table2_analogue": analogue,
                "preset": mine.name if mine else None,
                "spec": str(mine.policy) if mine else None,
                "threshold": f"{mine.threshold_fraction:g} × window" if mine else None,
                "mapping": mine.behaviour if mine else "no preset",
            }
        )
    for p in PRESETS.values():
        if not p.table2_row:
            rows.append(
                {
                    "system": p.system,
                    "source": "ours (not in Table 2)",
                    "table2_analogue": None,
                    "preset": p.name,
                    "spec": str(p.policy),
                    "threshold": f"{p.threshold_fraction:g} × window",
                    "mapping": p.behaviour,
                }
            )
    for p in NEIGHBOUR_PRESETS.values():
        rows.append(
            {
                "system": "SWE-agent",
                "source": p.study,
                "table2_analogue": None,
                "preset": p.name,
                "spec": str(p.policy),
                "threshold": None,
                "mapping": p.behaviour,
            }
        )
    return pd.DataFrame(rows, columns=list(TABLE2_COLUMNS))
