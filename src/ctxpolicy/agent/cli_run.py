"""Execute one agent run: one task, model, policy and attempt, into RUN_DIR.

RUN_DIR receives messages.jsonl, calls.jsonl, trajectory.json, workspace/, patch.diff (repository
tasks) and, last, run.json (docs/schema.md). The exit code is 0 whatever the run's outcome
(submitted, step_limit, time_limit, format_error_limit, context_overflow, error); 2 for bad input
(and for a RUN_DIR that already holds a complete run, or is an existing folder that is no run
directory of ours: --force replaces it); 1 when the server cannot
start or the cell is busy. RUN_DIR's parent is taken as the cell directory: the run holds its lock
(CELL_DIR/.lock), so it never writes into a cell that `ctxpolicy run-cell` is working on.

Examples:
  # the embedded model (llama.cpp on loopback, started and stopped for this run)
  ctxpolicy run --benchmark local --model qwen05b --policy TR/Th/0.5 --task tinyweb-001 \\
      --out /tmp/r1
  # a vLLM server you started:
  #   vllm serve Qwen/Qwen2.5-Coder-32B-Instruct --served-model-name qwen32b \\
  #     --enable-prefix-caching --enable-prompt-tokens-details
  ctxpolicy run --benchmark swebench --model qwen32b --policy FC --task django__django-11099 \\
      --endpoint http://gpu-node:8000/v1 --served-name qwen32b --out /tmp/r2
  # any OpenAI-compatible endpoint (llama.cpp, TGI, a hosted API)
  ctxpolicy run --benchmark local --model qwen05b --policy FC --task tinyweb-001 \\
      --endpoint http://127.0.0.1:8080/v1 --out /tmp/r3
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError

from ctxpolicy.agent.cli_common import ERROR_PREFIX as ERROR_PREFIX  # cli.main starts our error lines with it
from ctxpolicy.agent.cli_common import ENDPOINT_HELP, add_common_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_out, deprecated_alias

    parser.epilog = ENDPOINT_HELP
    add_common_arguments(parser)
    parser.add_argument("--threshold", type=int, help="threshold in tokens (instead of --setting)")
    parser.add_argument("--task", required=True, help="task id")
    parser.add_argument("--cohort", help="cohort to find the task in (default: any of the benchmark's)")
    parser.add_argument("--attempt", type=int, default=1, help="attempt number, 1-based (default: 1)")
    slug = parser.add_argument(
        "--cell-slug",
        dest="cell",
        metavar="SLUG",
        help="cell slug recorded in the identity (default: from policy and setting)",
    )
    deprecated_alias(parser, "--cell", replacement=slug)
    add_out(parser, "the run directory", required=True)
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace a complete run already in --out, or use a folder that is no run directory (default: refuse, exit 2)",
    )


def main(args: argparse.Namespace) -> int:
    import dataclasses

    from ctxpolicy.agent.cli_common import cell_from_flags, settings_overrides, study_for_flags
    from ctxpolicy.agent.plan import PlanError, cell_identity, find_task, make_adapter
    from ctxpolicy.agent.settings import build_settings

    if args.attempt < 1:
        raise PlanError(f"--attempt: {args.attempt} must be 1 or more")
    if args.threshold is not None and args.threshold < 1:
        raise PlanError(f"--threshold: {args.threshold} must be a number of tokens, 1 or more")
    if args.threshold is not None and args.setting:
        raise PlanError("--threshold and --setting exclude each other")
    refused = out_refused(args.out, args.force)
    if refused:
        raise PlanError(refused)
    study = study_for_flags(args)
    cell = cell_from_flags(args, cohort=args.cohort or "main")
    fixed = args.threshold is not None and cell.spec.needs_threshold
    if fixed:  # tokens given directly: no setting, nothing read
        cell = dataclasses.replace(cell, setting=None)
    threshold = args.threshold if fixed else study.resolve_threshold(cell, args.thresholds)
    adapter = make_adapter(study, cell.benchmark)
    task, cohort = find_task(adapter, study, cell.benchmark, args.task, args.cohort)
    cell = dataclasses.replace(cell, cohort=cohort)
    settings = build_settings(
        study, cell.benchmark, cell.model, task_timeout_s=task.timeout_s, overrides=settings_overrides(args)
    )
    identity = cell_identity(
        study,
        cell,
        task=task,
        attempt=args.attempt,
        threshold=threshold,
        threshold_setting="fixed" if fixed else None,
    )
    if args.cell:
        identity = dataclasses.replace(identity, cell=args.cell)

    from ctxpolicy.agent.cell_lock import CellBusy, cell_lock

    with contextlib.ExitStack() as held:
        try:
            held.enter_context(cell_lock(args.out.parent))
        except CellBusy as exc:
            raise CellBusy(f"--out: {exc}") from None
        except OSError as exc:
            raise PlanError(f"--out: cannot lock {args.out.parent}: {exc.strerror or exc}") from None
        return _run_unless_complete(args, study, identity, cell.spec, task, adapter, settings)


def out_refused(out: Path, force: bool) -> str | None:
    """Why ``--out`` may not be used (before anything is loaded, locked or deleted), or None: a
    folder that is not a run directory of ours (``rundir.owns_run_dir``) needs ``--force``."""
    from ctxpolicy.rundir import owns_run_dir

    if out.exists() and not out.is_dir():
        return f"--out: {out}: not a directory"
    if not force and not owns_run_dir(out):
        return f"--out: {out}: not a run directory (it holds other files, which a run would delete); --force uses it anyway"
    return None


class RunDirError(CtxpolicyError, OSError):
    """The run directory itself is unusable (e.g. run.json is a folder, the disk is full): exit code 1."""


def _run_unless_complete(args, study, identity, policy, task, adapter, settings) -> int:
    """The run, unless ``--out`` holds a complete one; the serving errors (exit code 1) leave as
    they are raised."""
    from ctxpolicy.agent.plan import PlanError, model_endpoint
    from ctxpolicy.rundir import RUN_JSON, is_complete_run, read_json
    from ctxpolicy.agent.runner import execute_run

    out = args.out
    if out.exists() and not out.is_dir():
        raise PlanError(f"--out: {out}: not a directory")
    if is_complete_run(out) and not args.force:
        outcome = read_json(out / RUN_JSON).get("outcome")
        raise PlanError(f"--out: {out} holds a complete run (outcome {outcome}); --force replaces it")
    try:
        with contextlib.ExitStack() as servers:
            endpoint = servers.enter_context(
                model_endpoint(
                    study.model(args.model),
                    args.model,
                    url=args.endpoint,
                    served_name=args.served_name,
                    log_path=out.parent / "server.log",
                )
            )
            summary_endpoint = None
            if args.summarizer and args.summarizer != args.model:
                summary_endpoint = servers.enter_context(
                    model_endpoint(
                        study.model(args.summarizer),
                        args.summarizer,
                        url=args.summarizer_endpoint,
                        served_name=None,
                        log_path=out.parent / f"server-{args.summarizer}.log",
                    )
                )
            result = execute_run(
                identity=identity,
                policy=policy,
                task=task,
                adapter=adapter,
                settings=settings,
                endpoint=endpoint,
                summarizer_endpoint=summary_endpoint,
                run_dir=out,
            )
    except OSError as exc:
        if isinstance(exc, CtxpolicyError):
            raise
        raise RunDirError(f"--out {out}: {exc}") from None
    print(json.dumps({"run_dir": str(result.run_dir), "outcome": result.outcome, "error": result.error}))
    return 0
