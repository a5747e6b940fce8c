"""What code and which packages produced an output: git state and installed versions.

The git state is ``ctxpolicy.gitstate``'s, the one run records carry too.
"""

from __future__ import annotations

import platform
from importlib import metadata

from ctxpolicy.gitstate import code_state

__all__ = ["DEFAULT_PACKAGES", "code_state", "package_versions", "python_version"]

DEFAULT_PACKAGES = (
    "ctxpolicy",
    "mini-swe-agent",
    "litellm",
    "snakemake",
    "snakemake-executor-plugin-slurm",
    "papermill",
    "pandas",
    "numpy",
    "scipy",
    "statsmodels",
    "matplotlib",
    "seaborn",
    "swebench",
    "xllamacpp",
    "tiktoken",
)


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
