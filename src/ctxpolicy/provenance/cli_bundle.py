"""Export or import a results bundle: run records, thresholds and tables with sha256 checksums.

  ctxpolicy bundle export [--results results] --out bundle.tar.gz [--workspaces]
  ctxpolicy bundle check bundle.tar.gz [--max-size 64G]
  ctxpolicy bundle import bundle.tar.gz [--results results] [--overwrite] [--max-size 64G]

export packs regular files only (links, FIFOs, sockets and devices are left out and listed) and
removes its temporary file on any exit, SIGINT and SIGTERM included. import checks every
checksum before it writes anything and refuses a bundle with a changed,
missing, unlisted, unsafe or misreported file (a size other than the manifest's, a sparse member,
more than --max-size in all), naming it, and a results directory where a folder on a file's way
is a symbolic link. Restored files keep their exported order of
modification times, so Snakemake sees the runs, evaluations, thresholds and tables as present
and up to date: a reviewer can regenerate every figure and table without a GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator

ERROR_PREFIX = "ctxpolicy bundle {action}: "  # cli.main fills in the action and starts our error lines with it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_out

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    export = sub.add_parser("export", help="pack results into a bundle")
    export.add_argument("--results", default="results", help="the results directory (default: results)")
    add_out(export, "the bundle to write (.tar.gz)", required=True)
    export.add_argument(
        "--workspaces", action="store_true", help="also pack each run's workspace/ (bulky; left out by default)"
    )

    check = sub.add_parser("check", help="verify a bundle's checksums without extracting it")
    check.add_argument("bundle", metavar="BUNDLE")
    _add_max_size(check)

    restore = sub.add_parser("import", help="verify a bundle, then restore it into a results directory")
    restore.add_argument("bundle", metavar="BUNDLE")
    restore.add_argument("--results", default="results", help="where to restore (default: results)")
    restore.add_argument(
        "--overwrite", action="store_true", help="replace existing files that differ from the bundle's"
    )
    _add_max_size(restore)


def _add_max_size(parser: argparse.ArgumentParser) -> None:
    from .bundle import DEFAULT_MAX_BYTES

    parser.add_argument(
        "--max-size",
        type=_size,
        default=DEFAULT_MAX_BYTES,
        metavar="SIZE",
        help=f"refuse a bundle whose files hold more than SIZE in all (default {DEFAULT_MAX_BYTES >> 30}G; K, M, G, T)",
    )


def _size(text: str) -> int:
    from .bundle import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@contextlib.contextmanager
def _terminate_raises() -> Iterator[None]:
    """Within the block, SIGTERM (and SIGHUP) raise ``SystemExit(128 + signal)`` in the main
    thread, so that every ``finally`` and cleanup runs as on SIGINT; the previous handlers are
    restored after."""

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    previous = {signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _export(args: argparse.Namespace) -> int:
    from .bundle import export_bundle
    from .hashing import sha256_file

    with _terminate_raises():  # SIGTERM unwinds like Ctrl-C: the temporary bundle file is removed
        manifest = export_bundle(args.results, args.out, workspaces=args.workspaces, progress=True)
    for link in manifest["links_left_out"]:
        print(f"left out symbolic link: {link}", file=sys.stderr)
    for path in manifest["special_files_left_out"]:
        print(f"left out special file (not a regular file): {path}", file=sys.stderr)
    print(f"{args.out}: {len(manifest['files'])} files, sha256 {sha256_file(args.out)}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from .bundle import check_bundle

    manifest = check_bundle(args.bundle, progress=True, max_bytes=args.max_size)
    code = manifest.get("code") or {}
    print(
        f"{args.bundle}: {len(manifest['files'])} files, all checksums match "
        f"(exported {manifest.get('created')}, code {code.get('commit')}, dirty {code.get('dirty')})"
    )
    return 0


def _import(args: argparse.Namespace) -> int:
    from .bundle import import_bundle

    summary = import_bundle(args.bundle, args.results, overwrite=args.overwrite, progress=True, max_bytes=args.max_size)
    print(f"{summary.results}: restored {summary.written} files, {summary.unchanged} already identical")
    return 0


def main(args: argparse.Namespace) -> int:
    from .cli import file_error

    action = {"export": _export, "check": _check, "import": _import}[args.action]
    try:
        return action(args)
    except OSError as exc:
        raise file_error(exc) from exc
