"""Grade ended proxy conversations by hand: write each one's verdict.json and make its outcome
``submitted`` (a proxy run is ``not_graded`` until then; docs/proxy.md).

examples:
  ctxpolicy proxy-verdict --runs results/proxy/FC/task-42-1__a1 --resolved --note "tests pass"
  # every ended, ungraded conversation under it:
  ctxpolicy proxy-verdict --runs results/proxy --unresolved

Open conversations, runs that are not the proxy's and runs already graded are refused, one
line each (exit 2 if any was refused); the others are graded. Under a folder, conversations
already graded or still open are passed over.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ERROR_PREFIX = "ctxpolicy proxy-verdict: "  # cli.main starts our error lines with it


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_runs

    add_runs(p, "proxy run directories, or folders holding them (any depth)")
    grade = p.add_mutually_exclusive_group(required=True)
    grade.add_argument("--resolved", dest="resolved", action="store_true", help="the agent solved its task")
    grade.add_argument("--unresolved", dest="resolved", action="store_false", help="it did not")
    p.add_argument("--note", help="a note kept in the verdict's report")


def main(args: argparse.Namespace) -> int:
    from ctxpolicy.errors import UsageError
    from ctxpolicy.proxy.recording import VerdictError, attach_verdict
    from ctxpolicy.rundir import find_run_dirs, is_complete_run, read_verdict

    missing = [str(p) for p in args.runs if not p.exists()]
    if missing:
        raise UsageError(f"--runs: no such path: {', '.join(missing)}")
    runs = find_run_dirs(args.runs)
    if not runs:
        raise UsageError("--runs: no run directories found")
    refused = 0
    for run in runs:
        named = run in {Path(p) for p in args.runs}
        if not named and (read_verdict(run) is not None or not is_complete_run(run)):
            continue  # under a folder: graded and still open ones are left as they are
        try:
            path = attach_verdict(run, args.resolved, args.note)
        except (VerdictError, OSError, ValueError) as exc:
            print(f"{ERROR_PREFIX}{exc}", file=sys.stderr)  # one line a refused run; the others are graded
            refused += 1
            continue
        print(path)
    return 2 if refused else 0
