"""Our agent as a terminal-bench agent: `tb run --agent-import-path ctxpolicy.benchmarks.tb_agent:CtxpolicyAgent`.

Imported only by the terminal-bench harness, in envs/terminal-bench (Python >= 3.12); the CPU
path never imports this module. The harness owns the container, the timeouts and the tests;
this class runs one ctxpolicy run (mini-swe-agent with the compression policy) against the
harness's container and writes its run directory under `cell_dir`.

Agent kwargs (`--agent-kwarg key=value`): cell_dir (required), plus whatever the runner takes
(config, model, policy, setting, endpoint, ...); `runner` names the function that performs a
run, "module:function", by default ctxpolicy.agent.terminal_bench:run_task, called as
runner(instruction=..., environment=..., task_id=..., attempt=..., run_dir=..., **kwargs) and
returning the run record (run.json's content).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from terminal_bench.agents.base_agent import AgentResult, BaseAgent
from terminal_bench.agents.failure_mode import FailureMode
from terminal_bench.terminal.tmux_session import TmuxSession

from ctxpolicy.benchmarks.container_exec import ContainerExecEnvironment
from ctxpolicy.benchmarks.terminal_bench import trial_identity
from ctxpolicy.rundir import run_dir_name

DEFAULT_RUNNER = "ctxpolicy.agent.terminal_bench:run_task"
COMMAND_TIMEOUT_S = 180


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


class CtxpolicyAgent(BaseAgent):
    def __init__(
        self, cell_dir: str, runner: str = DEFAULT_RUNNER, command_timeout_s: int = COMMAND_TIMEOUT_S, **kwargs: Any
    ):
        super().__init__(version=kwargs.pop("version", None), prompt_template=kwargs.pop("prompt_template", None))
        self.cell_dir = Path(cell_dir)
        self.runner = _import(runner)
        self.command_timeout_s = int(command_timeout_s)
        self.settings = kwargs

    @staticmethod
    def name() -> str:
        return "ctxpolicy"

    def perform_task(self, instruction: str, session: TmuxSession, logging_dir: Path | None = None) -> AgentResult:
        if logging_dir is None:
            raise ValueError("the ctxpolicy agent needs the harness's logging_dir to name its run")
        task_id, attempt = trial_identity(Path(logging_dir).parent.name)
        environment = ContainerExecEnvironment(session.container, cwd="/app", timeout=self.command_timeout_s)
        record = self.runner(
            instruction=self._render_instruction(instruction),
            environment=environment,
            task_id=task_id,
            attempt=attempt,
            run_dir=self.cell_dir / run_dir_name(task_id, attempt),
            **self.settings,
        )
        totals = record.get("totals") or {}
        failure = FailureMode.NONE
        if record.get("outcome") == "time_limit":
            failure = FailureMode.AGENT_TIMEOUT
        elif record.get("outcome") == "context_overflow":
            failure = FailureMode.CONTEXT_LENGTH_EXCEEDED
        elif record.get("outcome") == "error":
            failure = FailureMode.UNKNOWN_AGENT_ERROR
        return AgentResult(
            total_input_tokens=int(totals.get("prompt_tokens") or 0),
            total_output_tokens=int(totals.get("completion_tokens") or 0),
            failure_mode=failure,
        )
