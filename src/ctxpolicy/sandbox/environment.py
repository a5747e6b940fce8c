"""mini-swe-agent environment that runs every agent command in the bubblewrap sandbox.

It keeps LocalEnvironment's contract (result dict, error reporting, the
COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT submission check) and only changes where the command
runs; unlike minisweagent's own BubblewrapEnvironment it never writes outside the given
workspace, cuts the network, and kills the command's whole process tree on timeout. A command
stopped by a sandbox limit that outlives it (the workspace's disk quota) ends the run: the
agent exits with status ``SandboxLimit`` and the limit's reason, recorded as outcome ``error``.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from dataclasses import asdict

from minisweagent.environments.local import LocalEnvironment, LocalEnvironmentConfig
from minisweagent.exceptions import InterruptAgentFlow
from minisweagent.utils.serialize import recursive_merge

from ctxpolicy.sandbox.bwrap import run_sandboxed, sandbox_env
from ctxpolicy.sandbox.limits import DEFAULT_LIMITS, SandboxLimits

LIMIT_EXIT_STATUS = "SandboxLimit"


class SandboxLimitExceeded(InterruptAgentFlow):
    """A command broke a sandbox limit that leaves the workspace unusable: the run ends."""


class SandboxEnvironmentConfig(LocalEnvironmentConfig):
    workspace: str
    network: bool = False
    limits: dict[str, int] = {}


class SandboxEnvironment(LocalEnvironment):
    def __init__(
        self,
        workspace: Path,
        timeout: int = 30,
        env: dict[str, str] | None = None,
        limits: SandboxLimits = DEFAULT_LIMITS,
        **kwargs: Any,
    ):
        workspace = Path(workspace).resolve()
        super().__init__(
            config_class=SandboxEnvironmentConfig,
            workspace=str(workspace),
            cwd=str(workspace),
            timeout=timeout,
            env=env or {},
            limits=asdict(limits),
            **kwargs,
        )
        self.limits = limits

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "")
        limit = timeout or self.config.timeout
        try:
            result = run_sandboxed(
                command,
                Path(self.config.workspace),
                timeout_s=limit,
                env=self.config.env,
                network=self.config.network,
                cwd=Path(cwd or self.config.cwd),
                limits=self.limits,
            )
        except Exception as e:  # the sandbox itself failed to start; report it like LocalEnvironment does
            output = {
                "output": "",
                "returncode": -1,
                "exception_info": f"An error occurred while executing the command: {e}",
                "extra": {"exception_type": type(e).__name__, "exception": str(e)},
            }
        else:
            if result.timed_out:
                message = f"Command '{command}' timed out after {limit} seconds"
                output = {
                    "output": result.output,
                    "returncode": -1,
                    "exception_info": f"An error occurred while executing the command: {message}",
                    "extra": {"exception_type": "TimeoutExpired", "exception": message},
                }
            else:
                output = {"output": result.output, "returncode": result.returncode, "exception_info": ""}
            if result.limit is not None:
                reason = f"sandbox: {result.reason}"
                raise SandboxLimitExceeded(
                    {
                        "role": "exit",
                        "content": f"{reason}\n{result.output[-2000:]}",
                        "extra": {"exit_status": LIMIT_EXIT_STATUS, "submission": "", "reason": reason},
                    }
                )
        self._check_finished(output)
        return output

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        # the sandbox's environment, not the host's: templates must describe where commands really run
        return recursive_merge(
            self.config.model_dump(), platform.uname()._asdict(), sandbox_env(self.config.env), kwargs
        )
