"""Shared helpers of the trajectory-page tests: the embedded data of a page, its event blocks."""

from __future__ import annotations

import json
import re
from pathlib import Path

DATA_RE = re.compile(r'<script type="application/json" id="ctxpolicy-data">(.*?)</script>', re.DOTALL)


def page_data(html: str) -> dict:
    """The JSON a page embeds (its one data block)."""
    blocks = DATA_RE.findall(html)
    assert len(blocks) == 1, f"{len(blocks)} data blocks"
    return json.loads(blocks[0])


def render(run: Path, out: Path, *extra: str) -> str:
    from ctxpolicy.cli import main

    assert main(["view", "--runs", str(run), "--out", str(out), *extra]) == 0
    return out.read_text(encoding="utf-8")
