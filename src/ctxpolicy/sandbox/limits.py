"""What a sandboxed command may use and as whom it runs: the one owner of the sandbox's defaults.

docs/sandbox.md explains each limit; `benchmarks.<name>.sandbox` in a study config overrides them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

MIB = 1 << 20
NOBODY = 65534  # the unprivileged host user and group commands run as when root starts the sandbox


@dataclass(frozen=True)
class SandboxLimits:
    pids: int = 512  # processes and threads at once (cgroup pids.max; else RLIMIT_NPROC)
    cpu_s: int = 600  # CPU seconds of each process (RLIMIT_CPU)
    memory_mb: int = 4096  # address space of each process (RLIMIT_AS)
    tmp_mb: int = 512  # size of the private tmpfs at /tmp
    disk_mb: int = 1024  # what the workspace may hold, and the largest file (RLIMIT_FSIZE)
    uid: int = NOBODY  # host uid of every command when root starts the sandbox
    gid: int = NOBODY  # host gid of every command when root starts the sandbox

    @property
    def disk_bytes(self) -> int:
        return self.disk_mb * MIB

    def host_user(self) -> tuple[int, int] | None:
        """The (uid, gid) to switch to, or None when the caller is already unprivileged."""
        return (self.uid, self.gid) if os.geteuid() == 0 else None


DEFAULT_LIMITS = SandboxLimits()
LIMIT_NAMES = tuple(f.name for f in fields(SandboxLimits))


def limits_from_config(section: Mapping[str, Any] | None) -> SandboxLimits:
    """A config's `sandbox` section (already checked by config/schema.yaml) over the defaults."""
    section = dict(section or {})
    unknown = sorted(set(section) - set(LIMIT_NAMES))
    if unknown:
        raise ValueError(f"sandbox: unknown setting(s) {', '.join(unknown)} (known: {', '.join(LIMIT_NAMES)})")
    return SandboxLimits(**{k: int(v) for k, v in section.items()})
