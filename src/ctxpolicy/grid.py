"""Expand a study config into cells, the unit of work of the workflow.

A cell is (track, benchmark, model, policy spec, threshold setting, cohort, summarizer);
its runs are every task of its cohort times attempts ``1..A``. Tracks, in order:
calibration (FC on the calibration cohort), full comparison, sweeps and the summarizer
comparison. A cell already claimed by an earlier track is not repeated: the calibration FC
cell is the full comparison's FC reference, and sweeps skip the (policy, setting) cells of
the full comparison, whose main cohort contains the sweep subset.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from ctxpolicy.cohort_file import CohortError, read_cohort
from ctxpolicy.config import ConfigError
from ctxpolicy.paths import in_repo

TRACK_NAMES = {"calibration": "calibration", "full_comparison": "full",
               "sweeps": "sweep", "summarizer": "summarizer"}


@dataclass(frozen=True)
class PolicySpec:
    """What the grid needs of a policy spec: its canonical text, its slug, whether it has a threshold."""

    spec: str
    slug: str
    has_threshold: bool


@functools.lru_cache(maxsize=None)
def parse_policy(spec: str) -> PolicySpec:
    """Parse ``spec`` (raises ctxpolicy.policies.PolicySpecError, a ValueError, listing the valid forms)."""
    from ctxpolicy.policies.spec import parse_spec

    parsed = parse_spec(spec)
    return PolicySpec(spec=str(parsed), slug=parsed.slug, has_threshold=parsed.needs_threshold)


@dataclass(frozen=True)
class Cell:
    track: str              # calibration | full | sweep | summarizer
    benchmark: str
    model: str
    policy: str             # the P/T/D spec; depth is part of it
    setting: str | None     # tight | primary | loose; None for policies without a threshold
    cohort: str
    summarizer: str | None  # another model summarizes; None: the agent's own model

    @property
    def slug(self) -> str:
        parts = [parse_policy(self.policy).slug]
        if self.setting:
            parts.append(self.setting)
        if self.summarizer:
            parts.append(f"sum-{self.summarizer}")
        return "__".join(parts)

    def run_root(self, results_dir: str | Path) -> Path:
        return Path(results_dir) / "runs" / self.benchmark / self.model / self.slug

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.benchmark, self.model, self.slug)


def expand_grid(config: dict) -> list[Cell]:
    """Every cell of the study, in track order, each (benchmark, model, slug) once."""
    grid = config["grid"]
    cells: dict[tuple[str, str, str], Cell] = {}

    def add(track: str, section: dict, policy: str, setting: str | None, summarizer: str | None = None):
        for benchmark in section.get("benchmarks", []):
            for model in section.get("models", []):
                if summarizer == model:
                    summarizer_name = None  # the agent summarizing itself is the ordinary cell
                else:
                    summarizer_name = summarizer
                parsed = parse_policy(policy)
                threshold = setting if parsed.has_threshold else None
                cell = Cell(TRACK_NAMES[track], benchmark, model, parsed.spec, threshold,
                            section["cohort"], summarizer_name)
                cells.setdefault(cell.key, cell)

    calibration = grid.get("calibration", {})
    if calibration.get("models") and calibration.get("benchmarks"):
        add("calibration", {"cohort": "main", **calibration}, "FC", None)

    full = grid.get("full_comparison", {})
    for policy in full.get("policies", []):
        add("full_comparison", {"cohort": "main", **full}, policy, full.get("setting", "primary"))

    sweeps = {"cohort": "sweep", **grid.get("sweeps", {})}
    for setting in sweeps.get("settings", []):
        for primitive in sweeps.get("tunable", []):
            for depth in sweeps.get("depths", []):
                add("sweeps", sweeps, f"{primitive}/Th/{depth:g}", setting)
        for policy in sweeps.get("invariant", []):
            add("sweeps", sweeps, policy, setting)

    summ = {"cohort": "sweep", **grid.get("summarizer", {})}
    for policy in summ.get("policies", []):
        for summarizer in summ.get("summarizers", []):
            add("summarizer", summ, policy, summ.get("setting", "primary"), summarizer)

    return list(cells.values())


# ---------------------------------------------------------------- cohorts and run counts


def cohort_path(config: dict, benchmark: str, cohort: str) -> Path:
    """A cohort file; relative paths are relative to the repository root, as the adapters read them."""
    return in_repo(config["benchmarks"][benchmark]["cohorts"][cohort])


def cohort_tasks(config: dict, benchmark: str, cohort: str) -> list[str]:
    """Task ids a cohort runs: its file's ids (one per line, `#` starts a comment, as in
    ctxpolicy.benchmarks.cohorts), only the first N where ``cohort_limit`` says so."""
    try:
        tasks = read_cohort(cohort_path(config, benchmark, cohort))
    except CohortError as exc:
        raise ConfigError(f"cohort {cohort!r} of benchmark {benchmark!r}: {exc}") from None
    limit = config["benchmarks"][benchmark].get("cohort_limit", {}).get(cohort)
    return tasks[:limit] if limit else tasks


def limited_tasks(config: dict, cell: Cell) -> list[str] | None:
    """The task ids to pass to run-cell when the cohort is cut short; None when it runs whole."""
    if cell.cohort not in config["benchmarks"][cell.benchmark].get("cohort_limit", {}):
        return None
    return cohort_tasks(config, cell.benchmark, cell.cohort)


def run_count(cell: Cell, config: dict) -> int:
    return len(cohort_tasks(config, cell.benchmark, cell.cohort)) * config["attempts"]


# ---------------------------------------------------------------- thresholds


def thresholds_path(config: dict, benchmark: str, model: str) -> Path:
    return Path(config["results_dir"]) / "thresholds" / benchmark / f"{model}.json"


def resolve_threshold(config: dict, benchmark: str, model: str, setting: str | None,
                      thresholds_file: str | Path | None = None) -> int | None:
    """Tokens of a threshold setting: the config's preset, or the calibrated thresholds file."""
    if setting is None:
        return None
    where = f"thresholds.{benchmark}.{model}"
    source = config.get("thresholds", {}).get(benchmark, {}).get(model)
    if source is None:
        raise ConfigError(f"{where}: missing; a {setting!r} threshold needs "
                          "{source: calibrate} or {source: preset, ...}")
    if source["source"] == "preset":
        if setting not in source:
            raise ConfigError(f"{where}.{setting}: missing from the preset; present: "
                              f"{', '.join(s for s in ('tight', 'primary', 'loose') if s in source)}")
        return int(source[setting])
    path = Path(thresholds_file) if thresholds_file else thresholds_path(config, benchmark, model)
    try:
        values = json.loads(path.read_text())
    except OSError:
        raise ConfigError(f"{path}: no thresholds file; run calibration first "
                          f"(snakemake {thresholds_path(config, benchmark, model)})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg})") from None
    if not isinstance(values.get(setting), int):
        raise ConfigError(f"{path}: {setting}: {values.get(setting)!r} is not a token count")
    return values[setting]


# ---------------------------------------------------------------- summaries


def summarize(cells: list[Cell], config: dict) -> list[dict]:
    """Cells and runs per benchmark, model and track, in grid order."""
    counts: Counter = Counter()
    runs: Counter = Counter()
    for cell in cells:
        key = (cell.benchmark, cell.model, cell.track)
        counts[key] += 1
        runs[key] += run_count(cell, config)
    return [{"benchmark": b, "model": m, "track": t, "cells": counts[(b, m, t)], "runs": runs[(b, m, t)]}
            for (b, m, t) in counts]


def cell_record(cell: Cell, config: dict) -> dict:
    return {**asdict(cell), "slug": cell.slug, "run_root": str(cell.run_root(config["results_dir"])),
            "runs": run_count(cell, config)}


# ---------------------------------------------------------------- scopes: which cells a table needs

# A figure is drawn from the runs of the tracks it compares; FC (calibration) and the full
# comparison are every comparison's reference. "all" is results/tables/ itself.
SCOPES: dict[str, tuple[str, ...]] = {
    "full": ("calibration", "full"),
    "sweep": ("calibration", "full", "sweep"),
    "summarizer": ("calibration", "full", "summarizer"),
    "all": ("calibration", "full", "sweep", "summarizer"),
}
_TARGET_SCOPES = {"fig3": "sweep", "fig19": "summarizer",
                  **{f"fig{n}": "sweep" for n in range(9, 19)}}


def target_scope(name: str, declared: str | None = None) -> str:
    """The scope of the tables a figure or table target reads (a catalog's own ``scope`` wins)."""
    scope = declared or _TARGET_SCOPES.get(name, "full")
    if scope not in SCOPES:
        raise ConfigError(f"figure target {name}: scope {scope!r} unknown; allowed: {', '.join(SCOPES)}")
    return scope


def cells_in_scope(cells: list[Cell], scope: str) -> list[Cell]:
    return [c for c in cells if c.track in SCOPES[scope]]


def calibration_cell(cells: list[Cell], benchmark: str, model: str) -> Cell | None:
    return next((c for c in cells if c.track == "calibration" and c.benchmark == benchmark
                 and c.model == model), None)
