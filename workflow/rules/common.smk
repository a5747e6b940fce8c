# Shared state of the DAG and every helper the rules use (the rule files hold rules only).
# The config is a single file (default config/config.yaml, or --configfile FILE); it is loaded
# once as the typed study (ctxpolicy.preflight.check_workflow: validated, its grid, figure targets
# and imported corpus checked, as `ctxpolicy grid` checks them) and passed
# by path to every ctxpolicy command. The rules ask STUDY; none reads the config mapping.

import json
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError
from snakemake.settings.types import ExecMode

from ctxpolicy.study.config import ConfigError
from ctxpolicy.figures.catalog import IMPORTED_REPLAY_RUNS, report_captions
from ctxpolicy.study.grid import SCOPES
from ctxpolicy.policies.spec import parse_spec
from ctxpolicy.serving import shared as shared_servers
from ctxpolicy.preflight import check_workflow
from ctxpolicy.study import UNTRIGGERED, Pair

REPO = Path(workflow.basedir)


def repo_file(path: str) -> str:
    """A file of this repository, as a path that works from the working directory (-d DIR too)."""
    if Path(path).is_absolute() or REPO.resolve() == Path.cwd().resolve():
        return str(path)
    return str(REPO / path)


def _config_file() -> str:
    if workflow.config_settings.config:
        raise WorkflowError(
            "--config KEY=VALUE is not supported: the study is one file; "
            "edit a copy of it and pass --configfile FILE"
        )
    given = [Path(p) for p in (workflow.overwrite_configfiles or [])]
    if len(given) > 1:
        raise WorkflowError(f"give one --configfile, not {len(given)}: {' '.join(map(str, given))}")
    if not given:
        return repo_file("config/config.yaml")
    path = given[0]
    return os.path.relpath(path) if path.is_absolute() and path.is_relative_to(Path.cwd()) else str(path)


CONFIG_FILE = _config_file()
try:  # the checks `ctxpolicy grid` runs too: the study, its figure targets, the corpus's files
    CHECKED = check_workflow(CONFIG_FILE)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
STUDY, FIGURE_TARGETS = CHECKED.study, CHECKED.targets

RESULTS = STUDY.results_dir
FIGURES = STUDY.figures_dir
RUNS = f"{RESULTS}/runs"
TABLES = f"{RESULTS}/tables"
REPLAY = f"{RESULTS}/replay"
CELLS = list(STUDY.cells)
CELL_BY_KEY = {c.key: c for c in CELLS}
SLURM = STUDY.slurm


def _uses_conda() -> bool:
    methods = getattr(workflow.deployment_settings, "deployment_method", ()) or ()
    return any("conda" in str(m).lower() for m in methods)


# Commands run with this interpreter, so an un-activated .venv/bin/snakemake works; with
# --sw-deployment-method conda every rule runs in envs/analysis.yaml's own python (it installs
# this checkout's ctxpolicy; model servers run from their own environments).
PYTHON = "python" if _uses_conda() else shlex.quote(sys.executable)
CTXPOLICY = f"{PYTHON} -m ctxpolicy"
SOFTWARE_ENV = "../../envs/analysis.yaml"  # relative to this directory


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


# ---------------------------------------------------------------- an imported corpus
# The config's `imported` block (workflow/rules/imported.smk): its trajectory files, listed when
# the DAG is built, are the inputs of the import and of every imported figure's provenance.

IMPORTED = STUDY.imported
HAS_STUDY = STUDY.has_study  # an imported-only config has no study of its own
IMPORTED_ROOT = f"{RESULTS}/imported"


IMPORTED_SOURCES = CHECKED.imported_sources


def imported_cell() -> str:
    return f"{IMPORTED_ROOT}/runs/{IMPORTED['benchmark']}/{IMPORTED['model']}/imported"


# Every configuration of the grid replayed over the corpus (ctxpolicy.study.Study.imported_replay_jobs):
# the policies without a threshold, then each threshold setting's, each group cut into jobs of a
# few policies (tight-1, tight-2, ...) so that both cores replay until the end.
IMPORTED_REPLAY_JOBS = STUDY.imported_replay_jobs() if IMPORTED else {}


def imported_replay_dirs() -> list:
    """The replay root of each job; each holds {benchmark}/{model}/{cell}/."""
    return [f"{IMPORTED_ROOT}/replay/{job}" for job in IMPORTED_REPLAY_JOBS]


def imported_replay_threshold(wildcards, input) -> str:
    """The threshold flags of a job: none for the untriggered policies, its setting otherwise."""
    setting = IMPORTED_REPLAY_JOBS[wildcards.group].setting
    if setting is None:
        return ""
    return f"--setting {setting} --thresholds {shlex.quote(input.thresholds)}"


def imported_verdicts() -> list:
    return [IMPORTED["verdicts"]] if IMPORTED and IMPORTED["verdicts"] else []


def imported_verdicts_option(wildcards, input) -> str:
    """`--verdicts REPORT` for the import when the config names a report (`input.verdicts` is a
    list of at most that one file), else nothing."""
    return "".join(f"--verdicts {shlex.quote(str(report))}" for report in input.verdicts)


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


def view_index(cell) -> str:
    return f"{RESULTS}/view/{cell.benchmark}/{cell.model}/{cell.slug}/index.html"


VIEW_OUTPUTS = [view_index(c) for c in CELLS] if STUDY.view_in_all else []


# ---------------------------------------------------------------- resources


def job_resources(spec: dict) -> dict:
    """Snakemake resources (read by snakemake-executor-plugin-slurm) from a config resources block."""
    res = {
        "mem_mb": spec["mem_mb"],
        "runtime": spec["runtime"],
        "cpus_per_task": spec["cpus"],
    }
    partition = spec.get("partition") or SLURM["partition"]
    if partition:
        res["slurm_partition"] = partition
    if SLURM["account"]:
        res["slurm_account"] = SLURM["account"]
    for key in ("constraint", "slurm_extra"):
        if spec.get(key):
            res[key] = spec[key]
    return res


def cell_gpus(wildcards) -> int:
    """The agent model's GPUs plus the summarizer's (0 asks for none)."""
    cell = cell_of(wildcards)
    gpus = STUDY.model(cell.model)["resources"]["gpus"]
    if cell.summarizer:
        gpus += STUDY.model(cell.summarizer)["resources"]["gpus"]
    return gpus


def cell_resources(model: str) -> dict:
    res = job_resources(STUDY.model(model)["resources"])
    if SLURM["request_gpus"]:
        res["gpu"] = cell_gpus
    return res


ANALYSIS = job_resources(SLURM["analysis"])


# ---------------------------------------------------------------- job order (Snakemake priority)
# Where jobs wait for a free core, Snakemake starts the ready job of highest priority. Run cells
# start longest first, so that the last one to finish is a short one; the calibration cells come
# before all (every threshold-triggered cell waits for their thresholds). The short jobs that
# follow a cell (grading, its trajectory pages, the thresholds) come before any cell: a cell
# shares its model server's slots with the cell beside it, which keeps them busy while the short
# job holds a core, and none of them is left for the end, when the figures need both cores.

SHORT_JOB_PRIORITY = 10**9  # above any cell's


def cell_priority(wildcards) -> int:
    """A cell's planned model work: its runs, twice for a policy that summarizes (its summary
    calls are model calls too); the calibration cells get SHORT_JOB_PRIORITY - 1."""
    cell = cell_of(wildcards)
    if STUDY.calibration_cell(Pair(cell.model, cell.benchmark)) == cell:
        return SHORT_JOB_PRIORITY - 1
    return min(STUDY.planned_runs(cell) * (2 if cell.spec.needs_summarizer else 1), SHORT_JOB_PRIORITY - 2)


# ---------------------------------------------------------------- shared model servers
# Local runs share one model server per model between all their cells (ctxpolicy.serving.shared,
# workflow/rules/servers.smk).

SHARED_SESSION = shared_servers.Session(os.getpid(), Path(RESULTS).resolve() / ".servers")


def shares_servers() -> bool:
    if os.environ.get(shared_servers.ENV) == "off":
        return False
    return workflow.local_exec and workflow.exec_mode == ExecMode.DEFAULT


def cell_threads(cpus: int) -> int:
    """A run cell's threads: its model's cpus, or 1 when the cell is a client of a shared server
    (the server's CPU is outside every job), so that a second cell, a grading or a figure job
    keeps the server's other slots and the cores busy while a cell waits for its last run.
    """
    return 1 if shares_servers() else cpus


def stop_shared_servers() -> None:
    if os.environ.get(shared_servers.ENV) == SHARED_SESSION.announce():
        shared_servers.stop_all(SHARED_SESSION.directory, SHARED_SESSION.owner_pid)


wildcard_constraints:
    benchmark="|".join(map(re.escape, STUDY.benchmarks)),
    model="|".join(map(re.escape, STUDY.models)),
    slug=r"[^/]+",
    scope="|".join(s for s in SCOPES if s != "all"),
