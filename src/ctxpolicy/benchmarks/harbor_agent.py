"""Our agent as a Harbor 0.20.0 agent: `harbor run --agent-import-path
ctxpolicy.benchmarks.harbor_agent:CtxpolicyHarborAgent` (the command: ``ctxpolicy.benchmarks.harbor``).

Harbor loads the class by import path and calls ``CtxpolicyHarborAgent(logs_dir=..., model_name=...,
**agent_kwargs)``, ``await setup(environment)`` and ``await run(instruction, environment, context)``.
This module imports without Harbor (CI has Python 3.11 and no Docker): when ``harbor`` is importable
the class subclasses ``harbor.agents.base.BaseAgent``, otherwise a stand-in base with the same
interface, which tests/test_benchmarks_harbor.py checks against a record of Harbor 0.20.0's
``BaseAgent`` (tests/fixtures/harbor/base_agent_0.20.0.json).

``run`` claims the first attempt of the task in ``cell_dir`` without a complete run (an exclusive
create of the run directory's claim file for this Harbor job, so concurrent trials of one task
never share an attempt and a restarted cell's new job redoes only what is missing), writes the
claim to ``logs_dir/ctxpolicy.json`` (Harbor keeps it under the trial's ``agent/``), then runs
one ctxpolicy run (``runner``, as for the tb harness: ``ctxpolicy.agent.terminal_bench:run_task``)
in a worker thread, its commands sent to Harbor's environment through ``HarborExec``. When
Harbor's agent timeout cancels ``run``, every later command of that run fails at once, so the run
ends and records itself; the verdict's ``time_limited`` says Harbor stopped it.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import platform
from pathlib import Path
from typing import Any

from minisweagent.environments.local import LocalEnvironment
from minisweagent.utils.serialize import recursive_merge

from ctxpolicy.benchmarks.container_exec import ContainerExecConfig
from ctxpolicy.benchmarks.harbor import HARBOR_VERSION, IDENTITY_FILE
from ctxpolicy.rundir import is_complete_run, run_dir_name

DEFAULT_RUNNER = "ctxpolicy.agent.terminal_bench:run_task"
COMMAND_TIMEOUT_S = 180
CLAIM_FILE = ".harbor-claim"
MAX_ATTEMPTS = 100

try:  # pragma: no cover - only in envs/harbor.yaml
    from harbor.agents.base import BaseAgent as _Base
except ImportError:

    class _Base:  # the parts of harbor.agents.base.BaseAgent this agent relies on
        SUPPORTS_ATIF: bool = False
        SUPPORTS_RESUME: bool = False
        SUPPORTS_WINDOWS: bool = False
        session_id: str | None = None
        context_id: Any = None

        def __init__(
            self,
            logs_dir: Path,
            model_name: str | None = None,
            logger: logging.Logger | None = None,
            mcp_servers: list | None = None,
            skills_dir: str | None = None,
            *args: Any,
            extra_env: dict[str, str] | None = None,
            **kwargs: Any,
        ):
            self.logs_dir = logs_dir
            self.model_name = model_name
            self.logger = (logger or logging.getLogger("harbor")).getChild(__name__)
            self.mcp_servers = mcp_servers or []
            self.skills_dir = skills_dir
            self._extra_env = dict(extra_env) if extra_env else {}

        @property
        def extra_env(self) -> dict[str, str]:
            return dict(self._extra_env)

        def to_agent_info(self) -> dict[str, Any]:
            return {"name": self.name(), "version": self.version() or "unknown", "model_info": self.model_name}

        @classmethod
        def import_path(cls) -> str:
            return f"{cls.__module__}:{cls.__name__}"

        async def resume(self, instruction: str, environment: Any, context: Any) -> None:
            raise NotImplementedError(f"Agent '{self.name()}' does not support resume")

        def populate_context_post_run(self, context: Any) -> None:
            pass


def _import(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


def claim_attempt(cell_dir: Path, task_id: str, attempts: int, job: str = "") -> int:
    """The first attempt of ``task_id`` (1-based) without a complete run that no trial of this
    Harbor ``job`` has claimed yet: a restarted cell's new job redoes only what is missing."""
    for attempt in range(1, min(attempts, MAX_ATTEMPTS) + 1):
        run_dir = cell_dir / run_dir_name(task_id, attempt)
        if is_complete_run(run_dir):
            continue
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            with open(run_dir / f"{CLAIM_FILE}{'-' + job if job else ''}", "x", encoding="utf-8") as handle:
                handle.write(str(attempt))
            return attempt
        except FileExistsError:
            continue
    raise RuntimeError(f"{cell_dir}: every attempt of {task_id} (1..{attempts}) is complete or already claimed")


class HarborExec(LocalEnvironment):
    """mini-swe-agent's environment contract (as ``ContainerExecEnvironment``) over Harbor's async
    ``environment.exec``: called from the runner's worker thread, answered on Harbor's event loop."""

    def __init__(self, environment: Any, loop: asyncio.AbstractEventLoop, **kwargs: Any):
        super().__init__(config_class=ContainerExecConfig, **kwargs)
        self.harbor_environment, self.loop = environment, loop
        self.stopped = False  # set when Harbor cancels the agent (its timeout): no further command

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "")
        limit = timeout or self.config.timeout
        try:
            if self.stopped:
                raise RuntimeError("Harbor stopped the agent (its agent timeout)")
            coroutine = self.harbor_environment.exec(command, cwd=cwd or self.config.cwd, timeout_sec=limit)
            result = asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()
            output = (result.stdout or "") + (result.stderr or "")
            out = {"output": output, "returncode": result.return_code, "exception_info": ""}
        except Exception as e:  # Harbor's exec timeout or a lost container: the agent sees it, as in tb
            out = {
                "output": "",
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: {e}",
                "extra": {"exception_type": type(e).__name__, "exception": str(e)},
            }
        self._check_finished(out)
        return out

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return recursive_merge(self.config.model_dump(), platform.uname()._asdict(), kwargs)


class CtxpolicyHarborAgent(_Base):
    SUPPORTS_ATIF = False
    SUPPORTS_RESUME = False
    SUPPORTS_WINDOWS = False

    def __init__(
        self,
        logs_dir: Path,
        model_name: str | None = None,
        *args: Any,
        cell_dir: str = "",
        attempts: int | str = 1,
        runner: str = DEFAULT_RUNNER,
        command_timeout_s: int | str = COMMAND_TIMEOUT_S,
        cwd: str = "/app",
        **kwargs: Any,
    ):
        # Harbor parses each --agent-kwarg value as JSON or a Python literal (250 -> int, 0.5 -> float);
        # the runner takes the strings the tb harness gives it
        settings = {k: str(kwargs.pop(k)) for k in list(kwargs) if k not in _BASE_KWARGS}
        super().__init__(logs_dir, model_name, *args, **kwargs)
        if not cell_dir:
            raise ValueError("the ctxpolicy Harbor agent needs --agent-kwarg cell_dir=...")
        self.cell_dir = Path(cell_dir)
        self.attempts = int(attempts)
        self.runner_path = runner
        self.command_timeout_s = int(command_timeout_s)
        self.cwd = cwd
        self.settings = settings

    @staticmethod
    def name() -> str:
        return "ctxpolicy"

    def version(self) -> str | None:
        from ctxpolicy import __version__

        return f"{__version__} (harbor {HARBOR_VERSION})"

    async def setup(self, environment: Any) -> None:
        """Nothing to install: our agent runs on the host and only sends commands into the task's
        environment (as it does for the tb harness)."""

    def task_id(self, environment: Any = None) -> str:
        """The task's name: Harbor's ``environment.environment_name`` (the task's short name), else
        the trial directory's (``logs_dir`` is ``TRIAL/agent``, a trial ``TASK__suffix``, with the
        task name cut to 32 characters by Harbor, hence only a fallback)."""
        name = getattr(environment, "environment_name", None)
        if isinstance(name, str) and name:
            return name
        trial = Path(self.logs_dir).parent.name
        return trial.rsplit("__", 1)[0] if "__" in trial else trial

    async def run(self, instruction: str, environment: Any, context: Any) -> None:
        task_id = self.task_id(environment)
        job = Path(self.logs_dir).parent.parent.name  # JOBS_DIR/JOB/TRIAL/agent
        attempt = claim_attempt(self.cell_dir, task_id, self.attempts, job)
        run_dir = self.cell_dir / run_dir_name(task_id, attempt)
        Path(self.logs_dir).mkdir(parents=True, exist_ok=True)
        identity = {"task_id": task_id, "attempt": attempt, "run_dir": str(run_dir)}
        (Path(self.logs_dir) / IDENTITY_FILE).write_text(json.dumps(identity) + "\n", encoding="utf-8")
        executor = HarborExec(environment, asyncio.get_running_loop(), cwd=self.cwd, timeout=self.command_timeout_s)
        runner = _import(self.runner_path)
        try:
            record = await asyncio.to_thread(
                runner,
                instruction=instruction,
                environment=executor,
                task_id=task_id,
                attempt=attempt,
                run_dir=run_dir,
                **self.settings,
            )
        except asyncio.CancelledError:  # Harbor's timeout: the runner's thread sees its next command fail
            executor.stopped = True
            raise
        totals = (record or {}).get("totals") or {}
        if context is not None:
            context.n_input_tokens = int(totals.get("prompt_tokens") or 0)
            context.n_output_tokens = int(totals.get("completion_tokens") or 0)
            context.metadata = {**identity, "outcome": (record or {}).get("outcome")}


_BASE_KWARGS = {"logger", "mcp_servers", "skills_dir", "extra_env"}
