"""What the sandbox tests share besides the ``sandbox_workspace`` fixture (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path


def processes_with(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids
