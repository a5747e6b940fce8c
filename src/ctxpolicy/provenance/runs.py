"""Run records as provenance sees them: which files make a run, and what a run.json says about itself.

Provenance reads run directories as plain files (docs/architecture.md), through the run
directory's contract (``ctxpolicy.rundir``), not the agent room.
"""

from __future__ import annotations

from pathlib import Path

from ctxpolicy import rundir
from ctxpolicy.rundir import RUN_JSON  # noqa: F401  (provenance's modules import it from here)

RUN_RECORD_FILES = rundir.RECORD_FILES


def run_record_files(root: str | Path) -> list[Path]:
    """run.json, calls.jsonl and verdict.json of every run directory under ``root``, and of each
    run whose message store one of them extends (a replay's source, schema version 2: its
    ``messages.jsonl`` too, and the replay's own), sorted, each once.

    A run directory is one holding a run.json (``ctxpolicy.rundir.find_run_dirs``: the walk never
    descends into one, so large task workspaces are not visited, nor into ``stale/``).
    """
    if not Path(root).is_dir():
        return []
    files: set[Path] = set()
    base_files: dict[Path, list[Path]] = {}
    # by run name first: a source run's replays (one per configuration, same name) come one after
    # another, so rundir's cache of run.json records keeps the source's while they are walked
    for run_dir in sorted(rundir.find_run_dirs(root, markers=(RUN_JSON,)), key=lambda d: d.name):
        files.update(run_dir / name for name in RUN_RECORD_FILES if (run_dir / name).is_file())
        files.update(source_store_files(run_dir, base_files))
    return sorted(files, key=lambda path: path.parts)  # Path's own order, without its slow comparisons


def source_store_files(run_dir: str | Path, known: dict[Path, list[Path]] | None = None) -> list[Path]:
    """For a run whose message store extends others' (run.json ``message_base``): its own
    ``messages.jsonl`` and each base run's ``messages.jsonl`` and record files; empty for any
    other run. ``RunRecordError`` when the chain names a run that is not there. ``known``: the
    record files of base runs already looked up (filled in here), shared by a walk's runs."""
    stores = rundir.message_store_files(run_dir)
    if len(stores) == 1:
        return []
    known = {} if known is None else known
    files = list(stores)
    for store in stores[1:]:
        base = store.parent
        if base not in known:
            known[base] = [base / name for name in RUN_RECORD_FILES if (base / name).is_file()]
        files += known[base]
    return files


def load_run_json(path: Path) -> dict | None:
    """The parsed run.json, or None where it is missing or not a JSON object."""
    try:
        return rundir.read_record(path)
    except rundir.RunRecordError:
        return None


def run_model(record: dict) -> dict | None:
    model = (record.get("versions") or {}).get("model")
    return model if isinstance(model, dict) else None


def run_summary(record: dict) -> dict:
    """The parts of a run record a reviewer needs to place it: identity, outcome, model, code."""
    versions = record.get("versions") or {}
    return {
        "identity": record.get("identity"),
        "complete": record.get("complete"),
        "outcome": record.get("outcome"),
        "model": run_model(record),
        "code": {"commit": versions.get("git_commit"), "dirty": versions.get("git_dirty")},
    }
