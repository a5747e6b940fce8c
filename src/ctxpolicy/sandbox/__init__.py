"""Sandboxed execution of shell commands (bubblewrap): the workspace is the only writable
place, there is no network, commands run as an unprivileged user within resource limits, and a
command's whole process tree dies at its timeout (docs/sandbox.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxpolicy.sandbox.bwrap import SandboxResult, bwrap_available, hand_over, run_sandboxed
from ctxpolicy.sandbox.limits import DEFAULT_LIMITS, SandboxLimits, limits_from_config

if TYPE_CHECKING:
    from ctxpolicy.sandbox.environment import SandboxEnvironment

__all__ = [
    "DEFAULT_LIMITS",
    "SandboxEnvironment",
    "SandboxLimits",
    "SandboxResult",
    "bwrap_available",
    "hand_over",
    "limits_from_config",
    "run_sandboxed",
]


def __getattr__(name: str) -> Any:
    # importing mini-swe-agent is slow and chatty; only pay for it when the environment is used
    if name == "SandboxEnvironment":
        from ctxpolicy.sandbox.environment import SandboxEnvironment

        return SandboxEnvironment
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
