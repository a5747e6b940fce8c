"""What produced a run: our commit, the harness and client versions, Python."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import subprocess
from pathlib import Path

from ctxpolicy.gitstate import code_state
from ctxpolicy.paths import REPO_ROOT  # noqa: F401  (agent.settings and agent.plan import it from here)


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def software_versions() -> dict:
    """Computed once per process: the runs of a cell share it."""
    code = code_state()
    return {
        "ctxpolicy": _version("ctxpolicy"),
        "git_commit": code["commit"],
        "git_dirty": code["dirty"],
        "mini_swe_agent": _version("mini-swe-agent"),
        "litellm": _version("litellm"),
        "python": platform.python_version(),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _gpus() -> list[str]:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


@functools.lru_cache(maxsize=1)
def hardware() -> dict:
    """The host a run's harness ran on (the model server may be elsewhere: see versions.server)."""
    import os

    return {
        "host_cpu": _cpu_model(),
        "host_cores": os.cpu_count(),
        "host_memory_gib": _memory_gib(),
        "gpus": _gpus(),
        "platform": platform.platform(),
    }
