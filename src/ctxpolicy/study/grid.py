"""Expand a study config into cells, the unit of work of the workflow.

A cell is (track, benchmark, model, policy spec, threshold setting, cohort, summarizer);
its runs are every task of its cohort times attempts ``1..A``. Tracks, in order:
calibration (FC on the calibration cohort), full comparison, sweeps and the summarizer
comparison. A cell already claimed by an earlier track is not repeated: the calibration FC
cell is the full comparison's FC reference, and sweeps skip the (policy, setting) cells of
the full comparison, whose main cohort contains the sweep subset.
"""

from __future__ import annotations

from collections.abc import Iterator

import difflib
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxpolicy.cohort_file import CohortError, read_cohort
from ctxpolicy.study.config import TRACKS, ConfigError, validate_config
from ctxpolicy.paths import in_repo
from ctxpolicy.policies.spec import PolicySpec, parse_spec
from ctxpolicy.serving.models import model_file_problem
from ctxpolicy.threshold_settings import (
    PRESET,
    ThresholdsFileError,
    is_token_count,
    order_problem,
    read_thresholds,
)

# the config's grid sections -> the track a cell records
TRACK_NAMES = dict(zip(TRACKS, ("calibration", "full", "sweep", "summarizer"), strict=True))


@dataclass(frozen=True)
class Cell:
    track: str  # calibration | full | sweep | summarizer
    benchmark: str
    model: str
    spec: PolicySpec  # the parsed P/T/D policy (depth is part of it); its text is ``policy``
    setting: str | None  # tight | primary | loose; None for policies without a threshold
    cohort: str
    summarizer: str | None  # another model summarizes; None: the agent's own model

    def __post_init__(self) -> None:
        # a caller holding the policy's text (a run record, a flag) has it parsed here, once
        if isinstance(self.spec, str):
            object.__setattr__(self, "spec", parse_spec(self.spec))

    @functools.cached_property
    def policy(self) -> str:
        """The policy's canonical text (``TR/Th/0.5``): what run records and tables name."""
        return str(self.spec)

    @property
    def slug(self) -> str:
        parts = [self.spec.slug]
        if self.setting:
            parts.append(self.setting)
        if self.summarizer:
            parts.append(f"sum-{self.summarizer}")
        return "__".join(parts)

    @property
    def id(self) -> str:
        """``BENCHMARK/MODEL/SLUG``: the cell's path under ``{results_dir}/runs/`` and its name on
        the command line (``ctxpolicy run-cell --cell ID``)."""
        return "/".join(self.key)

    def run_root(self, results_dir: str | Path) -> Path:
        return Path(results_dir) / "runs" / self.id

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.benchmark, self.model, self.slug)


def expand_grid(config: dict) -> list[Cell]:
    """Every cell of the study, in track order, each (benchmark, model, slug) once. ``config`` is
    validated and default-filled (``config.load_config``): every section and key the schema
    gives a default is there."""
    grid = config["grid"]
    cells: dict[tuple[str, str, str], Cell] = {}

    def add(track: str, policy: PolicySpec, setting: str | None, summarizer: str | None = None):
        section = grid[track]
        for benchmark in section["benchmarks"]:
            for model in section["models"]:
                # the agent summarizing itself is the ordinary cell
                summarizer_name = None if summarizer == model else summarizer
                threshold = setting if policy.needs_threshold else None
                cell = Cell(TRACK_NAMES[track], benchmark, model, policy, threshold, section["cohort"], summarizer_name)
                cells.setdefault(cell.key, cell)

    for entry in grid_entries(grid):
        add(*entry)
    return list(cells.values())


def grid_entries(grid: dict) -> Iterator[tuple[str, PolicySpec, str | None, str | None]]:
    """The grid's entries in track order, (section, policy, setting, summarizer), before they are
    crossed with each section's models and benchmarks: the one walk of the grid's sections that
    ``expand_grid`` and ``ctxpolicy.study.Study.designs`` share. Each policy is parsed here, once
    per entry, and travels on as its ``PolicySpec``."""
    calibration = grid["calibration"]
    if calibration["models"] and calibration["benchmarks"]:
        yield "calibration", parse_spec("FC"), None, None
    full = grid["full_comparison"]
    for policy in full["policies"]:
        yield "full_comparison", parse_spec(policy), full["setting"], None
    sweeps = grid["sweeps"]
    for setting in sweeps["settings"]:
        for primitive in sweeps["tunable"]:
            for depth in sweeps["depths"]:
                yield "sweeps", parse_spec(f"{primitive}/Th/{depth:g}"), setting, None
        for policy in sweeps["invariant"]:
            yield "sweeps", parse_spec(policy), setting, None
    summ = grid["summarizer"]
    for policy in summ["policies"]:
        spec = parse_spec(policy)
        for summarizer in summ["summarizers"]:
            yield "summarizer", spec, summ["setting"], summarizer


# ---------------------------------------------------------------- cohorts and run counts


def cohort_path(config: dict, benchmark: str, cohort: str) -> Path:
    """A cohort file; relative paths are relative to the repository root, as the adapters read them."""
    return in_repo(config["benchmarks"][benchmark]["cohorts"][cohort])


def cohort_tasks(config: dict, benchmark: str, cohort: str) -> list[str]:
    """Task ids a cohort runs: its file's ids (one per line, `#` starts a comment, as in
    ctxpolicy.benchmarks.cohorts), only the first N where the benchmark's ``cohort_limit`` says so."""
    try:
        tasks = read_cohort(cohort_path(config, benchmark, cohort))
    except CohortError as exc:
        raise ConfigError(f"cohort {cohort!r} of benchmark {benchmark!r}: {exc}") from None
    limits = config["benchmarks"][benchmark]["cohort_limit"]  # the schema fills in {}
    return tasks[: limits[cohort]] if cohort in limits else tasks


# ---------------------------------------------------------------- cells by id


def find_cell(cells: list[Cell], cell_id: str, source: str = "<config>") -> Cell:
    """The cell whose id (``BENCHMARK/MODEL/SLUG``) is ``cell_id``; a ConfigError naming the
    closest ids when there is none."""
    by_id = {cell.id: cell for cell in cells}
    wanted = cell_id.strip().strip("/")
    if wanted in by_id:
        return by_id[wanted]
    close = difflib.get_close_matches(wanted, list(by_id), n=5, cutoff=0.6)
    hint = f"closest: {', '.join(close)}" if close else f"{len(by_id)} cells; list them with `ctxpolicy grid --json`"
    raise ConfigError(
        f"{source}: cell {cell_id!r} is not in the grid (ids are BENCHMARK/MODEL/SLUG, "
        f"as under results_dir/runs/); {hint}"
    )


# ---------------------------------------------------------------- thresholds


def thresholds_path(config: dict, benchmark: str, model: str) -> Path:
    return Path(config["results_dir"]) / "thresholds" / benchmark / f"{model}.json"


def resolve_threshold(config: dict, cell: Cell, thresholds_file: str | Path | None = None) -> int | None:
    """Tokens of the cell's threshold setting, read from its thresholds file (calibrated or written
    from the preset by ``ctxpolicy calibrate --preset``); default file ``thresholds_path``.
    None for a cell without a threshold."""
    if cell.setting is None:
        return None
    path = Path(thresholds_file) if thresholds_file else thresholds_path(config, cell.benchmark, cell.model)
    try:
        values = read_thresholds(path)
    except OSError as exc:
        raise ConfigError(
            f"{path}: cannot read the thresholds file of {cell.benchmark}/{cell.model} "
            f"({exc.strerror or exc}); {_how_to_write(config, cell, path)}"
        ) from None
    except ThresholdsFileError as exc:
        raise ConfigError(str(exc)) from None
    value = values.get(cell.setting)
    if not is_token_count(value):
        raise ConfigError(f"{path}: {cell.setting}: {value!r} is not a token count (cell {cell.id})")
    return value


def _how_to_write(config: dict, cell: Cell, path: Path) -> str:
    per_model = config["thresholds"][cell.benchmark] if cell.benchmark in config["thresholds"] else {}
    source = per_model[cell.model]["source"] if cell.model in per_model else None
    target = thresholds_path(config, cell.benchmark, cell.model)
    if source == "preset":
        return (
            f"write it from the preset: ctxpolicy calibrate --preset --config CONFIG "
            f"--benchmark {cell.benchmark} --model {cell.model} --out {path} (or snakemake {target})"
        )
    return f"run calibration first (snakemake {target})"


# ---------------------------------------------------------------- the study: config checked against its grid


def validate_study(data: Mapping[str, Any], source: str = "<config>") -> dict:
    """``config.validate_config`` and the checks that need the grid (``check_study``)."""
    return check_study(validate_config(data, source=source), source=source)


def check_study(config: dict, source: str = "<config>") -> dict:
    """The cross references a config alone cannot check: every ``gguf`` names a model file of
    ``serving.models.REGISTRY``, every policy spec parses, every cell
    with a threshold setting has a threshold source that gives it, every preset's settings go
    tight < primary < loose, and every cohort a cell runs has its file. Returns ``config``."""

    def fail(where: str, message: str) -> None:
        raise ConfigError(f"{source}: {where}: {message}")

    _check_model_files(config, fail)
    _check_policies(config, fail)
    _check_thresholds(config, fail)
    _check_cohorts(config, fail)
    return config


def _check_model_files(config: dict, fail) -> None:
    for m, spec in config["models"].items():
        problem = spec.get("gguf") is not None and model_file_problem(spec["gguf"])
        if problem:
            fail(f"models.{m}.gguf", problem)


def _check_cohorts(config: dict, fail) -> None:
    """Every cohort a cell runs has a readable, non-empty file (``cohort_file.read_cohort``), so
    that a missing one stops ``snakemake -n`` as it stops ``ctxpolicy grid``, results or not."""
    for benchmark, cohort in sorted({(cell.benchmark, cell.cohort) for cell in expand_grid(config)}):
        try:
            cohort_tasks(config, benchmark, cohort)
        except ConfigError as exc:
            fail(f"benchmarks.{benchmark}.cohorts.{cohort}", str(exc))


def _check_policies(config: dict, fail) -> None:
    for track in TRACK_NAMES:
        section = config["grid"][track]  # the schema fills in every section
        specs = [
            (f"grid.{track}.{key}[{i}]", spec)
            for key in ("policies", "invariant")
            for i, spec in enumerate(section[key] if key in section else [])
        ]
        specs += [
            (f"grid.{track}.tunable[{i}]", f"{primitive}/Th/{depth:g}")
            for i, primitive in enumerate(section["tunable"] if "tunable" in section else [])
            for depth in section["depths"]
        ]
        spelled: dict[str, tuple[str, str]] = {}  # one policy, however it is written -> where first
        for where, spec in specs:
            try:
                canonical = str(parse_spec(spec))
            except ValueError as exc:
                fail(where, f"{spec!r} is not a valid policy spec ({exc})")
            if canonical in spelled and not where.startswith(f"grid.{track}.tunable"):
                first_where, first = spelled[canonical]
                fail(
                    where,
                    f"{spec!r} is {first!r} ({first_where}) spelled another way: one policy, one cell; list it once",
                )
            spelled.setdefault(canonical, (where, spec))


def _check_thresholds(config: dict, fail) -> None:
    models, benchmarks = config["models"], config["benchmarks"]
    cells = expand_grid(config)
    calibrated = {(c.benchmark, c.model) for c in cells if c.track == "calibration"}
    for b, per_model in config["thresholds"].items():
        if b not in benchmarks:
            fail(f"thresholds.{b}", f"{b!r} is not a benchmark of this config; allowed: {', '.join(benchmarks)}")
        for m, source_of in per_model.items():
            if m not in models:
                fail(f"thresholds.{b}.{m}", f"{m!r} is not a model of this config; allowed: {', '.join(models)}")
            if source_of["source"] == "calibrate" and (b, m) not in calibrated:
                fail(
                    f"thresholds.{b}.{m}",
                    f"source 'calibrate' needs {m!r} and {b!r} in grid.calibration (its FC runs give the thresholds)",
                )
    for cell in cells:
        if cell.setting is None:
            continue
        per_model = config["thresholds"][cell.benchmark] if cell.benchmark in config["thresholds"] else {}
        source_of = per_model[cell.model] if cell.model in per_model else None
        where = f"thresholds.{cell.benchmark}.{cell.model}"
        if source_of is None:
            fail(
                where,
                f"missing, but cell {cell.slug} needs a {cell.setting!r} threshold; "
                "allowed: {source: calibrate} or {source: preset, tight: N, primary: N, loose: N}",
            )
        if source_of["source"] == "preset" and cell.setting not in source_of:
            fail(where, f"preset has no {cell.setting!r} threshold, but cell {cell.slug} needs it")
    for b, per_model in config["thresholds"].items():
        for m, source_of in per_model.items():
            problem = order_problem(source_of) if source_of["source"] == PRESET else None
            if problem:
                fail(f"thresholds.{b}.{m}", problem)


# ---------------------------------------------------------------- scopes: which cells a table needs

# A figure is drawn from the runs of the tracks it compares; FC (calibration) and the full
# comparison are every comparison's reference. "all" is results/tables/ itself.
SCOPES: dict[str, tuple[str, ...]] = {
    "full": ("calibration", "full"),
    "sweep": ("calibration", "full", "sweep"),
    "summarizer": ("calibration", "full", "summarizer"),
    "all": ("calibration", "full", "sweep", "summarizer"),
}


def cells_in_scope(cells: list[Cell], scope: str) -> list[Cell]:
    return [c for c in cells if c.track in SCOPES[scope]]


def calibration_cell(cells: list[Cell], benchmark: str, model: str) -> Cell | None:
    return next((c for c in cells if c.track == "calibration" and c.benchmark == benchmark and c.model == model), None)
