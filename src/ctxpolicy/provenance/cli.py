"""Record, show and verify where a figure or table came from.

  ctxpolicy provenance record TARGET [TARGET ...] --config C --inputs F [F ...]
                              [--inputs-from LIST] [--inputs-glob PATTERN] [--runs DIR [DIR ...]]
                              [--notebook NB] [--extra KEY=VALUE]
  ctxpolicy provenance show TARGET [--each-run] [--json]
  ctxpolicy provenance verify TARGET [TARGET ...] [--models] [--json]

record writes TARGET.prov.json for each TARGET. show prints the chain from TARGET back to the
run records. verify re-hashes every file recorded along that chain and exits 1 listing each
file that changed or vanished since.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ctxpolicy import errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_config, add_runs

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    record = sub.add_parser("record", help="write TARGET.prov.json for each target")
    record.add_argument("targets", nargs="+", metavar="TARGET")
    add_config(record, "the config file the targets were made with")
    record.add_argument("--inputs", nargs="+", action="extend", default=[], metavar="F", help="input files")
    record.add_argument(
        "--inputs-from",
        action="append",
        default=[],
        metavar="LIST",
        help="a file listing input paths, one per line ('-' reads standard input)",
    )
    record.add_argument(
        "--inputs-glob",
        action="append",
        default=[],
        metavar="PATTERN",
        help="input files matching a glob pattern ('**' recurses); quote it",
    )
    add_runs(
        record,
        "add run.json, calls.jsonl and verdict.json of every run directory under DIR",
        required=False,
        default=[],
    )
    record.add_argument("--notebook", help="the executed notebook that made the targets")
    record.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a free-form field stored under 'extra' (repeatable)",
    )

    show = sub.add_parser("show", help="print the chain from TARGET back to the run records")
    show.add_argument("target", metavar="TARGET")
    show.add_argument("--each-run", action="store_true", help="list every run, not only every cell")
    show.add_argument("--json", action="store_true", help="print the chain as JSON")

    verify = sub.add_parser("verify", help="re-hash every file along the chain; exit 1 on any change")
    verify.add_argument("targets", nargs="+", metavar="TARGET")
    verify.add_argument(
        "--models", action="store_true", help="also re-hash the model files the runs recorded (large; where present)"
    )
    verify.add_argument("--json", action="store_true", help="print the result as JSON")


ERROR_PREFIX = "ctxpolicy provenance {action}: "  # cli.main fills in the action and starts our error lines with it


class UsageError(errors.UsageError, ValueError):
    pass


def _read_list(source: str) -> list[str]:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{source}: cannot read input list: {exc.strerror}") from None
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _gather_inputs(args: argparse.Namespace) -> list[str]:
    import glob

    from .runs import run_record_files

    inputs = list(args.inputs)
    for source in args.inputs_from:
        inputs.extend(_read_list(source))
    for pattern in args.inputs_glob:
        matches = sorted(p for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
        if not matches:
            raise UsageError(f"--inputs-glob {pattern!r}: matched no files")
        inputs.extend(matches)
    for root in args.runs:
        if not Path(root).is_dir():
            raise UsageError(f"--runs {root}: not a directory")
        inputs.extend(map(str, run_record_files(root)))
    return inputs


def _parse_extra(items: list[str]) -> dict[str, str]:
    extra = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--extra {item!r}: expected KEY=VALUE")
        extra[key] = value
    return extra


def _record(args: argparse.Namespace) -> int:
    from .sidecar import write_sidecars

    written = write_sidecars(
        args.targets,
        config_path=args.config,
        inputs=_gather_inputs(args),
        notebook=args.notebook,
        extra=_parse_extra(args.extra),
        progress=True,
    )
    for path in written:
        print(path)
    return 0


def _show(args: argparse.Namespace) -> int:
    import json

    from .chain import trace
    from .render import render_tree

    tree = trace(args.target)
    if args.json:
        print(json.dumps(tree, indent=2, sort_keys=True))
    else:
        print("\n".join(render_tree(tree, each_run=args.each_run)))
    return 0


def _verify(args: argparse.Namespace) -> int:
    import json

    from .chain import display_path, verify
    from .render import render_problems

    results = []
    for target in args.targets:
        checked, problems = verify(target, progress=True, models=args.models)
        results.append(
            {
                "target": display_path(Path(target)),
                "ok": not problems,
                "checked": checked,
                "problems": [p.as_dict() for p in problems],
            }
        )
        if not args.json:
            print("\n".join(render_problems(results[-1]["target"], checked, problems)))
    ok = all(r["ok"] for r in results)
    if args.json:
        print(json.dumps({"ok": ok, "results": results}, indent=2, sort_keys=True))
    return 0 if ok else 1


def file_error(exc: OSError) -> UsageError:
    """A file the command was given that cannot be read or written, as bad input naming it."""
    return UsageError(f"{exc.filename or ''}: {exc.strerror or exc}")


def main(args: argparse.Namespace) -> int:
    action = {"record": _record, "show": _show, "verify": _verify}[args.action]
    try:
        return action(args)
    except OSError as exc:
        raise file_error(exc) from exc
