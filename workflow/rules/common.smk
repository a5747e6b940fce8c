# Shared state of the DAG: the one config file, its cells, and the helpers the rules use.
# The config is a single file (default config/config.yaml, or --configfile FILE); it is
# validated by ctxpolicy.config at start-up and passed by path to every ctxpolicy command.

import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from ctxpolicy.config import ConfigError, load_config
from ctxpolicy.grid import (SCOPES, calibration_cell, cells_in_scope, expand_grid, limited_tasks,
                            target_scope, thresholds_path)


REPO = Path(workflow.basedir)


def repo_file(path: str) -> str:
    """A file of this repository, as a path that works from the working directory (-d DIR too)."""
    if Path(path).is_absolute() or REPO.resolve() == Path.cwd().resolve():
        return str(path)
    return str(REPO / path)


def _config_file() -> str:
    if workflow.config_settings.config:
        raise WorkflowError("--config KEY=VALUE is not supported: the study is one file; "
                            "edit a copy of it and pass --configfile FILE")
    given = [Path(p) for p in (workflow.overwrite_configfiles or [])]
    if len(given) > 1:
        raise WorkflowError(f"give one --configfile, not {len(given)}: {' '.join(map(str, given))}")
    if not given:
        return repo_file("config/config.yaml")
    path = given[0]
    return os.path.relpath(path) if path.is_absolute() and path.is_relative_to(Path.cwd()) else str(path)


CONFIG_FILE = _config_file()
try:
    CONFIG = load_config(CONFIG_FILE)
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None

RESULTS = CONFIG["results_dir"].rstrip("/")
FIGURES = CONFIG["figures_dir"].rstrip("/")
RUNS = f"{RESULTS}/runs"
TABLES = f"{RESULTS}/tables"
CELLS = expand_grid(CONFIG)
CELL_BY_KEY = {c.key: c for c in CELLS}
SLURM = CONFIG["slurm"]


def _uses_conda() -> bool:
    methods = getattr(workflow.deployment_settings, "deployment_method", ()) or ()
    return any("conda" in str(m).lower() for m in methods)


# Commands run with this interpreter, so an un-activated .venv/bin/snakemake works; analysis
# rules run in envs/analysis.yaml's own python when Snakemake deploys conda environments.
PY = shlex.quote(sys.executable)
CTXPOLICY = f"{PY} -m ctxpolicy"
ANALYSIS_PY = "python" if _uses_conda() else PY
ANALYSIS_CTXPOLICY = f"{ANALYSIS_PY} -m ctxpolicy"
CFG = shlex.quote(CONFIG_FILE)


def q(paths) -> str:
    """Shell-quoted, space-separated."""
    return " ".join(shlex.quote(str(p)) for p in ([paths] if isinstance(paths, (str, Path)) else paths))


def cell_dir(cell) -> str:
    return str(cell.run_root(RESULTS))


def cell_of(wildcards):
    key = (wildcards.benchmark, wildcards.model, wildcards.slug)
    if key not in CELL_BY_KEY:
        raise WorkflowError(f"{RUNS}/{'/'.join(key)} is not a cell of {CONFIG_FILE} "
                            "(`ctxpolicy grid --config FILE --json` lists the cells)")
    return CELL_BY_KEY[key]


def cell_json(cell) -> str:
    return f"{cell_dir(cell)}/cell.json"


def eval_json(cell) -> str:
    return f"{cell_dir(cell)}/eval.json"


def job_resources(spec: dict, gpus: int = 0) -> dict:
    """Snakemake resources (read by snakemake-executor-plugin-slurm) from a config resources block."""
    res = {"mem_mb": spec["mem_mb"], "runtime": spec["runtime"], "cpus_per_task": spec["cpus"]}
    if gpus and SLURM["request_gpus"]:
        res["gpu"] = gpus
    partition = spec.get("partition") or SLURM["partition"]
    if partition:
        res["slurm_partition"] = partition
    if SLURM["account"]:
        res["slurm_account"] = SLURM["account"]
    for key in ("constraint", "slurm_extra"):
        if spec.get(key):
            res[key] = spec[key]
    return res


ANALYSIS = job_resources(SLURM["analysis"])
ANALYSIS_ENV = "../../envs/analysis.yaml"  # relative to this directory; used with --sw-deployment-method conda


wildcard_constraints:
    benchmark="|".join(map(re.escape, CONFIG["benchmarks"])),
    model="|".join(map(re.escape, CONFIG["models"])),
    slug=r"[^/]+",
    scope="|".join(s for s in SCOPES if s != "all"),
