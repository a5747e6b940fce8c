"""Which notebook and module make which figure or table, from which inputs, showing which pairs.

The catalog is the repository file ``workflow/figures.yaml`` (its header documents each field),
the figures' registry: one row per target, naming its notebook and the module that computes and
draws it (``module``; ``module_list`` writes docs/figures.md's list of them). The environment
variable ``CTXPOLICY_FIGURE_CATALOG`` names another catalog file (a test's throwaway figure).
This module reads it and resolves it for a config. ``TARGETS`` maps a target name (``fig2``,
``fig9``, ``table3``, …) to its layout for ``results_dir: results`` and ``figures_dir: figures``::

    {"notebook": "notebooks/fig2.ipynb",             # the source notebook (repository-relative)
     "module": "ctxpolicy.figures.tradeoffs",        # the module that computes and draws it
     "executed": "results/notebooks/fig2.ipynb",     # where the DAG keeps the executed copy
     "outputs": ["figures/fig2.pdf", "figures/fig2.png",
                 "figures/fig2.data.csv", "figures/fig2.notes.json"],
     "inputs": ["results/tables/full/runs.parquet"], # data files (the config file is not listed)
     "tables_dir": "results/tables/full",            # the tables of its scope
     "params": {},                                   # the catalog's further papermill parameters
     "scope": "full",                                # ctxpolicy.study.grid.SCOPES
     "number": 2,                                    # the study's figure/table number, or None
     "pairs": {"from": "full_comparison", "default": "first-model"}}   # None for tables

``targets_for(study)`` resolves it for one study (a ``ctxpolicy.study.Study``): paths under its ``results_dir``
and ``figures_dir``, the config's cohort and thresholds files, and for every figure the
MODEL/BENCHMARK pairs it shows (the config's ``figures:`` block, else the catalog's default)
as ``params["pairs"]``, plus one appendix *variant* target ``{stem}-{model}-{benchmark}`` per
pair that its track computes and no figure of its family shows (``variant_of`` names the main
target). A family is the figures drawn by one notebook with the same catalog params (Figures
9–15 are one family: a pair one of them shows is no variant of another).

The pairs parameter is a string: ``"qwen/swebench,qwen/terminalbench"``; ``""`` = every pair;
``"none"`` = no pair (the figure is a one-line note). Every figure also gets ``name``, the stem
its files are written under. The workflow runs::

    papermill NOTEBOOK EXECUTED -p tables_dir TABLES_DIR -p config_path CONFIG -p out_dir FIGURES_DIR \\
        -y '{"name": STEM, "pairs": PAIRS, ...params}'

Targets whose pairs come ``from: imported`` are drawn from the config's ``imported`` corpus
(its replay table, ``{results_dir}/tables/imported/replay/``) and exist only when the config has
one; the study's own targets exist only when it has models (an imported-only config has none).

``papermill_args(name, ...)`` builds that argument list for a main target without a config
(``papermill_parameters``: its parameters alone).
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ctxpolicy.study.config import ConfigError
from ctxpolicy.study.grid import SCOPES
from ctxpolicy.paths import REPO_ROOT
from ctxpolicy.study import IMPORTED_TRACK, Pair, Study  # IMPORTED_TRACK: pairs.from of an imported corpus

CATALOG_FILE = REPO_ROOT / "workflow" / "figures.yaml"
CATALOG_ENV = "CTXPOLICY_FIGURE_CATALOG"  # another catalog file, e.g. a test's throwaway figure

# a figure's picture, the numbers it draws and its missing-data notes (a JSON list of strings)
FIGURE_SUFFIXES = (".pdf", ".png", ".data.csv", ".notes.json")
TABLE_SUFFIXES = (".csv", ".md", ".tex")

SCOPED_TABLES = {"runs": "runs.parquet", "calls": "calls.parquet", "events": "events.parquet"}
REPLAY_RUNS = "replay/runs.parquet"  # replay-track runs (workflow/rules/replay.smk), any scope
IMPORTED_TABLES = "imported"  # an imported corpus's tables (workflow/rules/imported.smk)
IMPORTED_REPLAY_RUNS = f"{IMPORTED_TABLES}/{REPLAY_RUNS}"  # its replays
DATA = (*SCOPED_TABLES, "replay_runs", "imported_replay_runs", "cohorts", "thresholds")
PAIR_TRACKS = ("full_comparison", "sweeps", "summarizer", IMPORTED_TRACK)
DEFAULTS = ("all", "first", "first-model", "first-benchmark")
ALL_PAIRS, NO_PAIR = "", "none"
FIELDS = {"number", "shows", "notebook", "module", "data", "scope", "pairs", "params", "tables"}
MODULE_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
DOCS_LIST = ("<!-- figure registry: begin -->", "<!-- figure registry: end -->")  # docs/figures.md


def catalog_file() -> Path:
    """The catalog in use: ``$CTXPOLICY_FIGURE_CATALOG`` where set, else workflow/figures.yaml."""
    return Path(os.environ.get(CATALOG_ENV) or CATALOG_FILE)


# ---------------------------------------------------------------- the catalog file


def _check_entry(name: str, entry: Any, source: Path = CATALOG_FILE) -> None:
    def fail(message: str):
        raise ConfigError(f"{source}: {name}: {message}")

    if not isinstance(entry, dict):
        fail(f"{entry!r} is not a mapping")
    if unknown := sorted(set(entry) - FIELDS):
        fail(f"unknown field {unknown[0]!r}; allowed: {', '.join(sorted(FIELDS))}")
    if not entry.get("notebook"):
        fail("no notebook")
    module = entry.get("module")
    if not isinstance(module, str) or not MODULE_NAME.fullmatch(module):
        fail(f"module {module!r}: name the module that draws it (ctxpolicy.figures.NAME)")
    if importlib.util.find_spec(module) is None:
        fail(f"module {module!r} not found")
    if not isinstance(entry.get("shows"), str) or not entry["shows"].strip():
        fail(f"shows is {entry.get('shows')!r}: say in one line what it shows (its report caption)")
    if entry.get("scope") not in SCOPES:
        fail(f"scope {entry.get('scope')!r} unknown; allowed: {', '.join(SCOPES)}")
    if bad := [d for d in entry.get("data") or [] if d not in DATA]:
        fail(f"data {bad[0]!r} unknown; allowed: {', '.join(DATA)}")
    if ("pairs" in entry) == ("tables" in entry):
        fail("a target is a figure (pairs) or a table (tables), not both or neither")
    pairs = entry.get("pairs")
    if pairs is not None:
        if not isinstance(pairs, dict) or pairs.get("from") not in PAIR_TRACKS:
            fail(f"pairs.from must be one of {', '.join(PAIR_TRACKS)}, got {pairs!r}")
        default = pairs.get("default")
        nth = default.get("nth") if isinstance(default, dict) else None
        if default not in DEFAULTS and not (isinstance(nth, int) and nth >= 0):
            fail(f"pairs.default {default!r} unknown; allowed: {', '.join(DEFAULTS)} or {{nth: N}}")


def _catalog() -> dict[str, dict]:
    return _read_catalog(catalog_file())


@functools.lru_cache(maxsize=4)
def _read_catalog(path: Path) -> dict[str, dict]:
    try:
        entries = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the figure catalog ({exc.strerror or exc})") from None
    for name, entry in entries.items():
        _check_entry(name, entry, path)
    return entries


def is_imported(entry: Mapping[str, Any]) -> bool:
    """A target drawn from the config's imported corpus (not from the study's own runs)."""
    return ((entry.get("pairs") or {}).get("from")) == IMPORTED_TRACK


def _layout(name: str, entry: dict, results_dir: str, figures_dir: str) -> dict:
    tables_dir = f"{results_dir}/tables" if entry["scope"] == "all" else f"{results_dir}/tables/{entry['scope']}"
    if is_imported(entry):
        tables_dir = f"{results_dir}/tables/{IMPORTED_TABLES}"
    inputs = [f"{tables_dir}/{SCOPED_TABLES[d]}" for d in entry["data"] if d in SCOPED_TABLES]
    if "replay_runs" in entry["data"]:
        inputs.append(f"{results_dir}/tables/{REPLAY_RUNS}")
    if "imported_replay_runs" in entry["data"]:
        inputs.append(f"{results_dir}/tables/{IMPORTED_REPLAY_RUNS}")
    if "tables" in entry:
        outputs = [f"{figures_dir}/{stem}{s}" for stem in entry["tables"] for s in TABLE_SUFFIXES]
    else:
        outputs = [f"{figures_dir}/{name}{s}" for s in FIGURE_SUFFIXES]
    return {
        "notebook": f"notebooks/{entry['notebook']}.ipynb",
        "module": entry["module"],
        "executed": f"{results_dir}/notebooks/{name}.ipynb",
        "outputs": outputs,
        "inputs": inputs,
        "tables_dir": tables_dir,
        "params": dict(entry.get("params") or {}),
        "scope": entry["scope"],
        "number": entry.get("number"),
        "shows": entry["shows"].strip(),
        "kind": "table" if "tables" in entry else "figure",
        "pairs": copy.deepcopy(entry.get("pairs")),
    }


TARGETS: dict[str, dict] = {name: _layout(name, entry, "results", "figures") for name, entry in _catalog().items()}


# ---------------------------------------------------------------- the config's pairs


def threshold_files(study: Study) -> list[str]:
    """``{results_dir}/thresholds/{benchmark}/{model}.json`` for every entry of ``thresholds``."""
    return [str(study.thresholds_file(pair)) for pair in study.threshold_pairs()]


def pair_name(pair: tuple[str, str]) -> str:
    return f"{pair[0]}/{pair[1]}"


def pairs_param(pairs: list[tuple[str, str]] | None) -> str:
    """The notebook's ``pairs`` parameter: None (every pair) -> "", [] -> "none"."""
    if pairs is None:
        return ALL_PAIRS
    return ",".join(map(pair_name, pairs)) or NO_PAIR


def figure_pairs_block(study: Study) -> dict[str, list[Pair]]:
    """The config's ``figures:`` block (``Study.figure_pairs``), checked against the catalog and
    the study's names."""
    source = study.source
    figures = [name for name, entry in _catalog().items() if entry.get("pairs")]
    checked = {}
    for stem, pairs in study.figure_pairs().items():
        if stem not in figures:
            raise ConfigError(
                f"{source}: figures.{stem}: {stem!r} is not a figure that shows pairs; allowed: {', '.join(figures)}"
            )
        for i, pair in enumerate(pairs):
            if pair.model not in study.models:
                raise ConfigError(
                    f"{source}: figures.{stem}[{i}]: {str(pair)!r}: unknown model {pair.model!r}; "
                    f"allowed: {', '.join(study.models)}"
                )
            if pair.benchmark not in study.benchmarks:
                raise ConfigError(
                    f"{source}: figures.{stem}[{i}]: {str(pair)!r}: unknown benchmark {pair.benchmark!r}; "
                    f"allowed: {', '.join(study.benchmarks)}"
                )
        checked[stem] = pairs
    return checked


def default_pairs(spec: Mapping[str, Any], computed: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
    """The pairs a figure shows when the config does not say (None: every pair)."""
    default = spec["default"]
    if default == "all":
        return None
    if default == "first":
        return computed[:1]
    if default == "first-model":
        return [p for p in computed if computed and p[0] == computed[0][0]]
    if default == "first-benchmark":
        return [p for p in computed if computed and p[1] == computed[0][1]]
    nth = default["nth"]
    return computed[nth : nth + 1]


def _family(spec: Mapping[str, Any]) -> tuple:
    return spec["notebook"], tuple(sorted(spec["params"].items()))


def targets_for(study: Study) -> dict[str, dict]:
    """Every target for this study (``ctxpolicy.study.load_study``), appendix variants included
    (see the module docstring)."""
    results_dir, figures_dir = study.results_dir, study.figures_dir
    chosen = figure_pairs_block(study)
    resolved: dict[str, dict] = {}
    shown_by_family: dict[tuple, set | None] = {}
    first_of_family: dict[tuple, str] = {}
    has_study, has_imported = study.has_study, bool(study.imported)
    for name, entry in _catalog().items():
        if not (has_imported if is_imported(entry) else has_study):
            continue  # an imported corpus's figures need one; the study's need a study
        spec = _layout(name, entry, results_dir, figures_dir)
        spec["variant_of"] = None
        if "cohorts" in entry["data"]:
            spec["inputs"] += study.cohort_files()
        if "thresholds" in entry["data"]:
            spec["inputs"] += threshold_files(study)
        if spec["pairs"]:
            computed = study.pairs(spec["pairs"]["from"])
            shows = chosen[name] if name in chosen else default_pairs(spec["pairs"], computed)
            family = _family(spec)  # before name and pairs join the params
            spec["params"].update(name=name, pairs=pairs_param(shows))
            first_of_family.setdefault(family, name)
            seen = shown_by_family.get(family, set())
            shown_by_family[family] = None if shows is None or seen is None else seen | set(shows)
        resolved[name] = spec
    for family, shown in shown_by_family.items():
        main = first_of_family[family]
        if shown is None:
            continue
        for model, benchmark in study.pairs(resolved[main]["pairs"]["from"]):
            if (model, benchmark) not in shown:
                resolved[f"{main}-{model}-{benchmark}"] = _variant(
                    resolved[main], model, benchmark, results_dir, figures_dir
                )
    return resolved


def target_label(name: str, spec: Mapping[str, Any]) -> str:
    """``Figure 2``, ``Table 3``, ``Tables 1 and 4``, or the stem of a target without a number."""
    number = spec.get("number")
    if number is None:
        return name
    if spec["kind"] == "table":
        if name.startswith("table") and "_" in name:
            return "Tables " + " and ".join(name.removeprefix("table").split("_"))
        return f"Table {number}"
    return f"Figure {number}"


def report_caption(name: str, spec: Mapping[str, Any], order: int) -> dict:
    """What the report says about a target's files (workflow/report/target.rst): its label
    (``Figure 2``, ``Table 3``, or the stem), what it shows, the pairs it draws, its notes file and
    its CSV tables; ``section`` sorts the report's entries in catalog (study) order."""
    stem = spec["params"].get("name", name)
    label = target_label(name, spec)
    pairs = spec["params"].get("pairs")
    if spec.get("pairs") is None:
        shown = None
    elif pairs == "":
        shown = "every pair its track computes"
    elif pairs == "none":
        shown = "none (the figure is a note)"
    else:
        shown = ", ".join(pairs.split(","))
    if spec.get("variant_of"):
        label += f" (appendix: {shown})"
    notes = next((p for p in spec["outputs"] if p.endswith(".notes.json")), None)
    tables = [p for p in spec["outputs"] if p.endswith(".csv") and not p.endswith(".data.csv")]
    return {
        "label": label,
        "stem": stem,
        "shows": spec["shows"],
        "pairs": shown,
        "notes": notes,
        "tables": tables,
        "section": f"{order:02d} {label}",
    }


def report_captions(targets: Mapping[str, Mapping[str, Any]]) -> dict[str, dict]:
    """``report_caption`` of every target, numbered in catalog (study) order within its kind:
    figures 00, 01, ... and tables 00, 01, ... each without gaps, since the report shows each
    kind under its own category."""
    counts: dict[str, int] = {}
    captions = {}
    for name, spec in targets.items():
        order = counts.get(spec["kind"], 0)
        counts[spec["kind"]] = order + 1
        captions[name] = report_caption(name, spec, order)
    return captions


def _variant(main: dict, model: str, benchmark: str, results_dir: str, figures_dir: str) -> dict:
    stem = f"{main['params']['name']}-{model}-{benchmark}"
    spec = copy.deepcopy(main)
    spec.update(
        executed=f"{results_dir}/notebooks/{stem}.ipynb",
        outputs=[f"{figures_dir}/{stem}{s}" for s in FIGURE_SUFFIXES],
        variant_of=main["params"]["name"],
    )
    spec["params"].update(name=stem, pairs=pair_name((model, benchmark)))
    return spec


def papermill_parameters(
    name: str,
    *,
    config_path: str,
    tables_dir: str = "results/tables",
    out_dir: str = "figures",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The notebook parameters of one main target, every pair shown (what ``papermill_args`` passes)."""
    spec = TARGETS[name]
    return {
        "tables_dir": tables_dir,
        "config_path": config_path,
        "out_dir": out_dir,
        **spec["params"],
        **({"name": name} if spec["pairs"] else {}),
        **(extra or {}),
    }


def papermill_args(
    name: str,
    *,
    config_path: str,
    tables_dir: str = "results/tables",
    out_dir: str = "figures",
    executed: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> list[str]:
    """The papermill command line (without the program name) for one main target, every pair shown."""
    params = papermill_parameters(name, config_path=config_path, tables_dir=tables_dir, out_dir=out_dir, extra=extra)
    args = [TARGETS[name]["notebook"], executed or TARGETS[name]["executed"]]
    for key, value in params.items():
        args += ["-p", key, str(value)]
    return args


# ---------------------------------------------------------------- the registry in the docs


def module_list() -> str:
    """docs/figures.md's list of the catalog's targets: each one's label, the module that computes
    and draws it, and its notebook, in catalog order (a Markdown table)."""
    rows = ["| target | in the study | module | notebook |", "|---|---|---|---|"]
    for name, entry in _catalog().items():
        spec = _layout(name, entry, "results", "figures")
        label = target_label(name, spec)
        rows.append(f"| `{name}` | {label if label != name else 'ours'} | `{spec['module']}` | `{spec['notebook']}` |")
    return "\n".join(rows)


def with_module_list(docs: str) -> str:
    """``docs`` (docs/figures.md's text) with the list between its ``DOCS_LIST`` markers made anew."""
    begin, end = DOCS_LIST
    if begin not in docs or end not in docs:
        raise ValueError(f"the docs have no {begin} … {end} section for the figure registry")
    head, rest = docs.split(begin, 1)
    return f"{head}{begin}\n{module_list()}\n{end}{rest.split(end, 1)[1]}"


if __name__ == "__main__":  # python -m ctxpolicy.figures.catalog: docs/figures.md's list made anew
    from ctxpolicy.atomic import atomic_write_text

    docs_file = REPO_ROOT / "docs" / "figures.md"
    atomic_write_text(docs_file, with_module_list(docs_file.read_text()))
