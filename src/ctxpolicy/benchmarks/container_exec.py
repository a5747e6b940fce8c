"""A mini-swe-agent environment over an already running container (the terminal-bench harness's).

It keeps LocalEnvironment's contract (result dict, the COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT
check) and runs each command with the docker SDK's `exec_run`, so the harness keeps owning the
container's life, its timeouts, its tests and its limits. Commands run as the image's own user
(`user: ""`; the Terminal-Bench images expect root), as docs/sandbox.md describes.
"""

from __future__ import annotations

import platform
import shlex
from typing import Any

from minisweagent.environments.local import LocalEnvironment, LocalEnvironmentConfig
from minisweagent.utils.serialize import recursive_merge


class ContainerExecConfig(LocalEnvironmentConfig):
    cwd: str = "/app"
    user: str = ""


class ContainerExecEnvironment(LocalEnvironment):
    def __init__(self, container: Any, **kwargs: Any):
        super().__init__(config_class=ContainerExecConfig, **kwargs)
        self.container = container

    def execute(self, action: dict, cwd: str = "", *, timeout: int | None = None) -> dict[str, Any]:
        command = action.get("command", "")
        limit = timeout or self.config.timeout
        # `timeout` inside the container kills the command there; exec_run itself cannot be interrupted
        wrapped = ["timeout", "-k", "5", str(limit), "bash", "-c", command]
        try:
            result = self.container.exec_run(
                wrapped,
                workdir=cwd or self.config.cwd,
                environment=self.config.env or None,
                user=self.config.user,
                demux=False,
            )
            output = (result.output or b"").decode("utf-8", errors="replace")
            if result.exit_code in (124, 137):
                message = f"Command '{shlex.quote(command)}' timed out after {limit} seconds"
                out = {
                    "output": output,
                    "returncode": -1,
                    "exception_info": f"An error occurred while executing the command: {message}",
                    "extra": {"exception_type": "TimeoutExpired", "exception": message},
                }
            else:
                out = {"output": output, "returncode": result.exit_code, "exception_info": ""}
        except Exception as e:
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
