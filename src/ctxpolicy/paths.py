"""The repository root: the checkout ctxpolicy runs from (``src/ctxpolicy/`` lies two levels below it).

Relative paths in a config (cohort files, the agent and prompt folders) are relative to it, never
to the current directory, so that ``snakemake -d DIR`` and a command started anywhere read the
same files. Standard library only: every room may import it.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "config"


def in_repo(path: str | Path) -> Path:
    """``path`` as given when absolute, else relative to the repository root."""
    path = Path(path)
    return path if path.is_absolute() else REPO_ROOT / path
