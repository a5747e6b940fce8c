"""ctxpolicy import: public agent trajectories as FC run directories of the ``imported`` track.

  ctxpolicy import -i TRAJECTORIES [TRAJECTORIES ...] --benchmark NAME --model NAME
      [--format auto|mini-swe-agent|swe-agent|openai] [--verdicts REPORT] --out RUNS_ROOT

Each trajectory becomes ``RUNS_ROOT/{benchmark}/{model}/imported/{task}__a1`` (a second trajectory
of the same task ``__a2``, and so on; a file imported before, same sha256, is left as it is).
``-i`` takes files and folders; folders are searched recursively for ``*.traj.json``, ``*.traj``
and ``*.jsonl`` (and ``*.json`` with ``--format openai``); a symbolic link out of the folder
given, a link to a folder, and special files (FIFOs, devices, sockets) are never read: each is
named and skipped, as a special file given on the command line is. A file that cannot be read,
whatever the reason (not JSON, nested too deeply, not UTF-8, a field of the wrong type, larger
than 512 MiB), is one line on stderr naming the file and the field, never the file's text beyond
what was parsed; the others are imported, and the exit code is 1 when anything was skipped. A run
directory appears whole or not at all. See docs/import.md.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError, UsageError

ERROR_PREFIX = "import: "  # cli.main starts our error lines with it
SEARCHED = ("*.traj.json", "*.traj", "*.jsonl")


class ImportArgumentError(UsageError):
    """Bad arguments or a --verdicts report that cannot be used: one line, exit code 2."""


def add_arguments(parser) -> None:
    from ctxpolicy.cli_args import add_input, add_out
    from ctxpolicy.importing.formats import AUTO, names

    add_input(parser, "trajectory files or folders (searched recursively)", required=True)
    parser.add_argument("--format", default=AUTO, help=f"{AUTO} (default) | {' | '.join(names())}")
    parser.add_argument("--benchmark", required=True, help="the benchmark the trajectories ran on (e.g. swe-bench)")
    parser.add_argument("--model", required=True, help="the model name the runs are filed under")
    parser.add_argument(
        "--verdicts", type=Path, help="a SWE-bench report: resolved_ids JSON, per-instance JSON, or CSV"
    )
    add_out(parser, "the runs root (e.g. results/runs)", required=True)


MAX_FILE_BYTES = 512 * 1024 * 1024  # a trajectory larger than this is skipped, never read whole


@dataclass(frozen=True)
class Source:
    """One file to import, and the folder given on the command line it was found in (None: the
    file itself was given), which its real location must stay inside."""

    path: Path
    within: Path | None = None


def trajectory_files(inputs: list[str], fmt: str) -> tuple[list[Source], list[str]]:
    """The files to import (sorted, each once) and one problem line per input that cannot be:
    missing, not a regular file (a FIFO, a device, a socket), or, found in a folder, a symbolic
    link that leads out of that folder. Links to folders are not followed."""
    from ctxpolicy.importing.formats import TABLE

    patterns = SEARCHED + (TABLE[fmt].patterns if fmt in TABLE else ())
    files: dict[Path, Source] = {}
    problems = []
    for item in map(Path, inputs):
        if item.is_dir():
            found, skipped = _search(item, patterns)
            problems += skipped
            if not found and not skipped:
                problems.append(f"{item}: no trajectory files ({', '.join(patterns)}) in this folder")
            for path in found:
                files.setdefault(path.resolve(), Source(path, item))
        elif not os.path.lexists(item):
            problems.append(f"{item}: no such file or folder")
        elif (kind := _special(item)) is not None:
            problems.append(f"{item}: not a regular file ({kind})")
        else:
            files.setdefault(item.resolve(), Source(item))
    return list(files.values()), problems


def _search(folder: Path, patterns: tuple[str, ...]) -> tuple[list[Path], list[str]]:
    """The trajectory files under ``folder`` (no link out of it followed), and a line for each
    entry that matches a pattern but is skipped."""
    root = folder.resolve()
    found, skipped = [], []
    for directory, subdirs, names in os.walk(folder):  # links to folders: listed in subdirs, never entered
        subdirs.sort()
        for name in sorted(names + [d for d in subdirs if (Path(directory) / d).is_symlink()]):
            path = Path(directory) / name
            if not any(fnmatch.fnmatch(name, pattern) for pattern in patterns):
                continue
            if path.is_symlink():
                real = path.resolve()
                if real != root and root not in real.parents:
                    skipped.append(f"{path}: a symbolic link out of {folder}: not followed")
                    continue
            if path.is_dir():
                continue
            kind = _special(path)
            if kind is not None:
                skipped.append(f"{path}: not a regular file ({kind})")
                continue
            found.append(path)
    return found, skipped


def _special(path: Path) -> str | None:
    """What kind of special file ``path`` is (links followed), or None for a regular file."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "a special file"


def read_source(source: Source) -> bytes:
    """The bytes of one file (a regular file, inside its folder), at most ``MAX_FILE_BYTES``;
    ``ImportProblem`` otherwise."""
    from ctxpolicy.rundir import NotRegularFileError, open_regular

    try:
        with open_regular(source.path, within=source.within) as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except NotRegularFileError as exc:
        raise ImportProblem(exc.reason) from None
    except OSError as exc:
        raise ImportProblem(f"unreadable ({exc.strerror or type(exc).__name__})") from None
    if len(data) > MAX_FILE_BYTES:
        raise ImportProblem(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB: not read")
    return data


class ImportProblem(CtxpolicyError):
    """One file that cannot be imported: the reason, without the file's content."""


def decoded(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportProblem(f"not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def main(args) -> int:
    from tqdm import tqdm

    from ctxpolicy.importing.formats import AUTO, FormatProblem, names, read_trajectories
    from ctxpolicy.importing.verdicts import VerdictsError, read_verdicts
    from ctxpolicy.importing.writer import existing_attempt, write_imported_run

    if args.format not in (AUTO, *names()):
        raise ImportArgumentError(f"--format is {args.format!r}; allowed: {AUTO}, {', '.join(names())}")
    for name, value in (("--benchmark", args.benchmark), ("--model", args.model)):
        if not value or "/" in value or value.startswith("."):
            raise ImportArgumentError(f"{name} is {value!r}; expected a plain name (no '/')")
    try:
        verdicts = read_verdicts(args.verdicts) if args.verdicts else None
    except VerdictsError as exc:  # a --verdicts report we cannot use: the user's to fix
        raise ImportArgumentError(str(exc)) from None
    root = Path(args.out)
    files, problems = trajectory_files(args.input, args.format)
    for line in problems:
        print(f"import: skipped {line}", file=sys.stderr)
    imported = already = skipped = 0
    warned = 0
    bar = tqdm(files, desc="import", unit="file", disable=not sys.stderr.isatty() or len(files) < 20)
    for source in bar:
        path = source.path
        written: list = []
        try:  # one file's failure, whatever it is, is one line; the other files are imported
            data = read_source(source)
            trajectories = read_trajectories(path.name, decoded(data), args.format)
            sha256 = hashlib.sha256(data).hexdigest()
            for trajectory in trajectories:
                attempt, done = existing_attempt(root, args.benchmark, args.model, trajectory.task_id, sha256)
                if done:
                    already += 1
                    continue
                verdict = verdicts.verdict(trajectory.task_id) if verdicts else None
                target = write_imported_run(
                    trajectory,
                    root=root,
                    benchmark=args.benchmark,
                    model=args.model,
                    source=path,
                    sha256=sha256,
                    attempt=attempt,
                    verdict=verdict,
                )
                written.append((trajectory, target))
        except (FormatProblem, ImportProblem) as exc:
            skipped += 1
            bar.write(f"import: skipped {path}: {exc}", file=sys.stderr)
            continue
        except (OSError, MemoryError, RecursionError, UnicodeError) as exc:
            skipped += 1
            bar.write(f"import: skipped {path}: cannot import ({type(exc).__name__}: {_reason(exc)})", file=sys.stderr)
            continue
        except Exception as exc:  # a shape no check foresaw: still this file only
            skipped += 1
            bar.write(
                f"import: skipped {path}: unexpected {type(exc).__name__} (a bug; please report it)", file=sys.stderr
            )
            continue
        finally:
            for trajectory, target in written:  # whole runs, even of a file whose later conversation failed
                imported += 1
                for note in trajectory.notes:
                    warned += 1
                    bar.write(f"import: warning: {path}: {note} ({target})", file=sys.stderr)
    skipped += len(problems)
    print(
        f"import: {imported} run(s) written under {root}"
        + (f", {already} already there" if already else "")
        + (f", {skipped} skipped" if skipped else "")
        + (f", {warned} warning(s)" if warned else ""),
        file=sys.stderr,
    )
    return 1 if skipped else 0


def _reason(exc: BaseException) -> str:
    """An exception's reason without any text of the file (an OSError's strerror and file name; a
    UnicodeError's position)."""
    if isinstance(exc, OSError):
        return f"{exc.strerror or 'error'}{f': {exc.filename}' if exc.filename else ''}"
    if isinstance(exc, UnicodeError):
        start = getattr(exc, "start", None)
        return f"invalid text at character {start}" if start is not None else "invalid text"
    return "too large or too deep"
