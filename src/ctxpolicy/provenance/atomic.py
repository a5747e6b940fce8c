"""Atomic file writes: readers see the old file or the new one, never half of one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()   # what open() would have given: mkstemp's 0600 hides files from others


@contextmanager
def atomic_output(path: Path, durable: bool = True) -> Iterator[BinaryIO]:
    """Write ``path`` through a temporary file in the same directory, renamed into place on
    success and removed on failure. ``durable`` fsyncs before the rename; bulk writers that
    sync once at the end pass False."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_output(path) as handle:
        handle.write(text.encode("utf-8"))
