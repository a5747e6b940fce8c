# Where every file of the DAG lives, and the wildcard lookups behind them: the cells, the
# thresholds, the replays, the figure and table targets (with what the report says of them) and
# the trajectory pages, under the study's results_dir and figures_dir (common.smk loads it).

import json
import os
import re
import shlex
from pathlib import Path

from snakemake.exceptions import WorkflowError

from ctxpolicy.figures.catalog import IMPORTED_REPLAY_RUNS, report_captions
from ctxpolicy.study import Pair

RESULTS = STUDY.results_dir
FIGURES = STUDY.figures_dir
RUNS = f"{RESULTS}/runs"
TABLES = f"{RESULTS}/tables"
REPLAY = f"{RESULTS}/replay"


# ---------------------------------------------------------------- cells


def cell_dir(cell) -> str:
    return str(cell.run_root(RESULTS))


def cell_json(cell) -> str:
    return f"{cell_dir(cell)}/cell.json"


def eval_json(cell) -> str:
    return f"{cell_dir(cell)}/eval.json"


def cell_of(wildcards):
    key = (wildcards.benchmark, wildcards.model, wildcards.slug)
    if key not in CELL_BY_KEY:
        raise WorkflowError(
            f"{RUNS}/{'/'.join(key)} is not a cell of {CONFIG_FILE} "
            "(`ctxpolicy grid --config FILE --json` lists the cells)"
        )
    return CELL_BY_KEY[key]


def cell_thresholds(wildcards) -> list:
    """The thresholds file a threshold-triggered cell's run-cell reads (none for the others)."""
    cell = cell_of(wildcards)
    return [str(STUDY.thresholds_file(Pair(cell.model, cell.benchmark)))] if cell.setting else []


def evals_in_scope(wildcards) -> list:
    return [eval_json(c) for c in STUDY.cells_in_scope(wildcards.scope)]


def harness_option(wildcards, output) -> str:
    """A Harbor cell (terminalbench with `harness: harbor`): `--harness-argv 'harbor run ...'`, the
    config-fixed part of its Harbor command, so that a dry run (`snakemake -n -p`) prints it;
    run-cell adds the tasks and the agent kwargs. Empty for every other cell."""
    from ctxpolicy.benchmarks import harbor

    bench = STUDY.benchmark(wildcards.benchmark)
    if not harbor.uses_harbor(bench):
        return ""
    served = STUDY.model(wildcards.model)["served_name"]
    prefix = harbor.cell_prefix(bench, served, STUDY.attempts, parent_dir(output[0]), repo_root=REPO)
    return f"--harness-argv {shlex.quote(shlex.join(prefix))}"


def parent_dir(path) -> str:
    return os.path.dirname(str(path))


def parent_dirs(paths) -> list:
    return [parent_dir(p) for p in paths]


# ---------------------------------------------------------------- thresholds


def pair_of(wildcards) -> Pair:
    return Pair(wildcards.model, wildcards.benchmark)


def threshold_source(wildcards) -> dict:
    source = STUDY.threshold_source(pair_of(wildcards))
    if source is None:
        raise WorkflowError(f"{CONFIG_FILE}: thresholds.{wildcards.benchmark}.{wildcards.model}: not in the config")
    return source


def calibration_input(wildcards) -> list:
    """The FC calibration cell's cell.json for source `calibrate`; nothing for a preset."""
    if threshold_source(wildcards)["source"] != "calibrate":
        return []
    return [cell_json(STUDY.calibration_cell(pair_of(wildcards)))]


# ---------------------------------------------------------------- replay


def replay_fc_cell(wildcards) -> str:
    fc = STUDY.replay_plan(pair_of(wildcards))["fc"]
    if fc is None:
        raise WorkflowError(
            f"{REPLAY}/{wildcards.benchmark}/{wildcards.model}: the full comparison has no FC cell "
            "for this benchmark and model"
        )
    return cell_json(fc)


def replay_untriggered(wildcards) -> list:
    """FC and the full comparison's policies without a threshold (replayed without one)."""
    return STUDY.replay_plan(pair_of(wildcards))["untriggered"]


def replay_triggered(wildcards) -> list:
    """The full comparison's policies at its threshold setting."""
    return STUDY.replay_plan(pair_of(wildcards))["triggered"]


def replay_setting(wildcards) -> str:
    return STUDY.replay_plan(pair_of(wildcards))["setting"]


def replay_thresholds(wildcards) -> list:
    return [str(STUDY.thresholds_file(pair_of(wildcards)))] if replay_triggered(wildcards) else []


def replay_dirs() -> list:
    return [f"{REPLAY}/{pair.benchmark}/{pair.model}" for pair in STUDY.replay_pairs()]


# ---------------------------------------------------------------- figures and tables
# One rule per target of ctxpolicy.figures.catalog.targets_for (workflow/figures.yaml), appendix
# variants included; paths come resolved for this config's results_dir and figures_dir.

REPORT_CATEGORY = {".png": "Figures", ".csv": "Tables"}
REPORT_CAPTION = "../report/target.rst"  # relative to this directory


def rule_suffix(name: str) -> str:
    return re.sub(r"\W", "_", name)


def figure_inputs(spec: dict) -> list:
    """The target's data files; config-named files (cohorts) are relative to the repository. An
    imported figure's inputs end with the corpus's trajectory files (its provenance names them)."""
    files = [p if p.startswith(f"{RESULTS}/") else repo_file(p) for p in spec["inputs"]]
    if any(p.endswith(IMPORTED_REPLAY_RUNS) for p in spec["inputs"]):
        files += IMPORTED_SOURCES
    return files


# What the report says about each target's files, read by its caption template through the
# `config` Snakemake hands to templates (a key that no job reads) - label, what it shows, pairs, notes,
# tables (ctxpolicy.figures.catalog.report_caption). `section`, the subcategory, keeps the report's
# entries in catalog (study) order rather than in file-name order (fig10 before fig2), numbered
# within each kind (figures and tables are separate categories of the report).
REPORT_CAPTIONS = {f"figure_{rule_suffix(name)}": caption for name, caption in report_captions(FIGURE_TARGETS).items()}
config["report_captions"] = REPORT_CAPTIONS
config["study"] = STUDY.name  # workflow/report/workflow.rst names the study


def figure_files(target: str, spec: dict) -> list:
    """The target's outputs; PNGs and CSV tables go into the HTML report (not .data.csv)."""
    section = REPORT_CAPTIONS[f"figure_{rule_suffix(target)}"]["section"]
    files = []
    for path in spec["outputs"]:
        category = REPORT_CATEGORY.get(Path(path).suffix)
        if category and not path.endswith(".data.csv"):
            path = report(path, category=category, subcategory=section, caption=REPORT_CAPTION)
        files.append(path)
    return files


def figure_sidecars(spec: dict) -> list:
    return [f"{p}.prov.json" for p in spec["outputs"]]


def notebook_params(spec: dict) -> str:
    """The target's own papermill parameters (name, pairs, ...) as papermill's -y YAML."""
    return json.dumps(spec["params"], sort_keys=True)


FIGURE_OUTPUTS = [p for spec in FIGURE_TARGETS.values() for p in spec["outputs"]]


# ---------------------------------------------------------------- trajectory pages


def view_dir(cell) -> str:
    """Where the pages of the cell's benchmark and model go: each cell's in {slug}/ below it."""
    return f"{RESULTS}/view/{cell.benchmark}/{cell.model}"


def view_index(cell) -> str:
    return f"{view_dir(cell)}/{cell.slug}/index.html"


def view_runs(cell) -> str:
    return f"{view_dir(cell)}/{cell.slug}/runs"


def view_groups() -> dict:
    """The cells whose pages one job writes, by BENCHMARK_MODEL_TRACK: each group's cells share a
    view_dir, and their slugs (the folder names `ctxpolicy view --out-dir` writes under) differ."""
    groups = {}
    for cell in CELLS:
        groups.setdefault(f"{cell.benchmark}_{cell.model}_{cell.track}", []).append(cell)
    return groups


VIEW_OUTPUTS = [view_index(c) for c in CELLS] if STUDY.view_in_all else []
