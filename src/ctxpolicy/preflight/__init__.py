"""Everything the workflow checks about a config before it builds its DAG, in one function that
``ctxpolicy grid`` and ``workflow/rules/common.smk`` both call (`check_workflow`): the study
(``study.load_study``: the schema, the config's cross references, the grid's checks), its figure
and table targets (``figures.catalog.targets_for``: the ``figures:`` block's stems and pairs),
and an imported corpus's files (``importing.cli.trajectory_files``: ``imported.path`` must hold
trajectories). So a config that ``ctxpolicy grid`` accepts is one Snakemake accepts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.study.config import ConfigError
from ctxpolicy.study import Study, load_study


@dataclass(frozen=True)
class CheckedWorkflow:
    """A config as the workflow uses it: the study, its targets, the corpus's files."""

    study: Study
    targets: dict[str, dict]  # figures.catalog.targets_for
    imported_sources: list[str]  # the imported corpus's trajectory files, sorted (none without one)


def check_workflow(path: str | Path) -> CheckedWorkflow:
    """Load and check the config at `path` as the workflow does; ``ConfigError`` (one line naming
    the file, the key and the value) for the first problem."""
    from ctxpolicy.figures.catalog import targets_for

    source = str(path)
    study = load_study(path)
    targets = targets_for(study)
    return CheckedWorkflow(study, targets, imported_sources(study, source))


def imported_sources(study: Study, source: str) -> list[str]:
    """The trajectory files of the config's imported corpus (relative to the working directory)."""
    from ctxpolicy.importing.cli import trajectory_files

    imported = study.imported
    if not imported:
        return []
    files, problems = trajectory_files([imported["path"]], imported["format"])
    if problems or not files:
        found = "; ".join(problems) if problems else "no trajectory file found"
        raise ConfigError(f"{source}: imported.path: {imported['path']!r}: {found}")
    return sorted(str(f.path) for f in files)
