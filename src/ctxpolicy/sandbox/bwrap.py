"""Run one shell command inside bubblewrap.

The sandbox sees the host's system directories and this Python environment read-only, a
private tmpfs at /tmp, and exactly one writable directory: the workspace. It has its own
network namespace (only its own loopback), its own PID namespace and no capabilities, so
when the command ends or is killed every process it started dies with it.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

BWRAP = os.environ.get("CTXPOLICY_BWRAP", "bwrap")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt")
KILL_GRACE_S = 5.0
MAX_OUTPUT_BYTES = 4 << 20
CHUNK_BYTES = 1 << 16


@dataclass(frozen=True)
class SandboxResult:
    returncode: int
    output: str
    timed_out: bool
    duration_s: float


def python_prefixes() -> list[Path]:
    """The directories this interpreter needs: the virtual environment and its base Python."""
    prefixes = [Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent]
    return list(dict.fromkeys(p.resolve() for p in prefixes))


def sandbox_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: nothing from the host leaks in except what the caller passes."""
    path = [str(Path(sys.prefix) / "bin"), "/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"]
    env = {
        "PATH": ":".join(path),
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONUNBUFFERED": "1",
        "PIP_NO_INDEX": "1",
    }
    env.update(extra or {})
    return env


def bwrap_argv(
    command: str,
    workspace: Path,
    *,
    cwd: Path | None = None,
    network: bool = False,
    system_dirs: Iterable[str] = SYSTEM_DIRS,
    read_only: Iterable[Path] = (),
) -> list[str]:
    """The bubblewrap command line for `command`; it only looks at which system directories exist."""
    argv = [BWRAP]
    for d in system_dirs:
        if os.path.islink(d):  # merged-/usr systems: /bin -> usr/bin
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    argv += ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    for p in read_only:  # after the tmpfs, so that an environment under /tmp stays visible
        argv += ["--ro-bind", str(p), str(p)]
    argv += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd or workspace)]
    argv += ["--unshare-all", "--share-net"] if network else ["--unshare-all"]
    argv += ["--remount-ro", "/", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    argv += ["bash", "-c", command]
    return argv


def run_sandboxed(
    command: str,
    workdir: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    network: bool = False,
    *,
    cwd: Path | str | None = None,
    max_output_bytes: int | None = MAX_OUTPUT_BYTES,
) -> SandboxResult:
    """Run `command` with bash in the sandbox; `workdir` is the only writable place.

    On timeout the whole process group is killed (bubblewrap's PID namespace takes the
    command's descendants with it) and the output so far is returned. Output beyond
    ``max_output_bytes`` keeps its head and tail with a marker in between (None: keep all,
    e.g. for a patch that must stay whole).
    """
    workspace = Path(workdir).resolve()
    if not workspace.is_dir():
        raise FileNotFoundError(f"sandbox workspace does not exist: {workspace}")
    chdir = workspace / cwd if cwd else workspace  # a relative cwd is relative to the workspace
    argv = bwrap_argv(command, workspace, cwd=chdir, network=network, read_only=python_prefixes())
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=sandbox_env(env),
        start_new_session=True,
    )
    output = _CappedOutput(max_output_bytes)
    reader = threading.Thread(target=output.drain, args=(proc.stdout,), daemon=True)
    reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        proc.wait()
    finally:
        if proc.poll() is None:  # interrupted while waiting: never leave the sandbox behind
            _kill_group(proc)
            proc.wait()
    reader.join(KILL_GRACE_S)  # the PID namespace is gone, so the pipe is at EOF
    return SandboxResult(
        returncode=proc.returncode,
        output=output.text(),
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
    )


class _CappedOutput:
    """Collects a stream's head and tail within a byte budget, draining the rest unseen."""

    def __init__(self, max_bytes: int | None):
        self.half = max(1, max_bytes // 2) if max_bytes is not None else sys.maxsize
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def drain(self, stream: BinaryIO) -> None:
        with stream:
            while chunk := stream.read1(CHUNK_BYTES):
                self.total += len(chunk)
                room = self.half - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail += chunk
                    del self.tail[: max(0, len(self.tail) - self.half)]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {dropped} bytes of output omitted ...]\n".encode() if dropped else b""
        return bytes(self.head + marker + self.tail).decode("utf-8", errors="replace")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@functools.lru_cache(maxsize=1)
def bwrap_available() -> bool:
    """True when bubblewrap is installed and can create the sandbox on this host."""
    if shutil.which(BWRAP) is None:
        return False
    with tempfile.TemporaryDirectory(prefix="ctxpolicy-bwrap-probe-") as d:
        try:
            result = run_sandboxed("echo ok", Path(d), timeout_s=20)
        except OSError:
            return False
    return result.returncode == 0 and result.output.strip() == "ok"
