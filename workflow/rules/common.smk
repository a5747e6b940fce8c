# What loads and validates the study (the template's common.smk: load and validate only). The
# config is a single file (default config/config.yaml, or --configfile FILE); it is loaded once
# as the typed study (ctxpolicy.preflight.check_workflow: validated, its grid, figure targets and
# imported corpus checked, as `ctxpolicy grid` checks them) and passed by path to every ctxpolicy
# command. The rules ask STUDY; none reads the config mapping. The files of the DAG are in
# paths.smk, the jobs' resources, priorities and shared servers in resources.smk; the rule files
# hold rules only, but for imported.smk's own helpers.

import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from ctxpolicy.preflight import check_workflow
from ctxpolicy.study import ConfigError
from ctxpolicy.study.grid import SCOPES

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
CELLS = list(STUDY.cells)
CELL_BY_KEY = {c.key: c for c in CELLS}
SLURM = STUDY.slurm

# the config's `imported` block (workflow/rules/imported.smk): its trajectory files, listed when
# the DAG is built, are the inputs of the import and of every imported figure's provenance
IMPORTED = STUDY.imported
HAS_STUDY = STUDY.has_study  # an imported-only config has no study of its own
IMPORTED_SOURCES = CHECKED.imported_sources


def _uses_conda() -> bool:
    methods = getattr(workflow.deployment_settings, "deployment_method", ()) or ()
    return any("conda" in str(m).lower() for m in methods)


# Commands run with this interpreter, so an un-activated .venv/bin/snakemake works; with
# --sw-deployment-method conda every rule runs in envs/analysis.yaml's own python (it installs
# this checkout's ctxpolicy; model servers run from their own environments).
PYTHON = "python" if _uses_conda() else shlex.quote(sys.executable)
CTXPOLICY = f"{PYTHON} -m ctxpolicy"
SOFTWARE_ENV = "../../envs/analysis.yaml"  # relative to this directory


wildcard_constraints:
    benchmark="|".join(map(re.escape, STUDY.benchmarks)),
    model="|".join(map(re.escape, STUDY.models)),
    slug=r"[^/]+",
    scope="|".join(s for s in SCOPES if s != "all"),
