"""Run one shell command inside bubblewrap.

The sandbox sees the host's system directories and this Python environment read-only, a
private tmpfs at /tmp of bounded size, and exactly one writable directory: the workspace. It
has its own network namespace (only its own loopback) and its own PID namespace. Started by
root, the command runs as an unprivileged host user (``SandboxLimits.uid``/``gid``), with no
capabilities; started by anyone else, as that user. Every command has a process cap (a
``pids`` cgroup where one can be made, else RLIMIT_NPROC), CPU-time, address-space and
file-size limits, and a workspace disk quota; at its timeout or when it breaks the quota its
whole process tree is killed before the call returns. docs/sandbox.md has the details.
"""

from __future__ import annotations

import functools
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ctxpolicy.sandbox import quota
from ctxpolicy.sandbox.cgroup import PidsCgroup
from ctxpolicy.sandbox.limits import DEFAULT_LIMITS, MIB, SandboxLimits

BWRAP = os.environ.get("CTXPOLICY_BWRAP", "bwrap")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt")
KILL_GRACE_S = 5.0
MAX_OUTPUT_BYTES = 4 << 20
CHUNK_BYTES = 1 << 16
DISK_POLL_S = 0.5
# what root's bwrap keeps until setpriv runs: entering the workspace (which may be 0700 and the
# sandbox user's) and becoming that user; setpriv's switch to a non-zero uid then drops them all
SWITCH_USER_CAPS = ("CAP_DAC_READ_SEARCH", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
DISK_LIMIT = "disk"


@dataclass(frozen=True)
class SandboxResult:
    returncode: int
    output: str
    timed_out: bool
    duration_s: float
    limit: str | None = None  # which limit stopped the command ("disk"), None when none did
    reason: str | None = None  # one line saying so, also appended to the output


def python_prefixes() -> list[Path]:
    """The directories this interpreter needs: the virtual environment and its base Python."""
    prefixes = [Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent]
    # both spellings of a symlinked environment: PATH names sys.prefix, the files live at its target
    return list(dict.fromkeys([*(Path(os.path.abspath(p)) for p in prefixes), *(p.resolve() for p in prefixes)]))


def sandbox_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """A minimal environment: nothing from the host leaks in except what the caller passes."""
    path = [
        str(Path(sys.prefix) / "bin"),
        "/usr/local/bin",
        "/usr/bin",
        "/bin",
        "/usr/local/sbin",
        "/usr/sbin",
        "/sbin",
    ]
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
    limits: SandboxLimits = DEFAULT_LIMITS,
    user: tuple[int, int] | None = None,
) -> list[str]:
    """The bubblewrap command line for `command`; it only looks at which system directories exist.

    With `user` (root starts the sandbox) bwrap runs privileged, without a user namespace, and
    `setpriv` turns the command into that host uid/gid with no capabilities before bash starts;
    without it bwrap makes its own user namespace as usual.
    """
    argv = [BWRAP]
    mounted, made = ["/proc", "/dev"], {"/tmp"}  # the tmpfs is empty: parents under /tmp are made
    for d in system_dirs:
        if os.path.islink(d):  # merged-/usr systems: /bin -> usr/bin
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
            mounted.append(d)
    argv += [
        "--perms",
        "1777",
        "--size",
        str(limits.tmp_mb * MIB),
        "--tmpfs",
        "/tmp",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
    ]
    for p in read_only:  # after the tmpfs, so that an environment under /tmp stays visible
        argv += _parent_dirs(Path(p), mounted, made) + ["--ro-bind", str(p), str(p)]
        mounted.append(str(p))
    argv += _parent_dirs(Path(workspace), mounted, made)
    argv += ["--bind", str(workspace), str(workspace), "--chdir", str(cwd or workspace)]
    if user is None:
        argv += ["--unshare-all", "--share-net"] if network else ["--unshare-all"]
    else:  # no user namespace: the host uid must really change, and setpriv does that inside
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
        argv += [] if network else ["--unshare-net"]
    argv += ["--remount-ro", "/", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    if user is not None:
        uid, gid = user
        argv += [arg for cap in SWITCH_USER_CAPS for arg in ("--cap-add", cap)]
        argv += [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={gid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        ]
    argv += ["bash", "-c", command]
    return argv


def _parent_dirs(target: Path, mounts: list[str], made: set[str]) -> list[str]:
    """`--dir` for each parent of `target` that bwrap would otherwise create with the host's mode
    (a 0700 parent such as /root or a pytest temporary directory would lock the sandbox user out)."""
    argv: list[str] = []
    for parent in reversed(target.parents):
        p = str(parent)
        if p == "/" or p in made or any(p == m or p.startswith(m + "/") for m in mounts):
            continue
        argv += ["--perms", "0755", "--dir", p]
        made.add(p)
    return argv


def limit_argv(limits: SandboxLimits, nproc: int | None) -> list[str]:
    """`prlimit` in front of bwrap: the per-process limits every sandboxed process inherits."""
    argv = ["prlimit", f"--cpu={limits.cpu_s}", f"--as={limits.memory_mb * MIB}", f"--fsize={limits.disk_bytes}"]
    if nproc is not None:
        argv.append(f"--nproc={nproc}")
    return [*argv, "--"]


def hand_over(path: Path, limits: SandboxLimits = DEFAULT_LIMITS) -> None:
    """Give `path` and everything under it to the sandbox user (nothing to do unless root)."""
    user = limits.host_user()
    if user is None:
        return
    uid, gid = user
    os.lchown(path, uid, gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), uid, gid)


def disk_usage(path: Path) -> int:
    """Bytes the files under `path` occupy on disk (symbolic links not followed, a file with
    several hard links counted once)."""
    total, seen = 0, set()
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def workspace_usage(workspace: Path, limits: SandboxLimits, *, running: bool = False) -> tuple[int, bool]:
    """(bytes the workspace holds, whether its quota is reached): from its filesystem when it
    is mounted on its own image (``sandbox.quota``; `running`: while the command runs), else by
    walking it."""
    if quota.is_quota_mount(workspace):
        return quota.usage(workspace, running=running)
    used = disk_usage(workspace)
    return used, used >= limits.disk_bytes


def run_sandboxed(
    command: str,
    workdir: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    network: bool = False,
    *,
    cwd: Path | str | None = None,
    max_output_bytes: int | None = MAX_OUTPUT_BYTES,
    limits: SandboxLimits = DEFAULT_LIMITS,
) -> SandboxResult:
    """Run `command` with bash in the sandbox; `workdir` is the only writable place.

    A workspace not yet owned by the sandbox user is handed over first (root only). On timeout,
    or once the workspace holds `limits.disk_mb` or more, every process of the command is killed
    and the output so far is returned (``timed_out``, or ``limit`` with its ``reason``). Output
    beyond ``max_output_bytes`` keeps its head and tail with a marker in between (None: keep
    all, e.g. for a patch that must stay whole).
    """
    workspace = Path(workdir).resolve()
    if not workspace.is_dir():
        raise FileNotFoundError(f"sandbox workspace does not exist: {workspace}")
    if quota.image_path(workspace).is_file() and not os.path.ismount(workspace):
        # its quota storage is gone (unmounted from outside): never write to the host's disk instead
        raise quota.QuotaUnavailable(f"sandbox workspace {workspace}: its quota image is no longer mounted")
    user = limits.host_user()
    if user is not None and os.stat(workspace).st_uid != user[0]:
        hand_over(workspace, limits)
    chdir = workspace / cwd if cwd else workspace  # a relative cwd is relative to the workspace
    argv = bwrap_argv(
        command, workspace, cwd=chdir, network=network, read_only=python_prefixes(), limits=limits, user=user
    )
    cgroup = PidsCgroup.create(limits.pids)
    if cgroup is None:
        argv = limit_argv(limits, nproc=limits.pids + _tasks_of(user[0] if user else os.getuid())) + argv
    else:  # join the group before bwrap starts, so that nothing the command forks is outside it
        argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup.procs), *limit_argv(limits, None), *argv]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=sandbox_env(env),
            start_new_session=True,
        )
    except BaseException:
        if cgroup is not None:
            cgroup.remove()
        raise
    output = _CappedOutput(max_output_bytes)
    reader = threading.Thread(target=output.drain, args=(proc.stdout,), daemon=True)
    reader.start()
    timed_out, reason = False, None
    try:
        timed_out, reason = _watch(proc, workspace, start + timeout_s, limits)
    finally:
        if proc.poll() is None or timed_out or reason:  # stopped, or interrupted while waiting
            _terminate(proc, cgroup)
        proc.wait()
        if cgroup is not None:  # nothing the command left behind may live on
            cgroup.kill_all(KILL_GRACE_S)
            cgroup.remove()
    reader.join(KILL_GRACE_S)  # every writer of the pipe is gone, so it is at EOF
    if reason is None:
        used, full = workspace_usage(workspace, limits)
        reason = _disk_reason(used, limits) if full else None
    text = output.text() + (f"\n[sandbox: {reason}]\n" if reason else "")
    return SandboxResult(
        returncode=proc.returncode,
        output=text,
        timed_out=timed_out,
        duration_s=time.monotonic() - start,
        limit=DISK_LIMIT if reason else None,
        reason=reason,
    )


def _watch(proc: subprocess.Popen, workspace: Path, deadline: float, limits: SandboxLimits) -> tuple[bool, str | None]:
    """Wait for the command, checking the workspace's size as it runs; (timed out, reason a limit stopped it)."""
    with _ExitWaiter(proc) as exited:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return True, None
            if exited(min(remaining, DISK_POLL_S)):
                return False, None
            used, full = workspace_usage(workspace, limits, running=True)
            if full:
                return False, _disk_reason(used, limits)


class _ExitWaiter:
    """`waiter(timeout_s)` -> whether the process has ended. A pidfd wakes up the moment it ends,
    where `Popen.wait(timeout)` polls with up to 50 ms of delay (used where there is no pidfd)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        try:
            self.pidfd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def __enter__(self) -> _ExitWaiter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)

    def __call__(self, timeout_s: float) -> bool:
        if self.pidfd is not None:
            return bool(select.select([self.pidfd], [], [], timeout_s)[0])
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False


def _disk_reason(used: int, limits: SandboxLimits) -> str:
    return (
        f"disk quota exceeded: the workspace holds {used // MIB} MiB, the limit is {limits.disk_mb} MiB; "
        "the command was stopped"
    )


def _terminate(proc: subprocess.Popen, cgroup: PidsCgroup | None) -> None:
    """Kill the command's whole process tree and return once it is gone.

    bwrap's first child is PID 1 of the sandbox's PID namespace: killing it makes the kernel
    kill every other process in the namespace, and it is not reaped before they all are.
    """
    namespace_init = _children(proc.pid)
    for pid in [*namespace_init, proc.pid]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    proc.wait()
    if cgroup is not None:
        cgroup.kill_all(KILL_GRACE_S)
    deadline = time.monotonic() + KILL_GRACE_S
    for pid in namespace_init:
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.005)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a zombie namespace init has no members left)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _tasks_of(uid: int) -> int:
    """Threads the host user already runs: RLIMIT_NPROC counts them against the sandbox's cap."""
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
            except OSError:
                continue
    return count


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
