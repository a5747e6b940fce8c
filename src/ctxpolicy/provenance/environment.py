"""What code and which packages produced an output: git state and installed versions."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

DEFAULT_PACKAGES = (
    "ctxpolicy", "mini-swe-agent", "litellm", "snakemake", "snakemake-executor-plugin-slurm",
    "papermill", "pandas", "numpy", "scipy", "statsmodels", "matplotlib", "seaborn",
    "swebench", "xllamacpp", "tiktoken",
)


def _git(repo_root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(repo_root), *args],
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def code_state(repo_root: str | Path) -> dict:
    """``{"commit": sha, "dirty": bool}`` of the git tree at ``repo_root``; both None without git.

    Dirty means tracked changes or untracked files that are not ignored: an untracked notebook
    or module can change a figure as surely as an edited one.
    """
    commit = _git(Path(repo_root), "rev-parse", "--verify", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git(Path(repo_root), "status", "--porcelain")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def package_versions(names: list[str] | tuple[str, ...] | None = None) -> dict[str, str | None]:
    """Installed version of each distribution (None where it is not installed), sorted by name."""
    versions = {}
    for name in sorted(names if names is not None else DEFAULT_PACKAGES):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def python_version() -> str:
    return platform.python_version()
