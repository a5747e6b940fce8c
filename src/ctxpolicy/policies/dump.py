"""DUMP: before a summary, save the full history as JSON in the task workspace.

This is the one policy stage that writes a file, so the writer is passed in by the caller
(the agent harness, or ``ctxpolicy compress --dump-dir``); the summary then names the path as
the agent sees it (``visible_dir``, e.g. the workspace's path inside the sandbox).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HistoryDump:
    directory: Path
    visible_dir: str | None = None
    prefix: str = ".ctxpolicy-history"

    def write(self, messages: Sequence[dict], calls: int) -> str:
        """Write ``messages`` atomically as ``{prefix}-{calls:04d}.json``; return the visible path."""
        directory = Path(self.directory)
        directory.mkdir(parents=True, exist_ok=True)
        name = f"{self.prefix}-{calls:04d}.json"
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"messages": list(messages)}, handle, ensure_ascii=False, indent=1, default=str)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, directory / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return f"{self.visible_dir.rstrip('/')}/{name}" if self.visible_dir else str(directory / name)
