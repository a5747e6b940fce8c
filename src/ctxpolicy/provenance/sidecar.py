"""Provenance sidecars: ``TARGET.prov.json`` next to every figure and table.

A sidecar records what made its target: the code commit and whether the tree was dirty, the
config and its hash, every input with its hash (and a pointer to the input's own sidecar, so a
chain can be followed back to the run records), package versions and the environment's lock
file, model files and hashes, the executed notebook and the target's own hash. Paths are stored
relative to the sidecar's directory so that a results tree stays auditable after it is moved or
unpacked from a bundle.

The pointer to an input's sidecar carries that sidecar's hash too (``sidecar_sha256``), so the
chain is a hash chain: rewriting a run record together with the hash a table's sidecar recorded
for it changes the table's sidecar, which the figure's sidecar recorded. Sidecars written before
``sidecar_sha256`` existed stay readable; their pointers are followed without that check.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from ctxpolicy.errors import UsageError
from ctxpolicy.atomic import atomic_write_json

from .environment import code_state, package_versions, python_version
from .hashing import sha256_file
from .lockfile import lock_record
from ctxpolicy.rundir import open_regular

from .runs import RUN_JSON, run_model

SIDECAR_SUFFIX = ".prov.json"
SCHEMA_VERSION = 1


class SidecarError(UsageError, ValueError):
    """A sidecar or one of the files it should describe is missing or malformed."""


def sidecar_path(target: str | Path) -> Path:
    return Path(str(target) + SIDECAR_SUFFIX)


def relative_path(path: str | Path, start: str | Path) -> str:
    """``path`` relative to directory ``start``, POSIX-style, without resolving symlinks."""
    # string operations only: a study's replay tables record a hundred thousand inputs
    return os.path.relpath(os.path.abspath(path), os.path.abspath(start)).replace(os.sep, "/")


def recorded_path(sidecar: Path, recorded: str) -> Path:
    """The file a path stored in ``sidecar`` points to, as a normalized path."""
    return Path(os.path.normpath(sidecar.parent / recorded))


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _existing_file(path: Path, role: str) -> Path:
    try:
        mode = os.stat(path).st_mode  # one stat: a study's replay tables have a hundred thousand inputs
    except OSError:
        raise SidecarError(f"{path}: {role} does not exist") from None
    if not stat.S_ISREG(mode):
        raise SidecarError(f"{path}: {role} is not a regular file")
    return path


def _unique_paths(paths: Iterable[str | Path]) -> list[Path]:
    unique = {os.path.abspath(p): Path(p) for p in paths}
    return [unique[key] for key in sorted(unique)]


def _hash_input(path: Path) -> tuple[str, dict | None]:
    """An input's sha256 and, for a run.json, the model record it carries (``versions.model``;
    None for any other file, or a run.json that is not a readable JSON object): one read of the
    file for both, a study's replays having tens of thousands of run.json inputs."""
    if path.name != RUN_JSON:
        return sha256_file(path), None
    try:
        with open_regular(path, within=path.parent) as handle:  # the guard load_run_json reads through
            data = handle.read()
    except OSError:
        return sha256_file(path), None  # its hash as any file's; no model, as load_run_json gives none
    try:
        record = json.loads(data)
    except ValueError:
        record = None
    return hashlib.sha256(data).hexdigest(), run_model(record) if isinstance(record, dict) else None


def _models_of_inputs(
    inputs: list[Path], run_models: dict[Path, dict | None], with_sidecars: Iterable[Path]
) -> list[dict]:
    """Model records carried by the inputs: run.json ``versions.model`` (``run_models``, read
    while hashing) and the models of the input sidecars (of the inputs ``with_sidecars``)."""
    models = []
    for path in inputs:
        if path.name == RUN_JSON:
            model = run_models.get(path)
            if model:
                models.append(model)
        elif path in with_sidecars:
            models.extend(read_sidecar(sidecar_path(path)).get("models") or [])
    return models


def _input_entries(input_paths: list[Path], base: Path, hashes: dict, sidecar_hashes: dict) -> list[dict]:
    start = os.path.abspath(base)
    entries = []
    for path in input_paths:
        entry = {"path": relative_path(path, start), "sha256": hashes[path]}
        if path in sidecar_hashes:
            entry["sidecar"] = relative_path(sidecar_path(path), start)
            entry["sidecar_sha256"] = sidecar_hashes[path]
        entries.append(entry)
    return entries


def _distinct(records: Iterable[dict]) -> list[dict]:
    by_key = {_canonical(record): record for record in records}
    return [by_key[key] for key in sorted(by_key)]


def write_sidecars(
    targets: Iterable[str | Path],
    *,
    config_path: str | Path | None,
    inputs: Iterable[str | Path],
    notebook: str | Path | None = None,
    models: list[dict] | None = None,
    extra: dict | None = None,
    repo_root: str | Path | None = None,
    progress: bool = False,
) -> list[Path]:
    """Write one sidecar per target, all sharing the same inputs; inputs are hashed once.

    Returns the sidecar paths. ``repo_root`` is where the code commit is read (default: the
    checkout ctxpolicy is installed from, see ``ctxpolicy.gitstate.code_repo``).
    """
    targets = [_existing_file(Path(t), "target") for t in targets]
    config = _existing_file(Path(config_path), "config") if config_path is not None else None
    nb = _existing_file(Path(notebook), "notebook") if notebook is not None else None
    input_paths = [_existing_file(p, "input") for p in _unique_paths(inputs)]
    if extra is not None:
        try:
            _canonical(extra)
        except (TypeError, ValueError) as exc:
            raise SidecarError(f"extra: not JSON-serializable: {exc}") from None

    hashes, run_models = {}, {}
    for p in tqdm(input_paths, desc="hashing inputs", unit="file", disable=None if progress else True):
        hashes[p], run_models[p] = _hash_input(p)
    sidecar_hashes = {p: sha256_file(sidecar_path(p)) for p in input_paths if os.path.isfile(sidecar_path(p))}
    shared = {
        "code": code_state(repo_root),
        "models": _distinct([*(models or []), *_models_of_inputs(input_paths, run_models, sidecar_hashes)]),
        "packages": package_versions(),
        "lock": lock_record(),
        "python": python_version(),
        "extra": extra or {},
    }
    config_hash = sha256_file(config) if config else None
    notebook_hash = sha256_file(nb) if nb else None
    written = []
    entries_by_base: dict[Path, list[dict]] = {}  # the targets of one rule share their folder
    for target in targets:
        base = target.parent
        if base not in entries_by_base:
            entries_by_base[base] = _input_entries(input_paths, base, hashes, sidecar_hashes)
        entries = entries_by_base[base]
        sidecar = {
            "schema_version": SCHEMA_VERSION,
            "target": {"path": target.name, "sha256": sha256_file(target)},
            "recorded_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            **shared,
            "config": {"path": relative_path(config, base), "sha256": config_hash} if config else None,
            "notebook": {"path": relative_path(nb, base), "sha256": notebook_hash} if nb else None,
            "inputs": entries,
        }
        out = sidecar_path(target)
        atomic_write_json(out, sidecar, indent=2, sort_keys=True, ensure_ascii=False)
        written.append(out)
    return written


def write_sidecar(
    target: str | Path,
    *,
    config_path: str | Path | None,
    inputs: Iterable[str | Path],
    notebook: str | Path | None = None,
    models: list[dict] | None = None,
    extra: dict | None = None,
    repo_root: str | Path | None = None,
) -> Path:
    """Write ``target + ".prov.json"`` atomically and return its path."""
    return write_sidecars(
        [target],
        config_path=config_path,
        inputs=inputs,
        notebook=notebook,
        models=models,
        extra=extra,
        repo_root=repo_root,
    )[0]


def _require_file_record(sidecar: Path, data: dict, field: str, optional: bool) -> None:
    value = data.get(field)
    if value is None and optional:
        return
    if not (isinstance(value, dict) and isinstance(value.get("path"), str) and isinstance(value.get("sha256"), str)):
        raise SidecarError(f"{sidecar}: field '{field}': expected {{path, sha256}}, got {value!r:.80}")


def read_sidecar(path: str | Path) -> dict:
    """Load and check a sidecar; a malformed one raises SidecarError naming file and field."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SidecarError(f"{path}: no provenance sidecar") from None
    except (OSError, ValueError) as exc:
        raise SidecarError(f"{path}: unreadable sidecar: {exc}") from None
    if not isinstance(data, dict):
        raise SidecarError(f"{path}: expected a JSON object")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise SidecarError(
            f"{path}: field 'schema_version': expected {SCHEMA_VERSION}, got {data.get('schema_version')!r}"
        )
    _require_file_record(path, data, "target", optional=False)
    _require_file_record(path, data, "config", optional=True)
    _require_file_record(path, data, "notebook", optional=True)
    _require_file_record(path, data, "lock", optional=True)
    inputs = data.get("inputs")
    if not isinstance(inputs, list):
        raise SidecarError(f"{path}: field 'inputs': expected a list, got {inputs!r:.80}")
    for index, entry in enumerate(inputs):
        if not (
            isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("sha256"), str)
        ):
            raise SidecarError(f"{path}: field 'inputs[{index}]': expected {{path, sha256}}, got {entry!r:.80}")
        for key in ("sidecar", "sidecar_sha256"):
            if key in entry and not isinstance(entry[key], str):
                raise SidecarError(f"{path}: field 'inputs[{index}].{key}': expected a string, got {entry[key]!r:.80}")
        if "sidecar_sha256" in entry and "sidecar" not in entry:
            raise SidecarError(f"{path}: field 'inputs[{index}]': sidecar_sha256 without a sidecar pointer")
    return data
