"""Shared test fixtures.

Tests that need a real external component (the embedded LLM, bubblewrap, the local SLURM)
use the ``require`` helper: it skips with the reason when the component is missing, unless
CTXPOLICY_REQUIRE_ALL=1 (set by scripts/test.sh and CI), where a missing component fails.
"""

from __future__ import annotations

import os

import pytest


def require(condition: bool, what: str) -> None:
    if condition:
        return
    if os.environ.get("CTXPOLICY_REQUIRE_ALL") == "1":
        pytest.fail(f"required component missing: {what}")
    pytest.skip(f"missing: {what}")
