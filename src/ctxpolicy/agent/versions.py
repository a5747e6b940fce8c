"""What produced a run: our commit, the harness and client versions, Python."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def software_versions() -> dict:
    """Computed once per process: the runs of a cell share it."""
    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "ctxpolicy": _version("ctxpolicy"),
        "git_commit": commit,
        "git_dirty": None if status is None else bool(status),
        "mini_swe_agent": _version("mini-swe-agent"),
        "litellm": _version("litellm"),
        "python": platform.python_version(),
    }
