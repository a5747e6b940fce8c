"""Terminal-Bench through Harbor 0.20.0 (the study's harness, Table 5): the `harbor run` command
of a cell and Harbor's result files read into our verdicts. Nothing here imports Harbor (it needs
Python >= 3.12 and Docker and lives in envs/harbor.yaml).

The command comes in two parts. ``harbor_run_prefix`` is fixed by the config (agent import path,
dataset, jobs directory, attempts, concurrency, model) and is written into the cell rule's shell,
so `snakemake -n -p` shows it; ``harbor_task_args`` adds what only `ctxpolicy run-cell` knows
(the pending tasks and the agent kwargs: endpoint, thresholds file, cell directory).

Harbor writes one ``result.json`` per trial (``JOBS_DIR/JOB/TRIAL/result.json``, a ``TrialResult``)
and gives attempts no number, so our agent (``harbor_agent``) claims one and writes it to
``TRIAL/agent/ctxpolicy.json`` (``IDENTITY_FILE``). A trial's verdict: resolved when the verifier's
``reward`` is 1; time-limited when Harbor stopped the agent (``exception_info.exception_type`` is
``AgentTimeoutError``). The verdict report carries ``time_limited`` (bool) and
``agent_timeout`` (Harbor's message) for the runs table's time-limited column (docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxpolicy.benchmarks.base import RunRecord, Verdict

HARNESS = "harbor"
HARBOR_VERSION = "0.20.0"
AGENT_IMPORT_PATH = "ctxpolicy.benchmarks.harbor_agent:CtxpolicyHarborAgent"
JOBS_DIR = "harbor"  # Harbor's --jobs-dir, inside the cell directory
DATASET = "terminal-bench-core@0.1.1"  # Terminal-Bench 1.0 in Harbor's registry (name@version)
IDENTITY_FILE = "ctxpolicy.json"  # in the trial's agent/ directory: {"task_id", "attempt", "run_dir"}
RESULT_FILE = "result.json"
TIMEOUT_EXCEPTION = "AgentTimeoutError"


def harbor_run_prefix(
    *, model: str, jobs_dir: Path | str, n_attempts: int, n_concurrent: int, dataset_path: Path | str | None = None
) -> list[str]:
    """The config-fixed part of a cell's `harbor run` (a local copy of the dataset: ``--path``)."""
    source = ["--path", str(dataset_path)] if dataset_path else ["--dataset", DATASET]
    return [
        "harbor",
        "run",
        "--agent-import-path",
        AGENT_IMPORT_PATH,
        "--model",
        model,
        *source,
        "--jobs-dir",
        str(jobs_dir),
        "--n-attempts",
        str(n_attempts),
        "--n-concurrent",
        str(n_concurrent),
        "--yes",
    ]


def harbor_task_args(task_ids: list[str], agent_kwargs: dict[str, str]) -> list[str]:
    """The run-time part: one ``--include-task-name`` per task, one ``--agent-kwarg`` per setting."""
    argv: list[str] = []
    for task_id in task_ids:
        argv += ["--include-task-name", task_id]
    for key, value in agent_kwargs.items():
        argv += ["--agent-kwarg", f"{key}={value}"]
    return argv


def _reward(result: dict[str, Any]) -> float | None:
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    value = rewards.get("reward")
    return float(value) if isinstance(value, (int, float)) else None


def read_trial(trial_dir: Path) -> dict[str, Any]:
    """One trial's result.json and our agent's identity file, as the fields a verdict needs.
    ValueError naming the file and field when either is not what Harbor and our agent write."""
    result_path = trial_dir / RESULT_FILE
    try:
        result = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{result_path}: not a readable Harbor trial result ({exc})") from exc
    if not isinstance(result, dict) or not isinstance(result.get("trial_name"), str):
        raise ValueError(f"{result_path}: field trial_name: missing or not a string")
    identity_path = trial_dir / "agent" / IDENTITY_FILE
    try:
        identity = json.loads(identity_path.read_text(encoding="utf-8"))
    except OSError:
        identity = None  # the agent never started (setup failed): no run of ours to judge
    except ValueError as exc:
        raise ValueError(f"{identity_path}: not JSON ({exc})") from exc
    exception = result.get("exception_info") or {}
    return {
        "trial_name": result["trial_name"],
        "task_name": result.get("task_name"),
        "task_id": (identity or {}).get("task_id"),
        "attempt": (identity or {}).get("attempt"),
        "reward": _reward(result),
        "exception_type": exception.get("exception_type"),
        "exception_message": exception.get("exception_message"),
        "results_file": str(result_path),
    }


def harbor_trials(jobs_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every trial under a cell's jobs directory that our agent claimed, by (task_id, attempt);
    a later job's trial of the same run (a rerun) replaces an earlier one (job names sort by time)."""
    trials: dict[tuple[str, int], dict[str, Any]] = {}
    for result_path in sorted(Path(jobs_dir).glob(f"*/*/{RESULT_FILE}")):
        trial = read_trial(result_path.parent)
        if trial["task_id"] is not None and trial["attempt"] is not None:
            trials[(str(trial["task_id"]), int(trial["attempt"]))] = trial
    return trials


def verdict_from_harbor_trial(run: RunRecord, trial: dict[str, Any] | None) -> Verdict:
    if trial is None:
        report = {"resolved": False, "time_limited": False, "error": "no Harbor trial for this run (`harbor run`)"}
        return Verdict(False, HARNESS, report, "")
    timed_out = trial["exception_type"] == TIMEOUT_EXCEPTION
    report = {
        "resolved": trial["reward"] == 1.0,
        "reward": trial["reward"],
        "time_limited": timed_out,
        "agent_timeout": trial["exception_message"] if timed_out else None,
        "exception_type": trial["exception_type"],
        "trial_name": trial["trial_name"],
    }
    return Verdict(report["resolved"], HARNESS, report, trial["results_file"])


def uses_harbor(bench: Mapping[str, Any]) -> bool:
    """Whether a benchmark (its config block, schema defaults filled) runs through Harbor
    (``adapter: terminalbench``, ``harness: harbor``)."""
    return bench["adapter"] == "terminalbench" and bench["harness"] == HARNESS


def cell_prefix(
    bench: Mapping[str, Any],
    served_name: str,
    attempts: int,
    cell_dir: Path | str,
    *,
    repo_root: Path | str = ".",
) -> list[str]:
    """The config-fixed `harbor run` of one cell (``harbor_run_prefix`` with the model's served
    name, the study's attempts, the benchmark's concurrency and dataset copy, ``CELL_DIR/harbor``);
    ``bench`` is the benchmark's config block, schema defaults filled."""
    dataset = (bench.get("dataset") or {}).get("path")
    return harbor_run_prefix(
        model=str(served_name),
        jobs_dir=Path(cell_dir) / JOBS_DIR,
        n_attempts=int(attempts),
        n_concurrent=int(bench["concurrency"]),
        dataset_path=Path(repo_root) / dataset if dataset else None,
    )
