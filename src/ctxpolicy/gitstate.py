"""The git state of the code that is running: its commit, and whether tracked files differ from it.

Run records (``ctxpolicy.agent.versions``) and provenance sidecars and bundles
(``ctxpolicy.provenance``) both read it here, so that both apply one rule. Dirty means
tracked changes only: results, executed notebooks and other untracked outputs live inside
the checkout and would otherwise mark every run and figure dirty.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
GIT_TIMEOUT_S = 60


def _git(where: Path, *args: str) -> str | None:
    """``git -C where ARGS`` stdout, or None where git is missing, fails or hangs."""
    try:
        done = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _tracks_package(where: Path) -> bool:
    # a package installed into a virtual environment inside some checkout sits in that
    # checkout's tree without being its code: only a repository that tracks it counts
    return _git(where, "ls-files", "--error-unmatch", "--", "__init__.py") is not None


def code_repo() -> Path | None:
    """Where to read the code's state: the checkout ctxpolicy is installed from, else the
    working directory's repository, else None."""
    if _tracks_package(PACKAGE_DIR):
        return PACKAGE_DIR
    cwd = Path.cwd()
    return cwd if _git(cwd, "rev-parse", "--git-dir") is not None else None


def code_state(repo: str | Path | None = None) -> dict:
    """``{"commit": sha, "dirty": bool}`` of the git tree at ``repo`` (default: ``code_repo()``);
    both None outside a git checkout or one without commits."""
    where = Path(repo) if repo is not None else code_repo()
    commit = _git(where, "rev-parse", "--verify", "HEAD") if where is not None else None
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git(where, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}
