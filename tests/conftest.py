"""Shared test fixtures.

Tests that need a real external component (the embedded LLM, bubblewrap, the local SLURM)
use the ``require`` helper: it skips with the reason when the component is missing, unless
CTXPOLICY_REQUIRE_ALL=1 (set by scripts/test.sh and CI), where a missing component fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def require(condition: bool, what: str) -> None:
    if condition:
        return
    if os.environ.get("CTXPOLICY_REQUIRE_ALL") == "1":
        pytest.fail(f"required component missing: {what}")
    pytest.skip(f"missing: {what}")


@pytest.fixture
def sandbox_workspace(tmp_path: Path) -> Path:
    """A fresh, empty workspace folder for the real bubblewrap sandbox (required)."""
    from ctxpolicy.sandbox import bwrap_available

    require(bwrap_available(), "bubblewrap (Debian package bubblewrap) able to create a sandbox")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
def figure_root(monkeypatch):
    """Run a figure test from the repository root in the house style; close its figures after."""
    import matplotlib.pyplot as plt

    from ctxpolicy.figures import style

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    style.apply()
    yield
    plt.close("all")
