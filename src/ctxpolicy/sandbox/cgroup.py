"""One `pids` cgroup per sandboxed command: a hard cap on its processes and a handle on all of them.

Only the cgroup v1 `pids` hierarchy is used, and only where this process may create a child
group in it (normally: root). Everywhere else `create` returns None and the caller falls back
to RLIMIT_NPROC (see docs/sandbox.md).
"""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from pathlib import Path

GROUP_PREFIX = "ctxpolicy-sandbox"


@functools.lru_cache(maxsize=1)
def pids_root() -> Path | None:
    """This process's own group in the v1 `pids` hierarchy, or None when there is none."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mountpoint = next(
        (f[1] for f in (m.split() for m in mounts) if len(f) > 3 and f[2] == "cgroup" and "pids" in f[3].split(",")),
        None,
    )
    path = next(
        (line.split(":", 2)[2] for line in own if line.count(":") >= 2 and "pids" in line.split(":", 2)[1].split(",")),
        None,
    )
    if mountpoint is None or path is None:
        return None
    root = Path(mountpoint) / path.lstrip("/")
    return root if os.access(root, os.W_OK) else None


class PidsCgroup:
    """A fresh group with `pids.max`; the sandbox joins it by writing its pid to `procs`."""

    def __init__(self, path: Path):
        self.path = path
        self.procs = path / "cgroup.procs"

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        root = pids_root()
        if root is None:
            return None
        _remove_orphans(root / GROUP_PREFIX)
        path = root / GROUP_PREFIX / f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir(parents=True)
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            _rmdir(path)
            return None
        return cls(path)

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs.read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self, within_s: float) -> bool:
        """SIGKILL every member until the group is empty; True when it emptied in time."""
        deadline = time.monotonic() + within_s
        while pids := self.pids():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def remove(self) -> None:
        _rmdir(self.path)


def _remove_orphans(parent: Path) -> None:
    """Remove the groups of processes that died before removing theirs (a group named after a
    dead process can no longer be joined; one still in use is not empty and stays)."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return
    for group in entries:
        owner = group.name.split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            _rmdir(group)


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
