"""The run directory and the cell directory: file names, layout, completeness, records.

This is the one definition of the contract in docs/architecture.md ("Run directory", "Cells and
the grid"): what the files are called, where a run directory lies, when it counts as complete,
how ``run.json``, ``cell.json``, ``verdict.json`` and ``eval.json`` are read and (atomically)
written, which folders are no run directories (``workspace/``, ``stale/``), the line of
``calls.jsonl`` (``CallRecord``) and its encoding (``PromptEncoder`` writes schema version 2; the
one reader, ``read_calls``/``resolve_prompts`` and ``read_message_store``/``message_store_files``,
reads versions 1 and 2, docs/schema.md "Version 2: prompt encoding"), and the content pieces of
a store line (``content_pieces`` writes them, ``read_message_files`` resolves them). Every file the readers
open goes through ``_open``. Standard library and ``ctxpolicy.atomic`` only: every room may
import it.
"""

from __future__ import annotations

import errno
import functools
import gzip
import io
import json
import operator
import os
import shutil
import secrets
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy import atomic

# ---------------------------------------------------------------- names

RUN_JSON = "run.json"  # the run record, written last; the run counts only when it says complete: true
CALLS_JSONL = "calls.jsonl"  # one CallRecord line per LLM call, appended as calls end
MESSAGES_JSONL = "messages.jsonl"  # the content-addressed message store, one line per distinct message
TRAJECTORY_JSON = "trajectory.json"  # the agent's whole history
PATCH_DIFF = "patch.diff"  # a repository task's submission
VERDICT_JSON = "verdict.json"  # written by evaluation
WORKSPACE = "workspace"  # the task's workspace folder inside a run directory

CELL_JSON = "cell.json"  # the cell record, written last by run-cell
EVAL_JSON = "eval.json"  # the cell's evaluation summary
STALE_DIR = "stale"  # complete runs run-cell --redo-stale moved aside; kept, never counted
RUN_MARKER = ".ctxpolicy-run"  # written first into every run directory: the folder is a run of ours

RUN_FILES = (RUN_JSON, CALLS_JSONL, MESSAGES_JSONL)  # any one of them marks a run directory, complete or not
RUN_OUTPUTS = (RUN_JSON, CALLS_JSONL, MESSAGES_JSONL, TRAJECTORY_JSON, PATCH_DIFF, VERDICT_JSON)  # a rerun's leftovers
# Every file a run's tables are computed from: provenance hashes each of them.
RECORD_FILES = (RUN_JSON, CALLS_JSONL, MESSAGES_JSONL, VERDICT_JSON)
SKIPPED_DIRS = frozenset({WORKSPACE, STALE_DIR})  # never searched for run directories
PARTIAL_PREFIX = ".partial-"  # a run directory being written whole (``partial_dir``): never one to read


# ---------------------------------------------------------------- layout


def run_dir_name(task_id: str, attempt: int) -> str:
    """``{task_id}__a{attempt}``: a run directory's name inside its cell directory."""
    return f"{task_id}__a{attempt}"


def cell_dir(root: str | Path, benchmark: str, model: str, cell: str) -> Path:
    """``{root}/{benchmark}/{model}/{cell}``, e.g. root ``results/runs``."""
    return Path(root) / benchmark / model / cell


def run_dir(root: str | Path, benchmark: str, model: str, cell: str, task_id: str, attempt: int) -> Path:
    """``{root}/{benchmark}/{model}/{cell}/{task_id}__a{attempt}``."""
    return cell_dir(root, benchmark, model, cell) / run_dir_name(task_id, attempt)


def is_run_dir(path: str | Path, markers: Iterable[str] = RUN_FILES) -> bool:
    """True when ``path`` is a directory holding one of ``markers`` that is no folder: the rule
    ``find_run_dirs`` finds run directories by (a marker that is a link counts as what it points
    to, a dangling one as no folder, as ``os.walk`` counts it)."""
    path, markers = os.fspath(path), tuple(markers)
    if not os.path.isdir(path):
        return False
    held = _holds_marker(path, markers)
    return _lists_marker(path, markers) if held is None else held


def find_run_dirs(roots: str | Path | Iterable[str | Path], markers: Iterable[str] = RUN_FILES) -> list[Path]:
    """Every run directory under the roots (a directory holding one of ``markers``), sorted.

    The walk never descends into a run directory (its workspace can be large), nor into
    ``workspace/``, ``stale/`` or a partial folder (``PARTIAL_PREFIX``). A root that is itself a run directory is found. A run directory
    reached twice (roots that overlap, or one given as a relative and an absolute path, or through
    a link) is listed once, by the path it was first reached by.
    Raises ``NotADirectoryError`` naming a root that is no directory.
    """
    markers = tuple(markers)
    roots = [roots] if isinstance(roots, (str, Path)) else list(roots)
    # (device, inode) -> the path first found: a run named twice counts once (one stat a run
    # directory, where resolving its path costs one per path component)
    found: dict[tuple[int, int], Path] = {}
    for root in map(Path, roots):
        if not root.is_dir():
            raise NotADirectoryError(f"{root}: no such directory")
        _walk_runs(root, markers, found)
    # by their parts: Path's own order on Python 3.11, without a Python-level __lt__ per comparison
    return sorted(found.values(), key=_PARTS)


_PARTS = operator.attrgetter("parts")


def _walk_runs(root: Path, markers: tuple[str, ...], found: dict[tuple[int, int], Path]) -> None:
    """The run directories under ``root`` into ``found``, by ``os.walk`` (links to folders not
    followed): a folder is a run directory when one of ``markers`` in it is no folder. A
    subfolder's markers are looked up by name from its parent, so a run directory is recorded
    there and never listed (listing 35,000 of them was a third of the walk); a subfolder where
    the lookup cannot tell is walked into and its listing decides."""
    for directory, subdirs, files in os.walk(root):
        if any(name in files for name in markers):
            _record(directory, found)
            subdirs.clear()
            continue
        kept = []
        for name in subdirs:
            path = os.path.join(directory, name)
            if _passed_by(path):
                continue
            if _holds_marker(path, markers):
                _record(path, found)
            else:  # no marker, or a lookup that cannot tell
                kept.append(name)
        subdirs[:] = kept


def _passed_by(folder: str | Path) -> bool:
    """Whether the search for run directories passes ``folder`` by, found inside a folder it
    searches: ``workspace/``, ``stale/``, a partial folder, a link (not followed, as ``os.walk``
    does not follow it)."""
    name = os.path.basename(folder)
    return name in SKIPPED_DIRS or name.startswith(PARTIAL_PREFIX) or os.path.islink(folder)


def _record(directory: str, found: dict[tuple[int, int], Path]) -> None:
    where = os.stat(directory)
    found.setdefault((where.st_dev, where.st_ino), Path(directory))


def _holds_marker(directory: str, markers: tuple[str, ...]) -> bool | None:
    """Whether one of ``markers`` in ``directory`` is no folder (a link counts as what it points
    to; a dangling one as no folder, as ``os.walk`` counts it); None where a lookup fails for
    another reason than that there is no such entry."""
    for name in markers:
        path = os.path.join(directory, name)
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                try:
                    mode = os.stat(path).st_mode
                except (FileNotFoundError, NotADirectoryError):
                    return True  # dangling
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
        if not stat.S_ISDIR(mode):
            return True
    return False


def _lists_marker(directory: str, markers: tuple[str, ...]) -> bool:
    """Whether ``directory``'s listing holds one of ``markers`` that is no folder, each entry taken
    as ``os.walk`` takes it (one it cannot tell is no folder); False where it cannot be listed, as
    ``os.walk`` then passes the folder by. For a folder whose markers cannot be looked up by name."""
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name in markers:
                    try:
                        folder = entry.is_dir()
                    except OSError:
                        folder = False
                    if not folder:
                        return True
    except OSError:
        return False
    return False


def runs_of_cell(cell: str | Path, markers: Iterable[str] = (RUN_JSON,)) -> list[Path]:
    """The run directories directly in a cell directory (``is_run_dir``), sorted: those
    ``find_run_dirs`` finds there. ``stale/``, ``workspace/``, a partial folder and a link are none."""
    return sorted(d for d in Path(cell).iterdir() if not _passed_by(d) and is_run_dir(d, markers))


def partial_dir(run: str | Path) -> Path:
    """A new, empty folder beside ``run`` (its parents created) to write the run into whole and then
    rename to ``run``: its name starts with ``PARTIAL_PREFIX``, so no reader ever counts it."""
    run = Path(run)
    run.parent.mkdir(parents=True, exist_ok=True)
    while True:  # os.mkdir, not mkdtemp: the folder gets the usual permissions (umask), as the run will
        folder = run.parent / f"{PARTIAL_PREFIX}{run.name}.{secrets.token_hex(4)}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue


def set_aside(run: str | Path, cell: str | Path) -> Path:
    """Move a run directory to ``{cell}/stale/`` (never over an earlier one); return where it went."""
    run = Path(run)
    folder = Path(cell) / STALE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / run.name
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{run.name}.{n}"
    shutil.move(run, target)
    return target


def owns_run_dir(path: str | Path) -> bool:
    """True when ``path`` may be (re)used for a run without ``--force``: it does not exist, is an
    empty folder, or is a run directory of ours (``RUN_MARKER`` or one of ``RUN_FILES``, complete or
    not, that is no folder: ``is_run_dir``). Any other folder holds someone else's files, which a run would delete."""
    path = Path(path)
    if not path.exists():
        return True
    if not path.is_dir():
        return False
    return is_run_dir(path, (RUN_MARKER, *RUN_FILES)) or not any(path.iterdir())


def mark_run_dir(run: str | Path) -> None:
    """Create ``run`` (and its parents) with ``RUN_MARKER`` in it: from now on it is a run of ours."""
    run = Path(run)
    run.mkdir(parents=True, exist_ok=True)
    (run / RUN_MARKER).touch()


def reset_run_dir(run: str | Path) -> None:
    """Remove what a previous, unfinished attempt at this run left behind (its verdict too)."""
    run = Path(run)
    for name in RUN_OUTPUTS:
        (run / name).unlink(missing_ok=True)
    for leftover in run.glob(f".{RUN_JSON}.*.tmp"):  # an atomic write that never finished
        leftover.unlink(missing_ok=True)
    shutil.rmtree(run / WORKSPACE, ignore_errors=True)


# ---------------------------------------------------------------- reading


class NotRegularFileError(CtxpolicyError, OSError):
    """A path a reader refuses: not a regular file (a FIFO, a device, a socket), or a symbolic link
    that leads out of the folder it must stay in. ``reason`` says which."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(reason)
        self.path, self.reason, self.strerror, self.filename = Path(path), reason, reason, str(path)

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def open_regular(path: str | Path, *, within: str | Path | None = None, encoding: str | None = None) -> IO:
    """Open ``path`` for reading only if it is a regular file (binary; text with ``encoding``).

    Raises ``NotRegularFileError`` naming the reason for a FIFO, a device or a socket (opened
    without blocking, so a FIFO nobody writes to never hangs the reader) and, with ``within``, for
    a path whose real location (links followed) lies outside that folder. A directory raises
    ``IsADirectoryError`` and a missing file ``FileNotFoundError``, as ``open`` would. Every reader
    of run records opens its files through this function.
    """
    path = Path(path)
    if within is not None and not _directly_in(path, Path(within)):
        root, real = Path(within).resolve(), path.resolve()
        if real != root and root not in real.parents:
            raise NotRegularFileError(path, f"a symbolic link out of {within} (to {real})")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _FILE_KINDS if test(mode)), "a special file")
            raise NotRegularFileError(path, f"not a regular file ({kind})")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    handle = os.fdopen(fd, "rb")
    return handle if encoding is None else io.TextIOWrapper(handle, encoding=encoding)


def _directly_in(path: Path, folder: Path) -> bool:
    """``path`` names an entry of ``folder`` that is no symbolic link (so it cannot lead out of it);
    one ``lstat``, where resolving both paths costs one per path component."""
    if path.parent != folder:
        return False
    try:
        return not stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return True  # missing: open reports it


def read_regular_bytes(path: str | Path, *, within: str | Path | None = None) -> bytes:
    """The bytes of ``path`` through ``open_regular``."""
    with open_regular(path, within=within) as handle:
        return handle.read()


class RunRecordError(CtxpolicyError, ValueError):
    """A record file that cannot be read; the message names the file and the reason."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


GZIP_MAGIC = b"\x1f\x8b"  # no JSON text starts with these bytes


def _open(path: str | Path, mode: str = "r"):
    """Open a record file for reading: the one place every reader here opens a file (text mode
    is UTF-8). Only a regular file inside its own folder is opened (``open_regular``: no FIFO,
    device or symbolic link out of the run directory). A file written gzip-compressed (a replay's
    ``messages.jsonl`` and ``calls.jsonl``, ``write_compressed``) reads as its content."""
    path = Path(path)
    handle = open_regular(path, within=path.parent)
    try:
        compressed = handle.read(2) == GZIP_MAGIC
        handle.seek(0)
        stream = _OwnedGzipFile(handle) if compressed else handle
    except BaseException:
        handle.close()
        raise
    return stream if "b" in mode else io.TextIOWrapper(stream, encoding="utf-8")


class _OwnedGzipFile(gzip.GzipFile):
    """A gzip reader that closes the file it reads from when it is closed."""

    def __init__(self, handle):
        super().__init__(fileobj=handle, mode="rb")
        self._owned = handle

    def close(self):
        try:
            super().close()
        finally:
            self._owned.close()


def read_bytes(path: str | Path) -> bytes:
    """A record file's bytes, as ``_open`` would read them (the same guard, the same errors).

    The common case costs one ``open`` and one ``fstat``: a path that is no symbolic link
    (``O_NOFOLLOW``) names an entry of its own folder, so it cannot lead out of it; a link is
    handed to ``_open``, which follows it only within the folder."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ELOOP:  # ELOOP: a symbolic link
            raise
        with _open(path, "rb") as handle:
            return handle.read()
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(status.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(status.st_mode)), "a special file")
            raise NotRegularFileError(path, f"not a regular file ({kind})")
        data = _read_to_end(fd, status.st_size)  # O_NONBLOCK does not apply to a regular file
    finally:
        os.close(fd)
    return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data


def _read_to_end(fd: int, size: int) -> bytes:
    """Everything left in ``fd``, whose ``fstat`` said ``size`` bytes (the first read asks for one
    more, so that a file that grew since is read whole too)."""
    chunks = []
    while chunk := os.read(fd, size + 1 if not chunks else 1 << 16):
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_json(path: str | Path) -> Any:
    """A JSON record file of a run or cell directory (a regular file inside its folder)."""
    with _open(path) as handle:
        return json.loads(handle.read())


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """The values of a JSON-lines file of a run directory (a regular file inside it), blank lines skipped."""
    with _open(path) as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def read_record(path: str | Path) -> dict:
    """A JSON object record file; ``RunRecordError`` when missing, not JSON or not an object."""
    path = Path(path)
    try:
        record = read_json(path)
    except FileNotFoundError:
        raise RunRecordError(path, "missing") from None
    except json.JSONDecodeError as exc:
        raise RunRecordError(path, f"not valid JSON ({exc})") from None
    except NotRegularFileError as exc:
        raise RunRecordError(path, exc.reason) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunRecordError(path, f"unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(record, dict):
        raise RunRecordError(path, f"not a JSON object ({type(record).__name__})")
    return record


def read_run_json(run: str | Path) -> dict:
    """The run's ``run.json`` (``RunRecordError`` when missing or unreadable)."""
    return read_record(Path(run) / RUN_JSON)


def read_cell_json(cell: str | Path) -> dict:
    return read_record(Path(cell) / CELL_JSON)


def trajectory_messages(run: str | Path) -> list[dict] | None:
    """The agent's whole history from the run's ``trajectory.json`` (a replay's names its source's,
    ``source_trajectory``: the agent's answers are the source's); None when there is none to read."""
    try:
        trajectory = read_json(Path(run) / TRAJECTORY_JSON)
        source = trajectory.get("source_trajectory")
        if "messages" not in trajectory and isinstance(source, str) and Path(source).name == TRAJECTORY_JSON:
            trajectory = read_json(source)
        messages = trajectory.get("messages")
    except (OSError, ValueError, AttributeError):
        return None
    return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else None


def read_verdict(run: str | Path) -> dict | None:
    """The run's ``verdict.json``, or None when it has not been graded."""
    path = Path(run) / VERDICT_JSON
    return read_record(path) if os.path.lexists(path) else None


def is_complete_run(run: str | Path) -> bool:
    """True when ``run.json`` exists, parses and says ``complete: true``: the only runs that count.
    Never raises (a run.json nested too deeply to parse is no complete run)."""
    return incomplete_reason(run) is None


STILL_OPEN = (
    "open proxy conversation: still open (it ends on its idle timeout, POST /conversations/end "
    "or the proxy's shutdown; read it again then)"
)  # why every reader leaves out a proxy conversation in progress (run.json proxy.open: true)


def incomplete_reason(run: str | Path) -> str | None:
    """Why ``run`` does not count (its ``run.json`` missing, unreadable, nested too deeply, not an
    object, ``complete`` not true, or an open proxy conversation: ``STILL_OPEN``), or None when it
    is complete. Never raises."""
    path = Path(run) / RUN_JSON
    try:
        record = read_json(path)
    except FileNotFoundError:
        return f"{RUN_JSON} missing: the run has not finished, or it was killed"
    except NotRegularFileError as exc:
        return f"{RUN_JSON}: {exc.reason}"
    except json.JSONDecodeError as exc:
        return f"{RUN_JSON}: not valid JSON ({exc.msg} at line {exc.lineno})"
    except RecursionError:
        return f"{RUN_JSON}: nested too deeply to read"
    except UnicodeDecodeError as exc:
        return f"{RUN_JSON}: not UTF-8 (at byte {exc.start})"
    except (OSError, ValueError, MemoryError) as exc:
        return f"{RUN_JSON}: unreadable ({type(exc).__name__}: {getattr(exc, 'strerror', None) or exc})"
    if not isinstance(record, dict):
        return f"{RUN_JSON}: not a JSON object ({type(record).__name__})"
    if record.get("complete") is True:
        return None
    proxy = record.get("proxy")
    if isinstance(proxy, dict) and proxy.get("open") is True:
        return STILL_OPEN
    complete = record.get("complete")
    shown = repr(complete) if isinstance(complete, (bool, int, float, type(None))) else type(complete).__name__
    return f"{RUN_JSON}: field complete is {shown}, not true"


@dataclass(frozen=True)
class LeftOut:
    """A run directory a reader leaves out, and why (one line: ``PATH: reason``)."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class RunTree:
    """The run directories under some roots: the complete ones, in order, and every other one left
    out with its reason. ``audit``, ``cost --runs`` and ``view`` read a tree through ``read_tree``;
    the aggregate reports its left-out runs alike (``metrics.records``)."""

    runs: list[Path] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)

    def leave_out(self, path: str | Path, reason: str) -> None:
        """A run that turned out unreadable later (a reader's own check): moved to ``left_out``."""
        path = Path(path)
        self.runs = [run for run in self.runs if run != path]
        self.left_out.append(LeftOut(path, reason))


def read_tree(roots: str | Path | Iterable[str | Path], markers: Iterable[str] = RUN_FILES) -> RunTree:
    """Every run directory under the roots (``find_run_dirs``) sorted into complete runs and runs
    left out by path and reason (``incomplete_reason``). Never raises for a run; a root that is no
    directory raises ``NotADirectoryError`` naming it."""
    tree = RunTree()
    for run in find_run_dirs(roots, markers):
        reason = incomplete_reason(run)
        if reason is None:
            tree.runs.append(run)
        else:
            tree.left_out.append(LeftOut(run, reason))
    return tree


# ---------------------------------------------------------------- writing (atomic)


RECORD_LAYOUT = {"indent": 2, "ensure_ascii": False, "default": str}  # run.json, cell.json, trajectory.json
GRADING_LAYOUT = {"indent": 2, "sort_keys": True, "ensure_ascii": False}  # verdict.json, eval.json


def write_record(path: str | Path, data: Any, durable: bool = True) -> Path:
    """A run or cell record file, atomically, in the records' layout (indented, UTF-8 as is,
    anything JSON cannot hold as ``str``); ``durable=False`` skips the fsyncs (still atomic)."""
    return atomic.atomic_write_json(path, data, durable=durable, **RECORD_LAYOUT)


def write_run_json(run: str | Path, record: dict, durable: bool = True) -> Path:
    """``run.json``, atomically: write it last, it is what makes the run count. ``durable=False``
    is for progress records rewritten often (an open proxy conversation's, after every call)."""
    return write_record(Path(run) / RUN_JSON, record, durable=durable)


def write_cell_json(cell: str | Path, record: dict) -> Path:
    return write_record(Path(cell) / CELL_JSON, record)


def write_verdict(run: str | Path, verdict: dict) -> Path:
    """``verdict.json`` (``{"resolved", "harness", "report", "log"}``), atomically, sorted keys."""
    return atomic.atomic_write_json(Path(run) / VERDICT_JSON, verdict, **GRADING_LAYOUT)


def write_eval_json(cell: str | Path, summary: dict) -> Path:
    return atomic.atomic_write_json(Path(cell) / EVAL_JSON, summary, **GRADING_LAYOUT)


# ---------------------------------------------------------------- calls.jsonl


CALL_KINDS = ("agent", "summary")
CALL_STATUSES = ("ok", "error")


_CALL_TIMES = ("index", "step", "start", "end", "latency_s")
_CALL_PROMPT = ("est_tokens_before", "est_tokens_after", "message_ids", "events", "attempts")


def _same(names: dict, *groups: tuple[str, ...]) -> dict:
    """The builder arguments that pass through to ``CallRecord.answered`` unchanged."""
    return {name: names[name] for group in groups for name in group}


@dataclass(kw_only=True)
class CallRecord:
    """One line of ``calls.jsonl``: one LLM call of a run (agent harness, proxy or replay alike).

    Fields are written in this order; ``src/ctxpolicy/schemas/call.schema.json`` gives their
    types. Token counts named ``est_*`` are local cl100k_base counts, the others the server's.
    """

    index: int = -1
    """Position of the line in calls.jsonl, from 0 (``RunRecorder`` numbers the calls it appends)."""
    kind: str
    """``agent`` (the agent's own call) or ``summary`` (one a compression stage made)."""
    step: int
    """The agent step, from 1; a step's summary calls come before its agent call and share its step."""
    start: float
    """Wall-clock start, seconds since the epoch."""
    end: float
    """Wall-clock end, seconds since the epoch."""
    latency_s: float
    """Duration of the call (all its attempts), seconds."""
    status: str
    """``ok`` or ``error``."""
    error: str | None
    """Why the call failed; null when it succeeded."""
    prompt_tokens: int | None
    """Prompt tokens as the server counted them; null when it failed or did not say."""
    completion_tokens: int | None
    """Completion tokens as the server counted them; null when it failed or did not say."""
    cached_tokens: int | None
    """Prompt tokens the server served from its cache; null when it did not say."""
    est_tokens_before: int
    """Local count of the history before this step's compression (agent), or of the request (summary)."""
    est_tokens_after: int
    """Local count of what was sent (equal to ``est_tokens_before`` when nothing fired)."""
    message_ids: list[str]
    """The ids (in ``messages.jsonl``) of the messages sent, in order."""
    events: list[dict]
    """The compression events of this step (agent calls; empty for summary calls)."""
    attempts: int | None = None
    """HTTP attempts the call took, retries included; null where unknown (replay)."""
    finish_reason: str | None = None
    """The server's finish reason; null where it did not say."""
    model: str | None = None
    """The model the server named in its answer; null where it did not say."""
    usage_source: str | None = field(default=None, metadata={"omitted_when_null": True})
    """``local`` when the proxy's upstream reported no usage and the counts are local; the key is
    left out of the line otherwise."""
    reply_id: str | None = field(default=None, metadata={"omitted_when_null": True})
    """The id (in ``messages.jsonl``) of the model's answer to this call, where the writer knows it
    (the proxy); the key is left out otherwise. A reply repeated word for word shares its id with
    the earlier one: walk the calls, not the store, to count each."""
    provider_cost_usd: float | None = field(default=None, metadata={"omitted_when_null": True})
    """The call's price in US dollars, where the source gives one (imported runs: OpenRouter's
    ``extra.response.usage.cost``, or mini-swe-agent's ``extra.cost``); the key is left out otherwise."""
    price_source: str | None = field(default=None, metadata={"omitted_when_null": True})
    """Who set ``provider_cost_usd``: ``provider`` (the bill, as the answer's usage carries it) or
    ``agent`` (the harness priced the call itself); the key is left out without a price."""

    @classmethod
    def answered(
        cls,
        *,
        step: int,
        start: float | None,
        end: float | None,
        latency_s: float | None,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        cached_tokens: int | None,
        est_tokens_before: int,
        est_tokens_after: int,
        message_ids: list[str],
        events: list[dict],
        attempts: int | None = None,
        finish_reason: str | None = None,
        model: str | None = None,
        usage_source: str | None = None,
        reply_id: str | None = None,
        provider_cost_usd: float | None = None,
        price_source: str | None = None,
        index: int = -1,
        status: str = "ok",
        error: str | None = None,
        kind: str = "agent",
    ) -> CallRecord:
        """An agent call the model answered (harness, proxy, replay, importer alike); a replayed
        call keeps its source's status and error. ``failed`` and ``summary`` build through it."""
        return cls(
            index=index,
            kind=kind,
            step=step,
            start=start,
            end=end,
            latency_s=latency_s,
            status=status,
            error=error,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cached_tokens=cached_tokens,
            est_tokens_before=est_tokens_before,
            est_tokens_after=est_tokens_after,
            message_ids=message_ids,
            events=events,
            attempts=attempts,
            finish_reason=finish_reason,
            model=model,
            usage_source=usage_source,
            reply_id=reply_id,
            provider_cost_usd=provider_cost_usd,
            price_source=price_source,
        )

    @classmethod
    def failed(
        cls,
        *,
        kind: str,
        step: int,
        start: float,
        end: float,
        latency_s: float,
        error: str,
        est_tokens_before: int,
        est_tokens_after: int,
        message_ids: list[str],
        events: list[dict],
        attempts: int | None = None,
        index: int = -1,
    ) -> CallRecord:
        """A call that got no usable answer: no server counts, the reason in ``error``."""
        none = dict(prompt_tokens=None, completion_tokens=None, cached_tokens=None)
        return cls.answered(
            kind=kind, status="error", error=error, **none, **_same(locals(), _CALL_TIMES, _CALL_PROMPT)
        )

    @classmethod
    def summary(
        cls,
        *,
        step: int,
        start: float,
        end: float,
        latency_s: float,
        error: str | None,
        prompt_tokens: int | None,
        completion_tokens: int | None,
        cached_tokens: int | None,
        request_tokens: int,
        message_ids: list[str],
        attempts: int | None,
        model: str | None,
        index: int = -1,
    ) -> CallRecord:
        """A summarizer call a compression stage made; its local estimate is the request's count."""
        return cls.answered(
            kind="summary",
            status="error" if error else "ok",
            error=error,
            est_tokens_before=request_tokens,
            est_tokens_after=request_tokens,
            events=[],
            **_same(locals(), _CALL_TIMES, ("prompt_tokens", "completion_tokens", "cached_tokens", "message_ids")),
            attempts=attempts,
            model=model,
        )

    def to_json(self) -> dict:
        """The line as a dict, keys in field order (the values are not copied)."""
        line = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("omitted_when_null"):
                continue
            line[f.name] = value
        return line

    def line(self) -> str:
        """The JSON line, newline included."""
        return json.dumps(self.to_json(), ensure_ascii=False, default=str) + "\n"

    def numbered(self, index: int) -> CallRecord:
        return replace(self, index=index)


CALL_FIELDS = tuple(f.name for f in fields(CallRecord))


# ---------------------------------------------------------------- calls.jsonl, schema version 2
#
# Version 1 wrote every prompt whole (``message_ids``): quadratic in a run's length. Version 2
# writes ``prompt`` = {"base": the index of an earlier line of the same file or null, "keep": how
# many leading ids of that line's prompt are kept, "add": the ids that follow}; the prompt is
# base[:keep] + add. A replayed run's messages.jsonl holds only the messages its policy wrote and
# run.json's ``message_base`` names the run whose store it extends (docs/schema.md).

CALLS_SCHEMA_VERSION = 2  # the version every writer's calls.jsonl and messages.jsonl follow
PROMPT = "prompt"  # the version-2 key of a call line's prompt
MESSAGE_IDS = "message_ids"  # the version-1 key (and every reader's resolved, whole prompt)
MESSAGE_BASE = "message_base"  # run.json: {"run": path relative to the run dir, "sha256": of its messages.jsonl}
MAX_BASE_DEPTH = 8  # message stores chained deeper than this are refused (a loop, most likely)


def _common_prefix(a: list[str], b: list[str]) -> int:
    if len(a) <= len(b) and b[: len(a)] == a:  # the usual case: the prompt extends the earlier one
        return len(a)
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PromptEncoder:
    """Writes a run's ``CallRecord``s as version-2 ``calls.jsonl`` lines, one run at a time.

    Each prompt is encoded against the last line of each kind (agent, summary) written so far:
    the one sharing the longest prefix is the base, the rest is listed. Under FC a line lists
    the two messages of the round; after a truncation it lists the kept tail once. The
    harness's and the proxy's ``RunRecorder`` and the replay's writer call it; nothing else needs
    to know the encoding."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[int, list[str]]] = {}

    def encode(self, call: CallRecord) -> dict:
        """The line of ``call`` (numbered: its ``index`` is final) as a dict, keys in field order."""
        return self.encode_line(call.to_json())

    def encode_line(self, line: dict) -> dict:
        """A version-1 line (a dict with ``index``, ``kind`` and ``message_ids``) in version 2:
        ``message_ids`` replaced by ``prompt`` in its place, every other key kept in order."""
        ids = list(line[MESSAGE_IDS])
        base, keep = None, 0
        for index, prompt in self._last.values():
            shared = _common_prefix(prompt, ids)
            if shared > keep:
                base, keep = index, shared
        self._last[line["kind"]] = (line["index"], ids)
        return {
            (PROMPT if name == MESSAGE_IDS else name): (
                {"base": base, "keep": keep, "add": ids[keep:]} if name == MESSAGE_IDS else value
            )
            for name, value in line.items()
        }

    def line(self, call: CallRecord) -> str:
        """The JSON line of ``call``, newline included."""
        return json.dumps(self.encode(call), ensure_ascii=False, default=str) + "\n"


def _bad(path: Path, number: int, line: dict, name: str, value: Any, why: str) -> RunRecordError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return RunRecordError(path, f"line {number} (call {line.get('index')!r}): field {name} is {shown}: {why}")


def resolve_prompts(lines: Iterable[dict], path: str | Path = CALLS_JSONL) -> list[list[str] | None]:
    """The whole prompt (message ids, in order) of each call line, versions 1 and 2 alike; None
    for a line with neither ``message_ids`` nor ``prompt`` (``ctxpolicy cost -i`` input may omit
    them). ``RunRecordError`` names the line, the field and the value of a prompt that cannot be
    resolved (a base that is no earlier line, a keep beyond the base's length, ids not strings)."""
    path = Path(path)
    by_index: dict[Any, list[str] | None] = {}
    prompts: list[list[str] | None] = []
    for number, line in enumerate(lines, 1):
        encoded = line.get(PROMPT)
        if encoded is None:
            ids = line.get(MESSAGE_IDS)
            if ids is not None and not isinstance(ids, list):
                raise _bad(path, number, line, MESSAGE_IDS, ids, "not an array")
        else:
            if not isinstance(encoded, dict):
                raise _bad(path, number, line, PROMPT, encoded, "not an object")
            base, keep, add = encoded.get("base"), encoded.get("keep"), encoded.get("add")
            if not isinstance(add, list) or not all(isinstance(i, str) for i in add):
                raise _bad(path, number, line, "prompt.add", add, "not an array of message ids")
            if not isinstance(keep, int) or isinstance(keep, bool) or keep < 0:
                raise _bad(path, number, line, "prompt.keep", keep, "not an integer >= 0")
            if base is None:
                if keep:
                    raise _bad(path, number, line, "prompt.keep", keep, "not 0 without a base")
                ids = add
            else:
                numeric = isinstance(base, (int, float)) and not isinstance(base, bool)  # [] or {} hash not
                earlier = by_index.get(base) if numeric else None
                if earlier is None:
                    raise _bad(path, number, line, "prompt.base", base, "no earlier call line has that index")
                if keep > len(earlier):
                    raise _bad(path, number, line, "prompt.keep", keep, f"more than base's {len(earlier)} ids")
                ids = earlier[:keep] + add
        key = line.get("index")
        if isinstance(key, int) and not isinstance(key, bool):
            by_index[key] = ids
        prompts.append(ids)
    return prompts


def read_call_lines(run: str | Path) -> list[dict]:
    """``calls.jsonl`` of a run directory as written (either version); ``RunRecordError`` when
    missing or not JSON lines of objects."""
    path = Path(run) / CALLS_JSONL
    lines = _read_jsonl_file(path)
    for number, line in enumerate(lines, 1):
        if not isinstance(line, dict):
            raise RunRecordError(path, f"line {number}: not a JSON object")
    return lines


def with_prompts(lines: list[dict], path: str | Path = CALLS_JSONL) -> list[dict]:
    """The call lines with ``message_ids`` holding each whole prompt (``prompt`` dropped): what
    every reader sees, whichever version was written. Lines are copied, not changed."""
    out = []
    for line, ids in zip(lines, resolve_prompts(lines, path)):
        resolved = {k: v for k, v in line.items() if k != PROMPT}
        if ids is not None:
            resolved[MESSAGE_IDS] = ids
        out.append(resolved)
    return out


def read_calls(run: str | Path) -> list[dict]:
    """A run's calls, in file order, each with its whole prompt as ``message_ids`` (versions 1
    and 2)."""
    return with_prompts(read_call_lines(run), Path(run) / CALLS_JSONL)


def message_base(run: str | Path, record: dict | None = None) -> Path | None:
    """The run directory whose message store this run's extends (run.json ``message_base``), or
    None. A run without run.json yet (still being written) has none. ``record``: the run's
    run.json already read (then it is not read again)."""
    run = Path(run)
    path = run / RUN_JSON
    if record is None:
        try:
            status = os.stat(path)
        except (OSError, ValueError):  # as Path.is_file: no such file, no run.json yet
            return None
        if not stat.S_ISREG(status.st_mode):
            return None
        record = _run_record(path, status.st_mtime_ns, status.st_size, status.st_ino)
    base = record.get(MESSAGE_BASE)
    if base is None:
        return None
    if not isinstance(base, dict) or not isinstance(base.get("run"), str) or not base["run"]:
        raise RunRecordError(path, f"field {MESSAGE_BASE} is {base!r}: not an object with a run path")
    return Path(os.path.normpath(run / base["run"]))


@functools.lru_cache(maxsize=64)
def _run_record(path: Path, mtime_ns: int, size: int, inode: int) -> dict:
    """``read_record`` of a run.json, once per process while the file is unchanged: a source run's
    is read for every one of its replays (one per configuration). Only ``message_base`` reads
    it, and only for the chain, so the shared dict is never changed."""
    return read_record(path)


def message_store_files(run: str | Path, record: dict | None = None) -> list[Path]:
    """The ``messages.jsonl`` files that together make a run's message store: its own, then
    those of the runs its ``message_base`` chain names (``record``: the run's run.json already
    read). ``RunRecordError`` for a chain that loops, runs deeper than ``MAX_BASE_DEPTH`` or
    names a run without a store."""
    run = Path(run)
    files = [run / MESSAGES_JSONL]
    if record is not None and record.get(MESSAGE_BASE) is None:
        return files
    seen = {os.path.abspath(run)}
    current = run
    while (base := message_base(current, record if current is run else None)) is not None:
        if os.path.abspath(base) in seen or len(files) > MAX_BASE_DEPTH:
            raise RunRecordError(current / RUN_JSON, f"field {MESSAGE_BASE}.run names {base}: a loop or too deep")
        if not (base / MESSAGES_JSONL).is_file():
            raise RunRecordError(
                current / RUN_JSON, f"field {MESSAGE_BASE}.run names {base}, which has no {MESSAGES_JSONL}"
            )
        seen.add(os.path.abspath(base))
        files.append(base / MESSAGES_JSONL)
        current = base
    return files


# ---------------------------------------------------------------- messages.jsonl, content pieces
#
# A store line may give its message's content as ``content_pieces`` (schema version 2, optional):
# a list of literal strings and references {"id", "start", "end"} to the content of another
# message of the same store (its own file or a base's), ``content[start:end]``; the message is
# the line's ``message`` with ``content`` set to the concatenation. A replay's summary requests
# repeat its source's messages verbatim: they are written as pieces (docs/schema.md). An
# assistant message is never written in pieces (the tables read its commands straight from the
# file), and every other reader sees resolved lines only.

CONTENT_PIECES = "content_pieces"
MIN_PIECE_CHARS = 256  # copied text shorter than this is written as it is
_MAX_PIECE_DEPTH = 8  # references to pieced contents chained deeper than this are refused


def content_pieces(text: str, sources: Iterable[tuple[str, str]]) -> list | None:
    """``text`` as ``content_pieces`` against ``sources``, (id, content) pairs in the order their
    contents are expected in ``text``: each content (less its surrounding blanks) found at or
    after the previous find becomes a reference; None when none of ``MIN_PIECE_CHARS`` or more
    is found. Joining the pieces (``read_message_files``) gives ``text`` back exactly."""
    pieces: list = []
    at = 0
    for mid, content in sources:
        start = len(content) - len(content.lstrip())
        end = len(content.rstrip())
        if end - start < MIN_PIECE_CHARS:
            continue
        found = text.find(content[start:end] if start or end < len(content) else content, at)
        if found < 0:
            continue
        if found > at:
            pieces.append(text[at:found])
        pieces.append({"id": mid, "start": start, "end": end})
        at = found + end - start
    if not pieces:
        return None
    if at < len(text):
        pieces.append(text[at:])
    return pieces


def pieced_line(line: dict, pieces: list) -> dict:
    """A store line (``{"id", "tokens", "message"}``) with its content written as ``pieces``."""
    message = {k: v for k, v in line["message"].items() if k != "content"}
    return {**{k: v for k, v in line.items() if k != "message"}, "message": message, CONTENT_PIECES: pieces}


def _read_jsonl_file(path: Path) -> list[dict]:
    """The lines of a JSON-lines record file; ``RunRecordError`` when missing, not JSON or unreadable."""
    try:
        lines = list(read_jsonl(path))
    except FileNotFoundError:
        raise RunRecordError(path, "missing") from None
    except json.JSONDecodeError as exc:
        raise RunRecordError(path, f"not valid JSON lines ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunRecordError(path, f"unreadable ({type(exc).__name__}: {exc})") from None
    return lines


_BASE_CACHE_FILES = 4  # base stores kept parsed (the replays of one source share its store)
_base_cache: dict[tuple, list[dict]] = {}


def _read_base_file(path: Path) -> list[dict]:
    """A base run's store lines, parsed once per process for as long as the file is unchanged
    (the readers of a source's replays, one per configuration, share it). Never mutate them."""
    try:
        stat_ = os.stat(path)
    except OSError:
        return _read_jsonl_file(path)  # which names the reason
    key = (os.path.abspath(path), stat_.st_mtime_ns, stat_.st_size, stat_.st_ino)
    lines = _base_cache.get(key)
    if lines is None:
        lines = _read_jsonl_file(path)
        while len(_base_cache) >= _BASE_CACHE_FILES:
            _base_cache.pop(next(iter(_base_cache)))
        _base_cache[key] = lines
    return lines


def read_message_files(run: str | Path) -> list[tuple[Path, list[dict]]]:
    """Each file of a run's message store (``message_store_files``) with its lines, every
    ``content_pieces`` line resolved into a plain ``{"id", "tokens", "message"}`` line (a new
    object; the others as parsed). ``RunRecordError`` names the file, line and field of a piece
    that cannot be resolved."""
    files = message_store_files(run)
    parsed = [(path, _read_jsonl_file(path) if n == 0 else _read_base_file(path)) for n, path in enumerate(files)]
    index: dict[str, tuple[Path, int, dict]] = {}
    pieced = False
    for path, lines in parsed:
        for number, line in enumerate(lines, 1):
            if isinstance(line, dict) and isinstance(line.get("id"), str):
                index.setdefault(line["id"], (path, number, line))
                pieced = pieced or CONTENT_PIECES in line
    if not pieced:
        return parsed
    resolved: dict[str, str] = {}
    out = []
    for path, lines in parsed:
        out.append((path, [_resolved_line(line, index, resolved) for line in lines]))
    return out


def _resolved_line(line: Any, index: dict, resolved: dict[str, str]) -> Any:
    if not isinstance(line, dict) or CONTENT_PIECES not in line:
        return line
    content = _content_of(line["id"], index, resolved, 0)
    message = line.get("message")
    message = {**(message if isinstance(message, dict) else {}), "content": content}
    return {**{k: v for k, v in line.items() if k not in (CONTENT_PIECES, "message")}, "message": message}


def _content_of(mid: str, index: dict, resolved: dict[str, str], depth: int) -> Any:
    if mid in resolved:
        return resolved[mid]
    path, number, line = index[mid]
    if CONTENT_PIECES not in line:
        message = line.get("message")
        return message.get("content") if isinstance(message, dict) else None
    where = f"line {number} (message {mid})"
    if isinstance(line.get("message"), dict) and line["message"].get("role") == "assistant":
        raise RunRecordError(path, f"{where}: field {CONTENT_PIECES} on an assistant message (never written in pieces)")
    if depth > _MAX_PIECE_DEPTH:
        raise RunRecordError(path, f"{where}: field {CONTENT_PIECES} references chain deeper than {_MAX_PIECE_DEPTH}")
    pieces = line[CONTENT_PIECES]
    if not isinstance(pieces, list):
        raise RunRecordError(path, f"{where}: field {CONTENT_PIECES} is {_short(pieces)}: not an array")
    parts = []
    for k, piece in enumerate(pieces):
        name = f"{CONTENT_PIECES}[{k}]"
        if isinstance(piece, str):
            parts.append(piece)
            continue
        if not isinstance(piece, dict) or not isinstance(piece.get("id"), str):
            raise RunRecordError(path, f"{where}: field {name} is {_short(piece)}: not a string or a reference")
        if piece["id"] not in index:
            raise RunRecordError(path, f"{where}: field {name}.id is {piece['id']!r}: no message of the store")
        target = _content_of(piece["id"], index, resolved, depth + 1)
        if not isinstance(target, str):
            raise RunRecordError(path, f"{where}: field {name}.id is {piece['id']!r}: its content is no string")
        start, end = piece.get("start"), piece.get("end")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)) or not (
            0 <= start <= end <= len(target)
        ):
            raise RunRecordError(
                path, f"{where}: field {name} is {_short(piece)}: start and end not within its {len(target)} characters"
            )
        parts.append(target[start:end])
    resolved[mid] = "".join(parts)
    return resolved[mid]


def _short(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def read_message_lines(run: str | Path) -> list[dict]:
    """Every line of a run's message store (its own ``messages.jsonl`` first, then its bases'),
    content pieces resolved."""
    return [line for _, lines in read_message_files(run) for line in lines]


def read_message_store(run: str | Path) -> dict[str, dict]:
    """Message id -> its store line (``{"id", "tokens", "message"}``), bases included."""
    store: dict[str, dict] = {}
    for line in read_message_lines(run):
        if isinstance(line, dict) and isinstance(line.get("id"), str):
            store.setdefault(line["id"], line)
    return store


def message_base_record(run: str | Path, base: str | Path, digest: str) -> dict:
    """run.json's ``message_base`` for a run at ``run`` whose store extends ``base``'s (whose
    ``messages.jsonl`` has sha256 ``digest``): the path is relative, so a moved results tree
    keeps it."""
    return {"run": os.path.relpath(os.path.abspath(base), os.path.abspath(run)), "sha256": digest}


def write_compressed(path: str | Path, data: bytes, durable: bool = True) -> Path:
    """A record file gzip-compressed (no timestamp: the same content gives the same bytes),
    atomically; every reader here reads it as its content (``_open``)."""
    return atomic.atomic_write_bytes(path, gzip.compress(data, compresslevel=6, mtime=0), durable)
