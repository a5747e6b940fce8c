"""The run directory and the cell directory: file names, layout, completeness, records.

This is the one definition of the contract in docs/architecture.md ("Run directory", "Cells and
the grid"): what the files are called, where a run directory lies, when it counts as complete,
how ``run.json``, ``cell.json``, ``verdict.json`` and ``eval.json`` are read and (atomically)
written, which folders are no run directories (``workspace/``, ``stale/``), and the line of
``calls.jsonl`` (``CallRecord``). Standard library and ``ctxpolicy.atomic`` only: every room may
import it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any

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
    """True when ``path`` is a directory holding one of ``markers``."""
    path = Path(path)
    return path.is_dir() and any((path / name).exists() for name in markers)


def find_run_dirs(roots: str | Path | Iterable[str | Path], markers: Iterable[str] = RUN_FILES) -> list[Path]:
    """Every run directory under the roots (a directory holding one of ``markers``), sorted.

    The walk never descends into a run directory (its workspace can be large), nor into
    ``workspace/`` or ``stale/``. A root that is itself a run directory is found. A run directory
    reached twice (roots that overlap, or one given as a relative and an absolute path, or through
    a link) is listed once, by the path it was first reached by.
    Raises ``NotADirectoryError`` naming a root that is no directory.
    """
    markers = tuple(markers)
    roots = [roots] if isinstance(roots, (str, Path)) else list(roots)
    found: dict[Path, Path] = {}  # resolved path -> the path first found: a run named twice counts once
    for root in map(Path, roots):
        if not root.is_dir():
            raise NotADirectoryError(f"{root}: no such directory")
        for directory, subdirs, files in os.walk(root):
            if any(name in files for name in markers):
                found.setdefault(Path(directory).resolve(), Path(directory))
                subdirs.clear()
            else:
                subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS]
    return sorted(found.values())


def runs_of_cell(cell: str | Path, markers: Iterable[str] = (RUN_JSON,)) -> list[Path]:
    """The run directories directly in a cell directory (those holding one of ``markers``), sorted;
    ``stale/`` and ``workspace/`` are none."""
    return sorted(d for d in Path(cell).iterdir() if d.name not in SKIPPED_DIRS and is_run_dir(d, markers))


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
    not). Any other folder holds someone else's files, which a run would delete."""
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


class NotRegularFileError(OSError):
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


class RunRecordError(ValueError):
    """A record file that cannot be read; the message names the file and the reason."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = Path(path), reason


def read_json(path: str | Path) -> Any:
    """A JSON record file of a run or cell directory (a regular file inside its folder)."""
    path = Path(path)
    return json.loads(read_regular_bytes(path, within=path.parent).decode("utf-8"))


def read_jsonl(path: str | Path) -> Iterator[dict]:
    """The values of a JSON-lines file of a run directory (a regular file inside it), blank lines skipped."""
    path = Path(path)
    with open_regular(path, within=path.parent, encoding="utf-8") as handle:
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


def read_verdict(run: str | Path) -> dict | None:
    """The run's ``verdict.json``, or None when it has not been graded."""
    path = Path(run) / VERDICT_JSON
    return read_record(path) if os.path.lexists(path) else None


def is_complete_run(run: str | Path) -> bool:
    """True when ``run.json`` exists, parses and says ``complete: true``: the only runs that count."""
    try:
        return read_json(Path(run) / RUN_JSON).get("complete") is True
    except (OSError, ValueError, AttributeError):
        return False


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
