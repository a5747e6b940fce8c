"""Run records as provenance sees them: which files make a run, and what a run.json says about itself.

Provenance reads run directories as plain files (docs/architecture.md), so this module parses
the few run.json fields it shows rather than importing the agent room.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

RUN_JSON = "run.json"
RUN_RECORD_FILES = ("run.json", "calls.jsonl", "verdict.json")


STALE_DIR = "stale"  # docs/architecture.md: runs moved aside, not part of the cell


def run_record_files(root: str | Path) -> list[Path]:
    """run.json, calls.jsonl and verdict.json of every run directory under ``root``, sorted.

    A run directory is one holding a run.json; the walk never descends into one, so large
    task workspaces are not visited, nor into the ``stale/`` folders where
    ``run-cell --redo-stale`` keeps runs made under an outdated threshold.
    """
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        if RUN_JSON in filenames:
            found.extend(Path(dirpath, name) for name in RUN_RECORD_FILES if name in filenames)
            dirnames.clear()
        else:
            dirnames[:] = sorted(d for d in dirnames if d != STALE_DIR)
    return sorted(found)


def load_run_json(path: Path) -> dict | None:
    """The parsed run.json, or None where it is missing or not a JSON object."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


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
