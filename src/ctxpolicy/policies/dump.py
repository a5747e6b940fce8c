"""DUMP: before a summary, save the full history as JSON in the task workspace.

This is the one policy stage that writes a file, so the writer is passed in by the caller
(the agent harness, or ``ctxpolicy compress --dump-dir``); the summary then names the path as
the agent sees it (``visible_dir``, e.g. the workspace's path inside the sandbox).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.atomic import atomic_write_text


@dataclass(frozen=True)
class HistoryDump:
    directory: Path
    visible_dir: str | None = None
    prefix: str = ".ctxpolicy-history"

    def write(self, messages: Sequence[dict], calls: int) -> str:
        """Write ``messages`` atomically as ``{prefix}-{calls:04d}.json``; return the visible path."""
        directory = Path(self.directory)
        name = f"{self.prefix}-{calls:04d}.json"
        text = json.dumps({"messages": list(messages)}, ensure_ascii=False, indent=1, default=str)
        atomic_write_text(directory / name, text)
        return f"{self.visible_dir.rstrip('/')}/{name}" if self.visible_dir else str(directory / name)
