"""The study, typed and loaded once: ``load_study(path) -> Study``.

A ``Study`` is built from the validated, default-filled config (``ctxpolicy.study.config``; the
schema's defaults are the only ones) and its expanded grid (``ctxpolicy.study.grid``). It is the one
place that reads the config mapping: every other reader (the workflow's ``common.smk``,
``ctxpolicy run-cell``, ``ctxpolicy calibrate``, ``ctxpolicy compare --config``,
``figures.catalog`` and every notebook) asks it, and none supplies a default of its own.

It owns:

- the cells by id (``cell_by_id``) and by track (``cells_of``), and the one cell behind each
  (benchmark, model, policy, setting, summarizer) of a track's design (``design`` /
  ``cell_for``), including the cells the grid shares between tracks: the full comparison's
  cells at the sweep's settings and depths stand in the sweeps, the calibration FC is every
  track's reference;
- each cell's tasks (``tasks``: its cohort cut to ``cohort_limit``), the planned attempts;
- the thresholds file of each pair (``thresholds_file``) and where its thresholds come from;
- the pairs of each track in one order (``pairs``, model-major in config order), all as
  ``Pair(model, benchmark)``;
- the figure targets' pairs (``figure_pairs``: the config's ``figures:`` block), the replay
  plan of the study's own FC runs (``replay_pairs``, ``replay_plan``), and the grid's
  configurations, every distinct (policy, threshold setting) it asks for (``configurations``),
  with the replay plan of an imported corpus over all of them (``imported_replay_plan``).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ctxpolicy.study.config import TRACKS, load_config
from ctxpolicy.study.grid import (
    SCOPES,
    TRACK_NAMES,
    Cell,
    check_study,
    expand_grid,
    find_cell,
)
from ctxpolicy.study.grid import grid_entries
from ctxpolicy.study.grid import cohort_path as _cohort_path
from ctxpolicy.study.grid import cohort_tasks as _cohort_tasks
from ctxpolicy.study.grid import resolve_threshold as _resolve_threshold
from ctxpolicy.study.grid import thresholds_path as _thresholds_path
from ctxpolicy.policies.spec import PolicySpec, parse_spec
from ctxpolicy.threshold_settings import SETTINGS

# a cell's fields as ``ctxpolicy grid --json`` lists them
CELL_RECORD_FIELDS = ("track", "benchmark", "model", "policy", "setting", "cohort", "summarizer")

# grid section (config key) <-> track (what a cell and a run record)
SECTION_OF = {track: section for section, track in TRACK_NAMES.items()}
FC = "FC"


IMPORTED_TRACK = "imported"  # the pairs of a config's imported corpus (figures' pairs.from)


class Pair(NamedTuple):
    """One model on one benchmark: the unit every figure and table is drawn per."""

    model: str
    benchmark: str

    def __str__(self) -> str:
        return f"{self.model}/{self.benchmark}"

    @classmethod
    def parse(cls, text: str) -> Pair:
        model, sep, benchmark = str(text).strip().partition("/")
        if not sep or not model or not benchmark or "/" in benchmark:
            raise ValueError(f"{text!r} is not MODEL/BENCHMARK")
        return cls(model, benchmark)


class Configuration(NamedTuple):
    """One (policy, threshold setting) of the grid, whatever its models, benchmarks and cohort:
    what a replay of a recorded FC run is made with. ``setting`` is None for a policy without a
    threshold; ``section`` is the grid section that first asks for it (grid order)."""

    policy: str
    setting: str | None
    section: str


UNTRIGGERED = "untriggered"  # the replay group of the policies without a threshold (FC first)


class Design(NamedTuple):
    """One cell of a track's design: what the track asks for, and the cell that runs it."""

    track: str
    benchmark: str
    model: str
    policy: str
    setting: str | None
    summarizer: str | None
    cohort: str
    cell: Cell  # the grid's cell (possibly claimed by an earlier track, e.g. the full comparison)


def _section_name(track: str) -> str:
    """A grid section's config key from either its key or its track name."""
    if track in TRACKS:
        return track
    if track in SECTION_OF:
        return SECTION_OF[track]
    raise KeyError(f"{track!r} is not a grid track; allowed: {', '.join(TRACKS)} or {', '.join(SECTION_OF)}")


@dataclass(frozen=True, eq=False)
class Study:
    config: Mapping[str, Any] = field(repr=False)  # validated and default-filled; read here only
    source: str = "<config>"

    # ------------------------------------------------------------ top-level settings

    @property
    def name(self) -> str:
        return str(self.config["study"])

    @property
    def is_synthetic(self) -> bool:
        """Synthetic data (a study named ``synthetic…``, or the test fixture ``fixture``)."""
        return self.name.startswith("synthetic") or self.name == "fixture"

    @property
    def results_dir(self) -> str:
        return str(self.config["results_dir"]).rstrip("/")

    @property
    def figures_dir(self) -> str:
        return str(self.config["figures_dir"]).rstrip("/")

    @property
    def attempts(self) -> int:
        """Planned attempts per task (the config's ``attempts``)."""
        return int(self.config["attempts"])

    @property
    def seed(self) -> int:
        return int(self.config["seed"])

    @property
    def cost_method(self) -> str:
        """The billed-cost method behind every cost ratio (``metrics.cost_method``)."""
        return str(self.config["metrics"]["cost_method"])

    @property
    def price(self) -> str | None:
        """The model whose litellm prices give dollars beside the fresh-token units (``metrics.price``)."""
        return self.config["metrics"]["price"]

    @property
    def calibration_excludes_time_limited(self) -> bool:
        """``grid.calibration.exclude_time_limited``: calibrate from the FC runs within the time
        limit only (the local study's rule); off, every FC trajectory's peak counts (A.4)."""
        return bool(self.section("calibration")["exclude_time_limited"])

    @property
    def slurm(self) -> Mapping[str, Any]:
        return self.config["slurm"]

    @property
    def models(self) -> list[str]:
        return list(self.config["models"])

    @property
    def has_study(self) -> bool:
        """Whether the config has a study of its own (an imported-only config has none)."""
        return bool(self.config["models"])

    @property
    def view_in_all(self) -> bool:
        """``view.in_all``: the trajectory pages of every cell are part of ``all``."""
        return bool(self.config["view"]["in_all"])

    @property
    def imported(self) -> Mapping[str, Any] | None:
        """The config's imported corpus (``imported:``: path, format, benchmark, model, verdicts,
        round), or None."""
        return self.config.get("imported")

    @property
    def benchmarks(self) -> list[str]:
        return list(self.config["benchmarks"])

    def model(self, name: str) -> Mapping[str, Any]:
        """A model's config block (schema defaults filled)."""
        return self.config["models"][name]

    def benchmark(self, name: str) -> Mapping[str, Any]:
        """A benchmark's config block (schema defaults filled)."""
        return self.config["benchmarks"][name]

    def concurrency(self, benchmark: str) -> int:
        return int(self.benchmark(benchmark)["concurrency"])

    # ------------------------------------------------------------ the grid

    def section(self, track: str) -> Mapping[str, Any]:
        """A grid section (``full_comparison`` or ``full``, ...), schema defaults filled."""
        return self.config["grid"][_section_name(track)]

    @functools.cached_property
    def cells(self) -> tuple[Cell, ...]:
        """Every cell, in track order, each id once."""
        return tuple(expand_grid(dict(self.config)))

    @functools.cached_property
    def _by_id(self) -> dict[str, Cell]:
        return {c.id: c for c in self.cells}

    def cell_by_id(self, cell_id: str) -> Cell:
        """The cell ``BENCHMARK/MODEL/SLUG``; a ConfigError naming the closest ids otherwise."""
        return find_cell(list(self.cells), cell_id, source=self.source)

    def has_cell(self, cell_id: str) -> bool:
        return cell_id in self._by_id

    def cells_of(self, track: str) -> list[Cell]:
        """The cells a track runs itself (not those an earlier track claimed)."""
        name = TRACK_NAMES[_section_name(track)]
        return [c for c in self.cells if c.track == name]

    def cells_in_scope(self, scope: str) -> list[Cell]:
        return [c for c in self.cells if c.track in SCOPES[scope]]

    @functools.cached_property
    def designs(self) -> tuple[Design, ...]:
        """Every track's design, each entry with the one cell that runs it (shared cells included:
        a sweep entry the full comparison runs points at the full comparison's cell)."""
        out: list[Design] = []
        grid = self.config["grid"]

        def add(section: str, spec: PolicySpec, setting: str | None, summarizer: str | None = None) -> None:
            block = grid[section]
            for benchmark in block["benchmarks"]:
                for model in block["models"]:
                    own = None if summarizer == model else summarizer
                    wanted = setting if spec.needs_threshold else None
                    probe = Cell(TRACK_NAMES[section], benchmark, model, spec, wanted, block["cohort"], own)
                    cell = self._by_id[probe.id]
                    out.append(Design(probe.track, benchmark, model, probe.policy, wanted, own, block["cohort"], cell))

        for entry in grid_entries(grid):
            add(*entry)
        summ = grid["summarizer"]
        for spec in map(parse_spec, summ["policies"]):
            # the agent summarizing itself, every other summarizer's reference: the cell another
            # track runs (the sweep's), where the grid has one
            for benchmark in summ["benchmarks"]:
                for model in summ["models"]:
                    if model in summ["summarizers"]:
                        continue  # already added: the agent named as its own summarizer
                    wanted = summ["setting"] if spec.needs_threshold else None
                    probe = Cell("summarizer", benchmark, model, spec, wanted, summ["cohort"], None)
                    if probe.id in self._by_id:
                        cell = self._by_id[probe.id]
                        out.append(
                            Design("summarizer", benchmark, model, probe.policy, wanted, None, summ["cohort"], cell)
                        )
        return tuple(out)

    def design(self, track: str, pair: Pair | None = None) -> list[Design]:
        """A track's design entries (all pairs, or one), in grid order."""
        name = TRACK_NAMES[_section_name(track)]
        return [
            d
            for d in self.designs
            if d.track == name and (pair is None or (d.model, d.benchmark) == (pair.model, pair.benchmark))
        ]

    def design_cells(self, track: str, pair: Pair, *, reference: bool = True) -> list[Cell]:
        """The cells behind a track's numbers for one pair: its design's cells (shared ones
        included), each once, with the pair's FC reference first where ``reference``."""
        cells: list[Cell] = []
        ref = self.reference_cell(pair) if reference else None
        for cell in [ref, *(d.cell for d in self.design(track, pair))]:
            if cell is not None and cell not in cells:
                cells.append(cell)
        return cells

    def cell_for(
        self,
        benchmark: str,
        model: str,
        policy: str | PolicySpec,
        setting: str | None = None,
        summarizer: str | None = None,
    ) -> Cell | None:
        """The one cell behind (benchmark, model, policy, setting, summarizer), whichever track
        runs it; None when the grid has none. ``setting`` is ignored for a policy without one."""
        spec = policy if isinstance(policy, PolicySpec) else parse_spec(policy)
        probe = Cell("full", benchmark, model, spec, setting if spec.needs_threshold else None, "main", summarizer)
        return self._by_id.get(probe.id)

    def reference_cell(self, pair: Pair) -> Cell | None:
        """The FC cell every comparison of the pair is made against (the calibration FC, which
        the full comparison shares)."""
        return self.cell_for(pair.benchmark, pair.model, FC)

    def calibration_cell(self, pair: Pair) -> Cell | None:
        return next((c for c in self.cells_of("calibration") if (c.model, c.benchmark) == tuple(pair)), None)

    def pairs(self, track: str) -> list[Pair]:
        """A track's (model, benchmark) pairs, model-major in config order; for ``imported``, the
        imported corpus's one pair (none without one)."""
        if track == IMPORTED_TRACK:
            return [Pair(self.imported["model"], self.imported["benchmark"])] if self.imported else []
        block = self.config["grid"].get(_section_name(track)) or {}
        return [Pair(m, b) for m in block.get("models") or [] for b in block.get("benchmarks") or []]

    # ------------------------------------------------------------ tasks and attempts

    def cohort_path(self, benchmark: str, cohort: str) -> Path:
        return _cohort_path(dict(self.config), benchmark, cohort)

    def cohort_tasks(self, benchmark: str, cohort: str) -> list[str]:
        """A cohort's task ids, cut to the benchmark's ``cohort_limit``."""
        return _cohort_tasks(dict(self.config), benchmark, cohort)

    def has_cohort(self, benchmark: str, cohort: str | None) -> bool:
        return (
            bool(cohort) and benchmark in self.config["benchmarks"] and cohort in self.benchmark(benchmark)["cohorts"]
        )

    def cohort_files(self) -> list[str]:
        """The cohort files named in the config, in config order, each once."""
        files: list[str] = []
        for bench in self.config["benchmarks"].values():
            for path in bench["cohorts"].values():
                if str(path) not in files:
                    files.append(str(path))
        return files

    def cohort_limit(self, benchmark: str, cohort: str) -> int | None:
        limits = self.benchmark(benchmark)["cohort_limit"]
        return int(limits[cohort]) if cohort in limits else None

    def tasks(self, cell: Cell) -> list[str]:
        """The task ids a cell runs: its cohort, cut to ``cohort_limit``."""
        return self.cohort_tasks(cell.benchmark, cell.cohort)

    def planned_runs(self, cell: Cell) -> int:
        return len(self.tasks(cell)) * self.attempts

    def summary(self) -> list[dict]:
        """Cells and planned runs per benchmark, model and track, in grid order."""
        counts: Counter = Counter()
        runs: Counter = Counter()
        for cell in self.cells:
            key = (cell.benchmark, cell.model, cell.track)
            counts[key] += 1
            runs[key] += self.planned_runs(cell)
        return [
            {"benchmark": b, "model": m, "track": t, "cells": counts[(b, m, t)], "runs": runs[(b, m, t)]}
            for (b, m, t) in counts
        ]

    def cell_record(self, cell: Cell) -> dict:
        """A cell as ``ctxpolicy grid --json`` lists it: its fields (the policy as its text), id,
        slug, run directory root and planned runs."""
        return {
            **{name: getattr(cell, name) for name in CELL_RECORD_FIELDS},
            "id": cell.id,
            "slug": cell.slug,
            "run_root": str(cell.run_root(self.config["results_dir"])),
            "runs": self.planned_runs(cell),
        }

    # ------------------------------------------------------------ thresholds

    def threshold_source(self, pair: Pair) -> Mapping[str, Any] | None:
        """``thresholds.{benchmark}.{model}``, or None where the config has none."""
        per_model = self.config["thresholds"][pair.benchmark] if pair.benchmark in self.config["thresholds"] else {}
        return per_model[pair.model] if pair.model in per_model else None

    def threshold_pairs(self) -> list[Pair]:
        """Every pair with a ``thresholds`` entry, in config order."""
        return [Pair(m, b) for b, per_model in self.config["thresholds"].items() for m in per_model]

    def thresholds_file(self, pair: Pair) -> Path:
        """``{results_dir}/thresholds/{benchmark}/{model}.json``."""
        return _thresholds_path(dict(self.config), pair.benchmark, pair.model)

    def threshold_rounding(self, pair: Pair, default: int) -> int:
        """The calibration's rounding unit (``round``), else ``default`` (the calibrate command's)."""
        source = self.threshold_source(pair) or {}
        return int(source["round"]) if "round" in source else default

    def resolve_threshold(self, cell: Cell, thresholds_file: str | Path | None = None) -> int | None:
        """Tokens of the cell's threshold setting from its thresholds file (None without one)."""
        return _resolve_threshold(dict(self.config), cell, thresholds_file)

    # ------------------------------------------------------------ figures and replay

    def figure6_run(self) -> tuple[str, int] | None:
        """The config's ``figure6``: the (task id, attempt) Figure 6 draws, or None (its fallback)."""
        chosen = self.config["figure6"]
        if not chosen:
            return None
        return str(chosen["task_id"]), int(chosen.get("attempt") or 1)

    def figure_pairs(self) -> dict[str, list[Pair]]:
        """The config's ``figures:`` block as stem -> pairs (unchecked against the catalog:
        ``figures.catalog`` does that)."""
        out: dict[str, list[Pair]] = {}
        for stem, items in self.config["figures"].items():
            out[stem] = [Pair(*str(item).partition("/")[::2]) for item in items]
        return out

    def configurations(self, section: str | None = None) -> list[Configuration]:
        """Every distinct (policy, threshold setting) of the grid, FC first, then in grid order
        (``grid.grid_entries``: calibration, full comparison, sweeps, summarizer comparison), or
        of one section (its config key or track name). A policy without a threshold is one
        configuration whatever the settings that list it; the summarizer comparison's entries
        are their (policy, setting) alone (replays without a summarizer use placeholder
        summaries, so two summarizers of one entry are one configuration)."""
        wanted = None if section is None else _section_name(section)
        seen: dict[tuple[str, str | None], Configuration] = {}
        if wanted in (None, "calibration"):
            seen[(FC, None)] = Configuration(FC, None, "calibration")
        for name, spec, setting, _summarizer in grid_entries(self.config["grid"]):
            if wanted is not None and name != wanted:
                continue
            key = (str(spec), setting if spec.needs_threshold else None)
            seen.setdefault(key, Configuration(key[0], key[1], name))
        return list(seen.values())

    def imported_replay_plan(self) -> dict[str, list[str]]:
        """The replays of an imported corpus, every configuration of the grid: group -> policies,
        ``UNTRIGGERED`` first (FC and the policies without a threshold), then one group per
        threshold setting in ``SETTINGS`` order (each replayed at that setting's threshold). A
        replay's cell slug names its setting, so one policy at two settings never collides."""
        plan: dict[str, list[str]] = {UNTRIGGERED: []}
        by_setting: dict[str, list[str]] = {}
        for config in self.configurations():
            if config.setting is None:
                plan[UNTRIGGERED].append(config.policy)
            else:
                by_setting.setdefault(config.setting, []).append(config.policy)
        plan.update((s, by_setting[s]) for s in SETTINGS if s in by_setting)
        return plan

    def replay_pairs(self) -> list[Pair]:
        """The pairs whose full comparison has compressed policies to replay, sorted."""
        pairs = {Pair(c.model, c.benchmark) for c in self.cells_of("full") if c.policy != FC}
        return sorted(pairs, key=lambda p: (p.benchmark, p.model))

    def replay_plan(self, pair: Pair) -> dict[str, Any]:
        """What ``ctxpolicy replay`` replays for a pair: the FC cell it reads, the policies
        without a threshold (FC first), those at the full comparison's setting, and the setting."""
        full = [
            c for c in self.cells_in_scope("full") if (c.model, c.benchmark) == tuple(pair) and c.summarizer is None
        ]
        fc = next((c for c in full if c.policy == FC), None)
        compared = [c for c in full if c.track == "full" and c.policy != FC]
        triggered = [c.policy for c in compared if c.setting]
        return {
            "fc": fc,
            "untriggered": [FC, *(c.policy for c in compared if not c.setting)],
            "triggered": triggered,
            "setting": next((c.setting for c in compared if c.setting), ""),
        }


def load_study(path: str | Path) -> Study:
    """Read, validate and check the config at ``path`` against its grid: the study, typed."""
    return Study(check_study(load_config(path), source=str(path)), str(path))
