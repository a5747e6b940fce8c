"""Shared test fixtures.

Tests that need a real external component (the embedded LLM, bubblewrap, the local SLURM)
use the ``require`` helper: it skips with the reason when the component is missing, unless
CTXPOLICY_REQUIRE_ALL=1 (set by scripts/test.sh and CI), where a missing component fails.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest


def require(condition: bool, what: str) -> None:
    if condition:
        return
    if os.environ.get("CTXPOLICY_REQUIRE_ALL") == "1":
        pytest.fail(f"required component missing: {what}")
    pytest.skip(f"missing: {what}")


def _quota_mounts() -> set[Path]:
    from ctxpolicy.sandbox import quota

    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return set()
    points = {Path(line.split()[1].encode().decode("unicode_escape")) for line in lines if len(line.split()) > 1}
    return {p for p in points if p.name and quota.image_path(p).is_file()}


@pytest.fixture(autouse=True)
def _no_quota_mount_left():
    """A workspace a test mounted on its quota image (the local adapter's prepare_workspace) and
    left mounted is released after it, so that no loop device outlives the test."""
    from ctxpolicy.sandbox import quota

    before = _quota_mounts()
    yield
    for point in _quota_mounts() - before:
        quota.release(point, keep=False)


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


@contextlib.contextmanager
def embedded_llm_server(log_path: Path, ready_timeout_s: float = 180):
    """The embedded model (config/config.yaml's qwen05b) served by llama.cpp for the block
    (required: the server code and the assembled model)."""
    import yaml

    model_cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())
    model_cfg = model_cfg["models"]["qwen05b"]
    try:
        from ctxpolicy.serving.models import cached_model
        from ctxpolicy.serving.server import start_server
    except ImportError:
        cached_model = start_server = None
    require(start_server is not None, "ctxpolicy.serving.start_server")
    require(
        cached_model(model_cfg["gguf"]) is not None,
        f"embedded model (python -m ctxpolicy.serving.models ensure --install {model_cfg['gguf']})",
    )
    with start_server(model_cfg, log_path=log_path, ready_timeout_s=ready_timeout_s) as server:
        yield server


PAPER_TASK_CAP = 6  # tasks per cohort of the paper-shaped test data (docs/synthetic.md)


@pytest.fixture(scope="session")
def paper_tables(tmp_path_factory) -> tuple[Path, Path]:
    """The reduced paper-shaped synthetic data set, built once per session: (tables dir, config path).

    Every cell of config/synthetic-paper.yaml with the first ``PAPER_TASK_CAP`` tasks of each cohort
    and 3 attempts; ``tables/`` holds runs, calls and (attempt 1 audited) events parquet files."""
    from ctxpolicy.testing.paper import build_tables, make_paper_dataset

    out = tmp_path_factory.mktemp("paper-data")
    config = make_paper_dataset(out, task_cap=PAPER_TASK_CAP, processes=2)
    return build_tables(out, processes=2, audit_attempts=1), config
