"""Results bundles: run records, thresholds and tables in one tar.gz with a checksum manifest.

A reviewer imports a bundle into an empty ``results/`` and regenerates every figure and table
without a GPU: import checks every checksum before it writes anything, refuses links and paths
that leave the results directory, and gives restored files modification times that keep the
order they had when exported (tables last), compressed into the moment of import. Snakemake
then sees each rule's outputs as newer than its inputs and the repository's files, so it
schedules no run, evaluation or calibration job.

A replay (schema version 2) stores only the messages its policy wrote and names the run whose
store holds the rest (run.json ``message_base``). Export carries each such source run with it
(its message store and record files, wherever under the results directory it lies; a source
outside it is refused, naming both) and lists the pairs in the manifest (``message_bases``, with
the source store's sha256 the replay was written against); the check refuses a bundle whose
source store is missing or differs from it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import stat
import tarfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from ctxpolicy.errors import UsageError
from ctxpolicy import rundir
from ctxpolicy.atomic import atomic_output
from ctxpolicy.rundir import WORKSPACE, open_regular

from .environment import code_state, package_versions, python_version
from .hashing import sha256_file
from .lockfile import lock_record

MANIFEST_NAME = "MANIFEST.json"
BUNDLE_ROOT = "results"
BUNDLE_FORMAT = "ctxpolicy-results-bundle"
SCHEMA_VERSION = 1
BUNDLED_DIRS = ("runs", "replay", "thresholds", "tables")
LAST_RESTORED = ("tables",)  # derived from everything else in the bundle
RESTORE_STEP_NS = 1_000
# the most a bundle's members may hold together, unless the caller says otherwise
# (`bundle check/import --max-size`); the study's full results are a few GiB
DEFAULT_MAX_BYTES = 64 << 30
MANIFEST_MAX_BYTES = 256 << 20


class BundleError(UsageError, ValueError):
    """A bundle that cannot be written, trusted or restored; the message names every offending file."""

    keeps_lines = True  # one offending file a line


@dataclass(frozen=True)
class ImportSummary:
    written: int
    unchanged: int
    results: Path


def _is_workspace(rel: PurePosixPath) -> bool:
    # results/runs/{benchmark}/{model}/{cell}/{run}/workspace
    return rel.parts[0] == "runs" and len(rel.parts) == 6 and rel.name == WORKSPACE


def bundle_files(
    results: Path, workspaces: bool = False, special: list[PurePosixPath] | None = None
) -> tuple[list[PurePosixPath], list[PurePosixPath]]:
    """Regular files to pack (relative to ``results``, sorted) and the symbolic links left out;
    FIFOs, sockets and devices (an agent may leave one in its workspace) are left out too, added
    to ``special`` when it is given."""
    files, links = [], []
    for top in BUNDLED_DIRS:
        for dirpath, dirnames, filenames in os.walk(results / top):
            rel_dir = PurePosixPath(Path(dirpath).relative_to(results).as_posix())
            kept = []
            for name in sorted(dirnames):
                if Path(dirpath, name).is_symlink():
                    links.append(rel_dir / name)
                elif workspaces or not _is_workspace(rel_dir / name):
                    kept.append(name)
            dirnames[:] = kept
            for name in filenames:
                mode = os.lstat(Path(dirpath, name)).st_mode
                if stat.S_ISLNK(mode):
                    links.append(rel_dir / name)
                elif stat.S_ISREG(mode):
                    files.append(rel_dir / name)
                elif special is not None:
                    special.append(rel_dir / name)
    if special is not None:
        special.sort()
    return sorted(files), sorted(links)


class _HashingReader:
    def __init__(self, handle):
        self._handle = handle
        self.digest = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self.digest.update(data)
        return data


def _tarinfo(name: str, size: int, mtime: float) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def export_bundle(results: str | Path, out: str | Path, workspaces: bool = False, progress: bool = False) -> dict:
    """Pack ``results`` into ``out`` (written atomically) and return the manifest."""
    results, out = Path(results), Path(out)
    if not any((results / top).is_dir() for top in BUNDLED_DIRS):
        raise BundleError(f"{results}: no {', '.join(BUNDLED_DIRS)} directory to bundle")
    special: list[PurePosixPath] = []
    files, links = bundle_files(results, workspaces, special)
    bases, carried = message_bases(results, files)
    files = sorted(set(files) | set(carried))
    entries = []
    with atomic_output(out) as handle, tarfile.open(fileobj=handle, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in tqdm(files, desc="bundling", unit="file", disable=None if progress else True):
            with open_regular(results / rel) as source:  # never blocks on what replaced a file since the walk
                info = os.fstat(source.fileno())
                reader = _HashingReader(source)
                tar.addfile(_tarinfo(f"{BUNDLE_ROOT}/{rel}", info.st_size, info.st_mtime), reader)
            entries.append(
                {
                    "path": str(rel),
                    "sha256": reader.digest.hexdigest(),
                    "size": info.st_size,
                    "mtime_ns": info.st_mtime_ns,
                }
            )
        manifest = {
            "format": BUNDLE_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "code": code_state(),
            "packages": package_versions(),
            "lock": lock_record(),
            "python": python_version(),
            "workspaces": workspaces,
            "links_left_out": [str(link) for link in links],
            "special_files_left_out": [str(path) for path in special],
            "message_bases": bases,
            "files": entries,
        }
        data = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()
        tar.addfile(_tarinfo(MANIFEST_NAME, len(data), time.time()), io.BytesIO(data))
    return manifest


def message_bases(results: Path, files: list[PurePosixPath]) -> tuple[list[dict], list[PurePosixPath]]:
    """The ``message_base`` of every bundled run that has one (``{"run", "base", "sha256"}``,
    results-relative run directories) and the source files to carry with them (each base's
    message store and record files). ``BundleError`` for a base outside ``results`` or missing."""
    bases, carried, problems = [], [], []
    for rel in files:
        if rel.name != rundir.RUN_JSON:
            continue
        run = results / rel.parent
        try:
            record = rundir.read_record(run / rundir.RUN_JSON)
            stores = rundir.message_store_files(run) if record.get(rundir.MESSAGE_BASE) else []
        except rundir.RunRecordError as exc:
            problems.append(str(exc))
            continue
        for holder, store in zip(stores, stores[1:]):
            base = store.parent
            try:
                base_rel = PurePosixPath(Path(os.path.abspath(base)).relative_to(os.path.abspath(results)).as_posix())
            except ValueError:
                problems.append(
                    f"{holder.parent / rundir.RUN_JSON}: field {rundir.MESSAGE_BASE}.run names {base}, "
                    f"outside {results}: a bundle carries only what lies under it"
                )
                continue
            holder_rel = PurePosixPath(
                Path(os.path.abspath(holder.parent)).relative_to(os.path.abspath(results)).as_posix()
            )
            digest = rundir.read_record(holder.parent / rundir.RUN_JSON)[rundir.MESSAGE_BASE].get("sha256")
            bases.append({"run": str(holder_rel), "base": str(base_rel), "sha256": digest})
            names = (rundir.MESSAGES_JSONL, *rundir.RECORD_FILES)
            carried += [base_rel / name for name in names if (base / name).is_file()]
    if problems:
        raise BundleError("cannot carry the replays' source runs:\n  " + "\n  ".join(sorted(set(problems))))
    unique = {(b["run"], b["base"]): b for b in bases}
    return [unique[k] for k in sorted(unique)], sorted(set(carried))


def _base_problems(manifest: dict, digests: dict[str, str]) -> list[str]:
    """Each listed message base whose store is not in the bundle or is not the one its replay
    was written against."""
    problems = []
    for entry in manifest.get("message_bases") or []:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(k), str) for k in ("run", "base")):
            problems.append(f"{MANIFEST_NAME}: field 'message_bases': bad entry {entry!r:.80}")
            continue
        store = str(PurePosixPath(entry["base"]) / rundir.MESSAGES_JSONL)
        if store not in digests:
            problems.append(
                f"{BUNDLE_ROOT}/{entry['run']}: its source store {BUNDLE_ROOT}/{store} is not in the bundle"
            )
        elif entry.get("sha256") and digests[store] != entry["sha256"]:
            problems.append(
                f"{BUNDLE_ROOT}/{entry['run']}: its source store {BUNDLE_ROOT}/{store} is not the one it was "
                f"written against (message_base sha256 {str(entry['sha256'])[:12]}, content {digests[store][:12]})"
            )
    return problems


def safe_relative(name: str) -> PurePosixPath | None:
    """``name`` as a path inside the results directory, or None where it would leave it."""
    path = PurePosixPath(name)
    if not name or "\\" in name or "\0" in name or path.is_absolute():
        return None
    if any(part in ("..", "") for part in name.split("/")):
        return None
    return path


def _member_path(name: str) -> PurePosixPath | None:
    """The results-relative path of a bundle member, or None where it is not a safe one."""
    path = safe_relative(name.rstrip("/"))
    if path is None or path.parts[0] != BUNDLE_ROOT:
        return None
    return PurePosixPath(*path.parts[1:]) if len(path.parts) > 1 else PurePosixPath(".")


def _load_manifest(bundle: Path, data: bytes | None) -> dict:
    if data is None:
        raise BundleError(f"{bundle}: no {MANIFEST_NAME}: not a ctxpolicy results bundle")
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise BundleError(f"{bundle}: {MANIFEST_NAME}: not valid JSON: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(f"{bundle}: {MANIFEST_NAME}: field 'format': expected {BUNDLE_FORMAT!r}")
    if manifest.get("schema_version") != SCHEMA_VERSION:
        raise BundleError(
            f"{bundle}: {MANIFEST_NAME}: field 'schema_version': expected {SCHEMA_VERSION}, "
            f"got {manifest.get('schema_version')!r}"
        )
    files = manifest.get("files")
    if not isinstance(files, list):
        raise BundleError(f"{bundle}: {MANIFEST_NAME}: field 'files': expected a list")
    for index, entry in enumerate(files):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("path"), str)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("mtime_ns"), int)
            and isinstance(entry.get("size"), int)
            and not isinstance(entry.get("size"), bool)
            and entry["size"] >= 0
        ):
            raise BundleError(
                f"{bundle}: {MANIFEST_NAME}: field 'files[{index}]': "
                f"expected {{path, sha256, size, mtime_ns}}, got {entry!r:.80}"
            )
        if safe_relative(entry["path"]) is None:
            raise BundleError(
                f"{bundle}: {MANIFEST_NAME}: field 'files[{index}].path': "
                f"{entry['path']!r} leaves the results directory"
            )
    return manifest


def parse_size(text: str) -> int:
    """``"64G"``, ``"500M"``, ``"1024"``: a number of bytes (K, M, G, T are powers of 1024)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    body = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = body[-1:] if body[-1:] in units else ""
    try:
        value = float(body[: len(body) - len(unit)])
    except ValueError:
        raise ValueError(f"{text!r} is no size (e.g. 64G, 500M, 1024)") from None
    if value < 0:
        raise ValueError(f"{text!r} is no size (negative)")
    return int(value * units[unit])


def _member_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member is refused before anything of it is read: its kind."""
    if member.issparse():  # its header's size is not what it would write: never restored
        return f"{member.name}: a sparse member (refused: its holes would be written out in full)"
    if not (member.isreg() or member.isdir()):
        return f"{member.name}: not a regular file (links and devices are refused)"
    return None


def check_bundle(bundle: str | Path, progress: bool = False, max_bytes: int = DEFAULT_MAX_BYTES) -> dict:
    """Read the whole bundle, hashing every member, and return its manifest if everything
    matches; otherwise raise BundleError listing each unsafe, unlisted, missing, altered or
    misreported file. Nothing is written.

    Every member's size is bounded before it is read: sparse members are refused, the members
    together may hold at most ``max_bytes`` (the check stops at the first one past it), and each
    member's size in its header, and the bytes it holds, must be the manifest's ``size``."""
    bundle = Path(bundle)
    problems: list[str] = []
    digests: dict[str, str] = {}
    sizes: dict[str, int] = {}
    manifest_data = None
    total = 0
    try:
        with tarfile.open(bundle, "r:*") as tar:
            for member in tqdm(tar, desc="checking", unit="file", disable=None if progress else True):
                rel = _member_path(member.name)
                total += member.size if member.isreg() else 0
                if total > max_bytes:
                    raise BundleError(
                        f"{bundle}: refused: its members hold more than the cap of {max_bytes} bytes "
                        f"(at {member.name}; --max-size raises it)"
                    )
                if problem := _member_problem(member):
                    problems.append(problem)
                elif member.name == MANIFEST_NAME:
                    if manifest_data is not None:
                        problems.append(f"{member.name}: appears twice")
                    elif member.size > MANIFEST_MAX_BYTES:
                        problems.append(f"{member.name}: {member.size} bytes, more than {MANIFEST_MAX_BYTES}")
                    else:
                        manifest_data = tar.extractfile(member).read()
                elif rel is None:
                    problems.append(f"{member.name}: path leaves the results directory")
                elif member.isdir():
                    continue
                elif str(rel) in digests:
                    problems.append(f"{member.name}: appears twice")
                else:
                    digest, read = _digest(tar.extractfile(member), member.size)
                    digests[str(rel)] = digest
                    sizes[str(rel)] = read
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise BundleError(f"{bundle}: unreadable bundle: {exc}") from None
    manifest = _load_manifest(bundle, manifest_data)
    listed = {entry["path"]: entry for entry in manifest["files"]}
    for path, entry in listed.items():
        if path not in digests:
            problems.append(f"{BUNDLE_ROOT}/{path}: listed in {MANIFEST_NAME} but not in the bundle")
            continue
        if digests[path] != entry["sha256"]:
            problems.append(
                f"{BUNDLE_ROOT}/{path}: checksum mismatch "
                f"({MANIFEST_NAME} {entry['sha256'][:12]}, content {digests[path][:12]})"
            )
        if sizes[path] != entry["size"]:
            problems.append(
                f"{BUNDLE_ROOT}/{path}: size mismatch ({MANIFEST_NAME} {entry['size']} bytes, the member {sizes[path]})"
            )
    problems.extend(f"{BUNDLE_ROOT}/{path}: not listed in {MANIFEST_NAME}" for path in digests if path not in listed)
    problems.extend(_base_problems(manifest, digests))
    if problems:
        raise BundleError(f"{bundle}: refused, {len(problems)} problem(s):\n  " + "\n  ".join(sorted(problems)))
    return manifest


def _digest(handle, size: int) -> tuple[str, int]:
    """sha256 of what `handle` holds and how many bytes that is, never reading past `size`."""
    digest, read = hashlib.sha256(), 0
    while read < size and (chunk := handle.read(min(1 << 20, size - read))):
        digest.update(chunk)
        read += len(chunk)
    return digest.hexdigest(), read


def restored_mtimes(files: list[dict], now_ns: int, step_ns: int = RESTORE_STEP_NS) -> dict[str, int]:
    """Modification times for restored files: the exported order (tables after everything else,
    then original mtime), with files that were simultaneous staying simultaneous, packed into
    the moments just before ``now_ns``."""

    def key(entry: dict) -> tuple[int, int]:
        return (PurePosixPath(entry["path"]).parts[0] in LAST_RESTORED, entry["mtime_ns"])

    ranks = {k: rank for rank, k in enumerate(sorted({key(e) for e in files}))}
    newest = len(ranks) - 1
    return {e["path"]: now_ns - (newest - ranks[key(e)]) * step_ns for e in files}


def _linked_parents(results: Path, files: list[dict]) -> list[str]:
    """Each existing folder below ``results`` on a bundled file's way that is a symbolic link
    (or no folder at all): writing through it would put the file elsewhere."""
    bad, seen = set(), set()
    for entry in files:
        parts = PurePosixPath(entry["path"]).parts[:-1]
        for depth in range(1, len(parts) + 1):
            rel = PurePosixPath(*parts[:depth])
            if rel in seen:
                continue
            seen.add(rel)
            path = results / rel
            if path.is_symlink() or (os.path.lexists(path) and not path.is_dir()):
                bad.add(str(rel))
                break
            if not path.exists():
                break
    return sorted(bad)


def _conflicts(results: Path, files: list[dict]) -> tuple[list[str], set[str]]:
    """Existing files that differ from the bundle's, and those already identical."""
    differing, identical = [], set()
    for entry in files:
        path = results / entry["path"]
        if path.is_symlink() or (path.exists() and not path.is_file()):
            differing.append(entry["path"])
        elif path.is_file():
            if sha256_file(path) == entry["sha256"]:
                identical.add(entry["path"])
            else:
                differing.append(entry["path"])
    return differing, identical


def _extract_member(tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path, entry: dict, results: Path) -> None:
    if _linked_parents(results, [entry]):  # replaced by a link since the check
        raise BundleError(f"{member.name}: a folder on its way under {results} became a symbolic link")
    with atomic_output(dest, durable=False) as out:
        reader = _HashingReader(tar.extractfile(member))
        written = 0
        while chunk := reader.read(1 << 20):
            written += len(chunk)
            if written > entry["size"]:  # the bundle was checked in full already; this catches it being replaced since
                raise BundleError(f"{member.name}: changed while importing (more than its {entry['size']} bytes)")
            out.write(chunk)
        if reader.digest.hexdigest() != entry["sha256"] or written != entry["size"]:
            raise BundleError(f"{member.name}: changed while importing (checksum mismatch)")


def import_bundle(
    bundle: str | Path,
    results: str | Path,
    overwrite: bool = False,
    progress: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ImportSummary:
    """Check ``bundle`` completely (``check_bundle``, at most ``max_bytes``), then restore its
    files under ``results``.

    Refuses (BundleError, nothing written) a bundle that fails its checksums or sizes or holds
    unsafe paths, a results directory where a folder on a file's way is a symbolic link, one
    whose filesystem has not the room for the bundle, and, unless ``overwrite``, one holding
    different versions of its files.
    """
    bundle, results = Path(bundle), Path(results)
    manifest = check_bundle(bundle, progress, max_bytes)
    files = manifest["files"]
    linked = _linked_parents(results, files)
    if linked:
        raise BundleError(
            f"{results}: refused, {len(linked)} folder(s) on the bundle's paths are symbolic links or no "
            "folders (the files would be written elsewhere):\n  " + "\n  ".join(linked)
        )
    differing, identical = _conflicts(results, files)
    if differing and not overwrite:
        raise BundleError(
            f"{results}: {len(differing)} file(s) differ from the bundle's "
            f"(use --overwrite to replace them):\n  " + "\n  ".join(differing)
        )
    needed = sum(entry["size"] for entry in files if entry["path"] not in identical)
    existing = next(p for p in (results, *results.absolute().parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if needed > free:
        raise BundleError(f"{results}: the bundle's {needed} bytes do not fit the {free} bytes free there")
    entries = {entry["path"]: entry for entry in files}
    written = 0
    with tarfile.open(bundle, "r:*") as tar:
        for member in tqdm(
            tar, desc="restoring", unit="file", total=len(files) + 1, disable=None if progress else True
        ):
            rel = _member_path(member.name) if member.isreg() and not member.issparse() else None
            if rel is None or str(rel) in identical or str(rel) not in entries:
                continue
            _extract_member(tar, member, results / rel, entries[str(rel)], results)
            written += 1
    os.sync()
    for path, mtime_ns in restored_mtimes(files, time.time_ns()).items():
        os.utime(results / path, ns=(mtime_ns, mtime_ns))
    return ImportSummary(written=written, unchanged=len(identical), results=results)
