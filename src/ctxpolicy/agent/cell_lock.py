"""One ``run-cell`` per cell directory: an exclusive ``flock`` on ``CELL_DIR/.lock``.

The lock lives as long as the open file description, so it is released whatever way the
process ends (even SIGKILL); the pid written into the file only names the holder in messages.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError

LOCK_FILE = ".lock"


class CellBusy(CtxpolicyError, RuntimeError):
    """Another process holds the cell's lock."""


@contextlib.contextmanager
def cell_lock(cell_dir: Path) -> Iterator[Path]:
    """Hold the cell's lock for the block; raise CellBusy at once when another process holds it."""
    path = Path(cell_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise CellBusy(
                f"{cell_dir}: another run-cell (pid {holder}) is working on this cell (lock {path})"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock
