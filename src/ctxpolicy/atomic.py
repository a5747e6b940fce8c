"""Atomic file writes: readers see the old file or the complete new one, never half of one.

The data goes to a temporary file in the target's folder (so the rename cannot cross file
systems), is flushed and, for durable writes, fsynced; then it is renamed over the target
and the folder is fsynced so that the rename itself survives a crash. On any error the
temporary file is removed and the target is left as it was.

Standard library only: every room may import it.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# What open() would have given: mkstemp's 0600 would hide the file from other users.
FILE_MODE = 0o666 & ~_umask()


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "wb", durable: bool = True) -> Iterator[IO]:
    """Yield a temporary file in ``path``'s folder, renamed over ``path`` when the block ends.

    ``mode`` is ``"wb"`` (bytes) or ``"w"`` (UTF-8 text). ``durable`` fsyncs the file before
    the rename and the folder after it; bulk writers that sync once at the end pass False.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_output: mode {mode!r}: expected 'wb' or 'w'")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, encoding=None if mode == "wb" else "utf-8") as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, durable: bool = True) -> Path:
    """Write ``data`` to ``path`` atomically; return ``path``."""
    with atomic_output(path, "wb", durable) as handle:
        handle.write(data)
    return Path(path)


def atomic_write_text(path: str | os.PathLike, text: str, durable: bool = True) -> Path:
    """Write ``text`` as UTF-8, byte for byte (no newline translation), atomically; return ``path``."""
    return atomic_write_bytes(path, text.encode("utf-8"), durable)


def atomic_write_json(path: str | os.PathLike, data: Any, durable: bool = True, **json_kwargs: Any) -> Path:
    """Write ``json.dumps(data, **json_kwargs)`` and a final newline atomically; return ``path``."""
    return atomic_write_text(path, json.dumps(data, **json_kwargs) + "\n", durable)


def sync_disks() -> None:
    """Flush every file system's written data to disk (``sync``): one call makes the files a bulk
    writer wrote with ``durable=False`` durable, where an fsync each costs milliseconds each."""
    os.sync()


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems cannot fsync a directory; the rename is done regardless
        pass
    finally:
        os.close(fd)
