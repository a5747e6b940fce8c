"""The workspace's disk quota: storage whose size is the limit.

A workspace lives on an ext4 filesystem made in a sparse image file of exactly
``SandboxLimits.disk_bytes`` and mounted at the workspace's path, so a write past the limit
fails with ENOSPC inside the sandbox whatever made it (one large file, ``fallocate``, many small
files, sparse files filled in later) and the host never holds more of it than the image's size.
The mount outlives every command (each one is its own bubblewrap process) and is released at the
end of the run: the files are copied out into a plain directory (holes and hard links kept, so
the copy holds no more than the image did) and the image is deleted.

How the image is mounted (``mount_methods``, tried in this order):

- ``loop``: root (containers, CI) mounts it through a loop device (``mount -o loop``);
- ``fuse2fs``: anyone else mounts it in user space with e2fsprogs' ``fuse2fs`` (Debian package
  fuse2fs; needs ``/dev/fuse``), the same image and the same bound;
- neither: `QuotaUnavailable`. There is no fallback that lets the workspace live on the host's
  own disk, because no check from outside (polling its size, RLIMIT_FSIZE) bounds what a command
  writes between two looks.

Written here rather than taken from a library: no Python package mounts filesystem images; this
module only calls mkfs.ext4, mount/umount and fuse2fs/fusermount.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.sandbox.limits import SandboxLimits

IMAGE_SUFFIX = ".quota.img"
COPY_SUFFIX = ".quota-copy"
log = logging.getLogger(__name__)
# the quota counts as reached (the run ends) once a command has left less room than this, or no
# inode: a write that failed on a larger remainder only showed the command ENOSPC. While a command
# runs it is stopped only when the filesystem is full (FULL_BYTES), so that every write it made
# before has had its ENOSPC.
FULL_MARGIN_BYTES = 1 << 20
FULL_MARGIN_FRACTION = 0.02
FULL_BYTES = 64 << 10
TOOL_TIMEOUT_S = 120
# ext4 without a journal or reserved blocks: as much of the image as possible is the workspace's;
# 4 KiB blocks as on the host, so that a copy out of it holds what it held
MKFS_ARGS = ("-q", "-F", "-m", "0", "-b", "4096", "-O", "^has_journal,^resize_inode")


class QuotaUnavailable(CtxpolicyError, RuntimeError):
    """The workspace cannot be put on storage of the limit's size on this machine."""


@dataclass(frozen=True)
class QuotaMount:
    """A workspace mounted on its own image."""

    workspace: Path
    image: Path
    method: str


def image_path(workspace: Path) -> Path:
    """The image of `workspace`: beside it, hidden, never inside it."""
    workspace = Path(workspace)
    return workspace.with_name(f".{workspace.name}{IMAGE_SUFFIX}")


def mount_methods() -> list[str]:
    """How this process may mount an image, in the order tried: ``loop`` (root), ``fuse2fs``."""
    root = os.geteuid() == 0
    methods = []
    if root and shutil.which("mount") and Path("/dev/loop-control").exists():
        methods.append("loop")
    if shutil.which("fuse2fs") and os.access("/dev/fuse", os.R_OK | os.W_OK) and (root or _fusermount()):
        methods.append("fuse2fs")
    return methods


def mount_method() -> str | None:
    """The first way this process may mount an image, or None where it has none."""
    return next(iter(mount_methods()), None)


def is_quota_mount(workspace: Path) -> bool:
    """True when `workspace` is mounted on its own image."""
    return os.path.ismount(workspace) and image_path(workspace).is_file()


def mount(workspace: Path, limits: SandboxLimits) -> QuotaMount:
    """Make `workspace` an empty filesystem of ``limits.disk_bytes`` (an empty or new folder).

    A mount left there by an earlier run that was killed is unmounted first, its image deleted.
    """
    workspace = Path(workspace).absolute()
    methods = mount_methods()
    if not methods:
        raise QuotaUnavailable(
            f"workspace {workspace}: its disk quota needs storage of the limit's size, and this machine "
            "can mount none: run as root (loop devices) or install fuse2fs with a usable /dev/fuse "
            "(docs/sandbox.md, 'Disk quota')"
        )
    if is_quota_mount(workspace):
        release(workspace, keep=False)
    workspace.mkdir(parents=True, exist_ok=True)
    if any(workspace.iterdir()):
        raise QuotaUnavailable(f"workspace {workspace} is not empty: nothing can be mounted over it")
    image = image_path(workspace)
    image.unlink(missing_ok=True)
    with open(image, "wb") as f:  # sparse: the host holds only the blocks the filesystem writes
        f.truncate(limits.disk_bytes)
    owner = (os.getuid(), os.getgid())  # the pipeline's user fills it, then hands it over
    try:
        _tool(["mkfs.ext4", *MKFS_ARGS, "-E", f"nodiscard,root_owner={owner[0]}:{owner[1]}", str(image)])
        method = _mount_first(methods, image, workspace)
    except BaseException:
        image.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):
        os.rmdir(workspace / "lost+found")  # no part of the task's files
    _LIVE.add(workspace)
    return QuotaMount(workspace, image, method)


def _mount_first(methods: list[str], image: Path, workspace: Path) -> str:
    """Mount `image` at `workspace` the first way that works (a container may have the loop
    module but no loop device to give); the method used."""
    problems = []
    for method in methods:
        if method == "loop":
            argv = ["mount", "-o", "loop,nosuid,nodev,noatime", str(image), str(workspace)]
        else:  # root's sandbox user is another uid, which FUSE lets in only with allow_other
            options = "nosuid,nodev,noatime" + (",allow_other" if os.geteuid() == 0 else "")
            argv = ["fuse2fs", "-o", options, str(image), str(workspace)]
        problem = _tool(argv, check=False)
        if problem is None:
            return method
        problems.append(problem)
    raise QuotaUnavailable(f"workspace {workspace}: its image cannot be mounted: {'; '.join(problems)}")


def usage(workspace: Path, *, running: bool = False) -> tuple[int, bool]:
    """(bytes used, whether the quota is reached) of a workspace mounted on its image; `running`:
    while a command runs (reached only when full)."""
    st = os.statvfs(workspace)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    margin = FULL_BYTES if running else max(FULL_MARGIN_BYTES, int(st.f_blocks * st.f_frsize * FULL_MARGIN_FRACTION))
    full = st.f_bavail * st.f_frsize < margin or (st.f_files > 0 and st.f_favail == 0)
    return used, full


def release(workspace: Path, *, keep: bool = True) -> None:
    """End `workspace`'s mount: with `keep`, its files copied out into a plain folder at the
    same path first (holes and hard links kept); then unmounted and the image deleted."""
    workspace = Path(workspace).absolute()
    _LIVE.discard(workspace)
    image = image_path(workspace)
    if not os.path.ismount(workspace):
        image.unlink(missing_ok=True)
        return
    copy = workspace.with_name(f".{workspace.name}{COPY_SUFFIX}")
    if keep:
        shutil.rmtree(copy, ignore_errors=True)
        copy.mkdir()
        # cp, not shutil: it keeps holes and hard links, so the copy holds what the image held
        problem = copy_tree(workspace, copy)
        if problem:
            log.warning("workspace %s: not every file was copied out of its image: %s", workspace, problem)
        shutil.copystat(workspace, copy)
        with contextlib.suppress(OSError):
            os.lchown(copy, os.stat(workspace).st_uid, os.stat(workspace).st_gid)
    _unmount(workspace)
    image.unlink(missing_ok=True)
    if keep:
        shutil.rmtree(workspace, ignore_errors=True)
        os.rename(copy, workspace)


def release_all() -> list[Path]:
    """Unmount every workspace this process mounted and has not released, its image deleted and
    its files not kept: for a process that ends before its runs do (an interrupted cell, whose runs
    in flight record nothing), so that no mount outlives it. The workspaces released."""
    released = []
    for workspace in sorted(_LIVE):
        try:
            release(workspace, keep=False)
        except Exception as exc:  # one stuck mount must not keep the others
            log.warning("workspace %s: could not be unmounted: %s", workspace, exc)
        else:
            released.append(workspace)
    return released


_LIVE: set[Path] = set()  # the workspaces this process has mounted and not released


def copy_tree(source: Path, target: Path) -> str | None:
    """Copy what `source` holds into the existing folder `target` (links, holes, hard links and
    special files kept as they are, nothing followed or opened); a failure as one line, or None."""
    # cp, not shutil: shutil writes a hole as zeros and each hard link as a file of its own
    return _tool(["cp", "-a", "--sparse=always", f"{source}/.", str(target)], check=False)


@contextlib.contextmanager
def bounded_directory(path: Path, limits: SandboxLimits) -> Iterator[Path]:
    """A scratch folder of ``limits.disk_bytes`` (e.g. a copy that is graded), gone afterwards."""
    mount(path, limits)
    try:
        yield Path(path)
    finally:
        release(path, keep=False)


def _unmount(workspace: Path) -> None:
    root = os.geteuid() == 0
    argv = ["umount"] if root else [_fusermount() or "fusermount", "-u"]
    result = subprocess.run([*argv, str(workspace)], capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if result.returncode != 0:  # still busy: detach it now, the kernel frees it once nothing uses it
        _tool([*argv, "-l" if root else "-z", str(workspace)])


def _fusermount() -> str | None:
    return shutil.which("fusermount3") or shutil.which("fusermount")


def _tool(argv: list[str], check: bool = True) -> str | None:
    """Run a system tool; its failure as one line (raised with `check`, else returned)."""
    result = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    if result.returncode == 0:
        return None
    problem = f"{argv[0]} failed ({result.returncode}): {result.stderr.strip()[-300:]}"
    if check:
        raise QuotaUnavailable(problem)
    return problem
