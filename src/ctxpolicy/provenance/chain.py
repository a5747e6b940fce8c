"""Following a target's sidecars back to the run records: tracing (show) and re-hashing (verify)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from tqdm import tqdm

from .hashing import sha256_file
from .runs import RUN_JSON, RUN_RECORD_FILES, load_run_json, run_summary
from .sidecar import SidecarError, read_sidecar, recorded_path, sidecar_path


def display_path(path: Path) -> str:
    """A path as a reader would type it: relative below the working directory, else absolute."""
    relative = os.path.relpath(path)
    return Path(os.path.abspath(path) if relative.split(os.sep)[0] == ".." else relative).as_posix()


def _run_dirs(entries: list[tuple[Path, dict]]) -> set[Path]:
    return {path.parent for path, _ in entries if path.name == RUN_JSON}


def _is_run_file(path: Path, run_dirs: set[Path]) -> bool:
    return path.name in RUN_RECORD_FILES and path.parent in run_dirs


def _run_node(run_dir: Path, files: list[tuple[Path, dict]]) -> dict:
    record = load_run_json(run_dir / RUN_JSON)
    node = {"dir": display_path(run_dir), "files": [{"path": display_path(p), "sha256": e["sha256"]} for p, e in files]}
    if record is None:
        node["problem"] = "run.json unreadable" if (run_dir / RUN_JSON).exists() else "run.json missing"
    else:
        node.update(run_summary(record))
    return node


def trace(target: str | Path, _seen: frozenset[Path] = frozenset()) -> dict:
    """The provenance tree of ``target``: its sidecar's records, with every input that has a
    sidecar expanded in turn, run-record files grouped by run and the cell-level files next to
    those runs (cell.json, eval.json) grouped by cell. Raises SidecarError when the target itself
    has no readable sidecar."""
    target = Path(os.path.normpath(target))
    sidecar = sidecar_path(target)
    data = read_sidecar(sidecar)

    def file_record(field: str) -> dict | None:
        value = data.get(field)
        if value is None:
            return None
        return {"path": display_path(recorded_path(sidecar, value["path"])), "sha256": value["sha256"]}

    entries = [(recorded_path(sidecar, e["path"]), e) for e in data["inputs"]]
    run_dirs = _run_dirs(entries)
    cell_dirs = {run_dir.parent for run_dir in run_dirs}
    runs: dict[Path, list[tuple[Path, dict]]] = {}
    cells: dict[Path, list[dict]] = {}
    inputs = []
    for path, entry in entries:
        if _is_run_file(path, run_dirs):
            runs.setdefault(path.parent, []).append((path, entry))
        elif path.parent in cell_dirs and "sidecar" not in entry:  # cell.json, eval.json, …
            cells.setdefault(path.parent, []).append({"path": display_path(path), "sha256": entry["sha256"]})
        elif "sidecar" in entry:
            inputs.append(_trace_input(path, entry, _seen | {target}))
        else:
            inputs.append({"path": display_path(path), "sha256": entry["sha256"]})
    return {
        "path": display_path(target),
        "sha256": data["target"]["sha256"],
        "sidecar": display_path(sidecar),
        "recorded_at": data.get("recorded_at"),
        "code": data.get("code"),
        "config": file_record("config"),
        "notebook": file_record("notebook"),
        "models": data.get("models") or [],
        "packages": data.get("packages") or {},
        "lock": data.get("lock"),
        "python": data.get("python"),
        "extra": data.get("extra") or {},
        "inputs": inputs,
        "runs": [_run_node(run_dir, files) for run_dir, files in sorted(runs.items())],
        "cells": [{"dir": display_path(cell_dir), "files": files} for cell_dir, files in sorted(cells.items())],
    }


def _trace_input(path: Path, entry: dict, seen: frozenset[Path]) -> dict:
    leaf = {"path": display_path(path), "sha256": entry["sha256"]}
    if path in seen:
        return {**leaf, "cycle": True}
    try:
        node = trace(path, seen)
    except SidecarError as exc:
        return {**leaf, "sidecar_error": str(exc)}
    # the hash the parent recorded is the one that counts along this chain
    return {**node, "sha256": entry["sha256"]}


@dataclass(frozen=True)
class Check:
    path: Path
    recorded: str
    sidecar: Path


@dataclass(frozen=True)
class Problem:
    path: str
    problem: str  # changed | missing | sidecar missing | sidecar unreadable
    recorded: str | None
    actual: str | None
    sidecar: str  # the sidecar that recorded it

    def as_dict(self) -> dict:
        return asdict(self)


def _model_files(models: list[dict]) -> list[tuple[Path, str]]:
    """Model files recorded with a path and a hash (hub models without a single file have none)."""
    return [
        (Path(m["file"]), m["sha256"])
        for m in models
        if isinstance(m, dict) and isinstance(m.get("file"), str) and isinstance(m.get("sha256"), str)
    ]


def collect_checks(target: str | Path, models: bool = False) -> tuple[list[Check], list[Problem]]:
    """Every (file, recorded hash) along the chain of ``target`` (the sidecars that a parent
    recorded the hash of included), and the sidecars along it that are gone or unreadable.
    Raises SidecarError when the target's own sidecar is unusable.
    Model files are included only when ``models`` is set: they are large and seldom present
    where results are audited, and their hashes come from run.json files that are checked anyway."""
    checks: dict[tuple[Path, str], Check] = {}
    problems: list[Problem] = []
    pending: list[tuple[Path, Path | None]] = [(sidecar_path(Path(os.path.normpath(target))), None)]
    visited: set[Path] = set()
    while pending:
        sidecar, recorded_by = pending.pop()
        if sidecar in visited:
            continue
        visited.add(sidecar)
        try:
            data = read_sidecar(sidecar)
        except SidecarError:
            if recorded_by is None:
                raise
            problem = "sidecar unreadable" if sidecar.is_file() else "sidecar missing"
            problems.append(Problem(display_path(sidecar), problem, None, None, display_path(recorded_by)))
            continue
        records = [data["target"], data.get("config"), data.get("notebook"), *data["inputs"]]
        for record in filter(None, records):
            path = recorded_path(sidecar, record["path"])
            checks.setdefault((path, record["sha256"]), Check(path, record["sha256"], sidecar))
        if models:
            for path, digest in _model_files(data.get("models") or []):
                checks.setdefault((path, digest), Check(path, digest, sidecar))
        for entry in data["inputs"]:
            if "sidecar" not in entry:
                continue
            pointed = recorded_path(sidecar, entry["sidecar"])
            if "sidecar_sha256" in entry:  # the input's sidecar is part of the chain: it must not change
                digest = entry["sidecar_sha256"]
                checks.setdefault((pointed, digest), Check(pointed, digest, sidecar))
            pending.append((pointed, sidecar))
    return sorted(checks.values(), key=lambda c: (str(c.path), c.recorded)), problems


def verify(target: str | Path, progress: bool = False, models: bool = False) -> tuple[int, list[Problem]]:
    """Re-hash every file recorded along the chain of ``target`` (and the model files, if ``models``).

    Returns the number of distinct files checked and the problems: each file that changed or
    vanished since it was recorded (an input's sidecar whose hash its parent recorded included),
    and each sidecar along the chain that is gone or unreadable.
    """
    checks, problems = collect_checks(target, models)
    reported = {p.path for p in problems}  # a sidecar already listed as missing or unreadable
    checks = [c for c in checks if display_path(c.path) not in reported]
    actual: dict[Path, str | None] = {}
    for check in tqdm(checks, desc="verifying", unit="file", disable=None if progress else True):
        if check.path not in actual:
            actual[check.path] = sha256_file(check.path) if check.path.is_file() else None
        now = actual[check.path]
        if now != check.recorded:
            problems.append(
                Problem(
                    display_path(check.path),
                    "missing" if now is None else "changed",
                    check.recorded,
                    now,
                    display_path(check.sidecar),
                )
            )
    problems.sort(key=lambda p: (p.path, p.problem, p.recorded or ""))
    return len(actual), problems
