"""ctxpolicy import: public agent trajectories as FC run directories of the ``imported`` track.

  ctxpolicy import -i TRAJECTORIES [TRAJECTORIES ...] --benchmark NAME --model NAME
      [--format auto|mini-swe-agent|swe-agent|openai] [--verdicts REPORT] --out RUNS_ROOT

Each trajectory becomes ``RUNS_ROOT/{benchmark}/{model}/imported/{task}__a1`` (a second trajectory
of the same task ``__a2``, and so on; a file imported before, same sha256, is left as it is).
``-i`` takes files and folders; folders are searched recursively for ``*.traj.json``, ``*.traj``
and ``*.jsonl`` (and ``*.json`` with ``--format openai``). A file that cannot be read is one line
on stderr naming the file, the field and the value; the others are imported, and the exit code is
1 when anything was skipped. See docs/import.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

SEARCHED = ("*.traj.json", "*.traj", "*.jsonl")


def add_arguments(parser) -> None:
    from ctxpolicy.cli_args import add_input, add_out

    add_input(parser, "trajectory files or folders (searched recursively)", required=True)
    parser.add_argument("--format", default="auto", help="auto (default) | mini-swe-agent | swe-agent | openai")
    parser.add_argument("--benchmark", required=True, help="the benchmark the trajectories ran on (e.g. swe-bench)")
    parser.add_argument("--model", required=True, help="the model name the runs are filed under")
    parser.add_argument(
        "--verdicts", type=Path, help="a SWE-bench report: resolved_ids JSON, per-instance JSON, or CSV"
    )
    add_out(parser, "the runs root (e.g. results/runs)", required=True)


def trajectory_files(inputs: list[str], fmt: str) -> tuple[list[Path], list[str]]:
    """The files to import (sorted, each once) and one problem line per input that is missing."""
    patterns = SEARCHED + (("*.json",) if fmt == "openai" else ())
    files: dict[Path, None] = {}
    problems = []
    for item in map(Path, inputs):
        if item.is_file():
            files[item] = None
        elif item.is_dir():
            found = {p for pattern in patterns for p in item.rglob(pattern) if p.is_file()}
            if not found:
                problems.append(f"{item}: no trajectory files ({', '.join(patterns)}) in this folder")
            files.update(dict.fromkeys(sorted(found)))
        else:
            problems.append(f"{item}: no such file or folder")
    return list(files), problems


def main(args) -> int:
    from tqdm import tqdm

    from ctxpolicy.importing.formats import AUTO, FORMATS, FormatProblem, read_trajectories
    from ctxpolicy.importing.verdicts import VerdictsError, read_verdicts
    from ctxpolicy.importing.writer import existing_attempt, sha256_of, write_imported_run

    if args.format not in (AUTO, *FORMATS):
        print(f"import: --format is {args.format!r}; allowed: {AUTO}, {', '.join(FORMATS)}", file=sys.stderr)
        return 2
    for name, value in (("--benchmark", args.benchmark), ("--model", args.model)):
        if not value or "/" in value or value.startswith("."):
            print(f"import: {name} is {value!r}; expected a plain name (no '/')", file=sys.stderr)
            return 2
    try:
        verdicts = read_verdicts(args.verdicts) if args.verdicts else None
    except VerdictsError as exc:
        print(f"import: {exc}", file=sys.stderr)
        return 2
    root = Path(args.out)
    files, problems = trajectory_files(args.input, args.format)
    for line in problems:
        print(f"import: skipped {line}", file=sys.stderr)
    imported = already = skipped = 0
    warned = 0
    bar = tqdm(files, desc="import", unit="file", disable=not sys.stderr.isatty() or len(files) < 20)
    for path in bar:
        try:
            text = path.read_text(encoding="utf-8")
            trajectories = read_trajectories(path.name, text, args.format)
        except FormatProblem as exc:
            skipped += 1
            bar.write(f"import: skipped {path}: {exc}", file=sys.stderr)
            continue
        except (OSError, UnicodeDecodeError) as exc:
            skipped += 1
            bar.write(f"import: skipped {path}: unreadable ({type(exc).__name__}: {exc})", file=sys.stderr)
            continue
        sha256 = sha256_of(path)
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
