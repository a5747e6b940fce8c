"""Runs driven by an outside harness (Terminal-Bench's `tb run`): the harness owns the container,
the task's tests and the trial's timeout; we run the agent in its environment and write the run
directory as any other run.

``run_task`` is the runner ``ctxpolicy.benchmarks.tb_agent.CtxpolicyAgent`` calls for each
trial. Its settings arrive as ``--agent-kwarg key=value`` strings, passed on by ``run-cell``
(``harness_kwargs``), so every value here is parsed from text.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxpolicy.agent.plan import cell_identity, endpoint_for_url, find_task, repo_root
from ctxpolicy.rundir import RUN_JSON, read_json
from ctxpolicy.agent.runner import execute_run
from ctxpolicy.agent.settings import build_settings

if TYPE_CHECKING:
    from ctxpolicy.agent.runner import Endpoint
    from ctxpolicy.study.grid import Cell

# run-cell options passed on to run_task as agent kwargs (None values are left out)
HARNESS_OPTIONS = ("mode", "step_limit", "max_tokens", "summarizer_endpoint")


class HarnessEnvironment:
    """A benchmark adapter for one trial whose environment the harness already made."""

    def __init__(self, environment: Any, submission_instructions: str):
        self.environment = environment
        self._instructions = submission_instructions

    def prepare_workspace(self, task: Any, workspace: Path) -> None:
        pass  # the harness built the container

    def release_workspace(self, task: Any, workspace: Path) -> None:
        pass

    def make_environment(self, task: Any, workspace: Path, command_timeout_s: int) -> Any:
        """The harness's environment, its per-command timeout set to the run's setting (the
        config's ``limits.command_timeout_s``), whatever the plugin was started with."""
        config = getattr(self.environment, "config", None)
        if config is not None and hasattr(config, "timeout"):
            config.timeout = int(command_timeout_s)
        return self.environment

    def submission_instructions(self, task: Any) -> str:
        return self._instructions

    def collect_submission(self, task: Any, workspace: Path, submission_text: str) -> str:
        return submission_text  # the container's state is what the harness grades


def harness_kwargs(
    args: Any,
    *,
    cell: Cell,
    thresholds: Path | None,
    cell_dir: Path,
    endpoint: Endpoint,
    command_timeout_s: int | None = None,
) -> dict[str, str]:
    """The agent kwargs for the harness: the cell (a ``ctxpolicy.study.grid.Cell``) and its thresholds
    file, where to write, which endpoint, the run-setting overrides and the per-command timeout
    (``command_timeout_s``, the cell's setting: the plugins' own default is only a fallback)."""
    values = {name: getattr(args, name, None) for name in HARNESS_OPTIONS}
    values["command_timeout_s"] = command_timeout_s
    values.update(
        config=str(Path(args.config).resolve()),
        benchmark=cell.benchmark,
        model=cell.model,
        policy=cell.policy,
        setting=cell.setting,
        summarizer=cell.summarizer,
        cohort=cell.cohort,
        track=cell.track,
        thresholds=str(Path(thresholds).resolve()) if thresholds else None,
    )
    kwargs = {
        "cell_dir": str(Path(cell_dir).resolve()),
        "endpoint": endpoint.base_url,
        "served_name": endpoint.served_name,
    }
    kwargs.update({name: str(value) for name, value in values.items() if value is not None})
    return kwargs


def run_task(
    *,
    instruction: str,
    environment: Any,
    task_id: str,
    attempt: int,
    run_dir: str | Path,
    config: str,
    model: str,
    policy: str,
    endpoint: str,
    benchmark: str = "terminalbench",
    cohort: str = "main",
    track: str = "full",
    setting: str | None = None,
    thresholds: str | None = None,
    summarizer: str | None = None,
    summarizer_endpoint: str | None = None,
    served_name: str | None = None,
    mode: str | None = None,
    step_limit: str | None = None,
    max_tokens: str | None = None,
    **ignored: Any,
) -> dict:
    """One trial as one run; returns the run record (run.json's content)."""
    from ctxpolicy.benchmarks import get_adapter
    from ctxpolicy.benchmarks.base import TERMINAL_SUBMISSION, Task
    from ctxpolicy.study.grid import Cell
    from ctxpolicy.policies import parse_spec
    from ctxpolicy.study import load_study

    study = load_study(config)
    spec = parse_spec(policy)
    setting = (setting or "primary") if spec.needs_threshold else None
    cell = Cell(track, benchmark, model, spec, setting, cohort, summarizer)
    threshold = study.resolve_threshold(cell, thresholds)
    task = Task(task_id=task_id, stratum="terminal-bench", kind="terminal", instruction=instruction)
    try:  # the dataset's own record of the task, for its stratum and timeout, where it is at hand
        known, _ = find_task(
            get_adapter(benchmark, study.benchmark(benchmark), repo_root()), study, benchmark, task_id, cohort
        )
        task = Task(task_id, known.stratum, "terminal", instruction, known.timeout_s, known.metadata)
    except Exception:  # no dataset at hand (or not this task): the harness's instruction is enough
        pass
    overrides = {"mode": mode, "step_limit": _int(step_limit), "max_tokens": _int(max_tokens)}
    settings = build_settings(study, benchmark, model, task_timeout_s=task.timeout_s, overrides=overrides)
    identity = cell_identity(study, cell, task=task, attempt=int(attempt), threshold=threshold)
    summary = None
    if summarizer and summarizer != model and summarizer_endpoint:
        summary = endpoint_for_url(summarizer_endpoint, summarizer, study.model(summarizer))
    result = execute_run(
        identity=identity,
        policy=cell.spec,
        task=task,
        adapter=HarnessEnvironment(environment, TERMINAL_SUBMISSION),
        settings=settings,
        endpoint=endpoint_for_url(endpoint, model, study.model(model), served_name),
        summarizer_endpoint=summary,
        run_dir=Path(run_dir),
    )
    return read_json(result.run_dir / RUN_JSON)


def _int(value: str | None) -> int | None:
    return None if value in (None, "", "None") else int(value)
