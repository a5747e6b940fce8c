"""The workspace's disk quota holds at every moment (real bubblewrap, real loop-mounted images).

Each command here writes past an 8 MiB quota faster than anything could look at it from outside:
the write itself must fail (ENOSPC inside the sandbox), the run must end as a disk-quota error,
and the host must never hold more than the limit, during the run and after it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from conftest import require

from ctxpolicy.benchmarks import get_adapter
from ctxpolicy.sandbox import SandboxLimits, bwrap_available, quota

pytestmark = pytest.mark.sandbox

LIMITS = SandboxLimits(tmp_mb=8, disk_mb=8)


def host_bytes(top: Path) -> int:
    """What the host's own filesystem holds under `top`: each inode once, never inside a mount."""
    device, total, seen = os.lstat(top).st_dev, 0, set()
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == device]
        for name in dirs + files:
            st = os.lstat(os.path.join(root, name))
            if st.st_dev == device and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


@pytest.fixture
def adapter(tmp_path: Path):
    require(bwrap_available(), "bubblewrap (Debian package bubblewrap) able to create a sandbox")
    require(quota.mount_method() is not None, "root (loop devices) or fuse2fs, to mount the workspace's image")
    sandbox = {"tmp_mb": LIMITS.tmp_mb, "disk_mb": LIMITS.disk_mb}
    return get_adapter(
        "local", {"adapter": "local", "environment": "bwrap", "cohorts": {}, "sandbox": sandbox}, tmp_path
    )


@pytest.fixture
def run(adapter, tmp_path: Path):
    """A terminal task's workspace as a run has it: prepared by the adapter, its environment."""
    task = adapter.task("hello-world")
    workspace = tmp_path / "run" / "workspace"
    workspace.mkdir(parents=True)
    adapter.prepare_workspace(task, workspace)
    env = adapter.make_environment(task, workspace, 30)
    return task, workspace, env


def over_quota(env, command: str) -> str:
    """Run `command`, which must end the run as a disk-quota error; its output."""
    from minisweagent.exceptions import InterruptAgentFlow

    from ctxpolicy.agent.runner import outcome_of

    with pytest.raises(InterruptAgentFlow) as exc:
        env.execute({"command": command})
    message = exc.value.messages[0]
    assert outcome_of(message["extra"]["exit_status"]) == "error"
    assert message["extra"]["reason"].startswith("sandbox: disk quota exceeded"), message["extra"]["reason"]
    return message["content"]


def assert_host_bounded(run_dir: Path) -> None:
    held = host_bytes(run_dir)
    assert held <= LIMITS.disk_bytes, f"the host holds {held / 2**20:.1f} MiB of a {LIMITS.disk_mb} MiB quota"


def test_fallocate_past_the_quota_fails_inside_and_never_reaches_the_host(run):
    task, workspace, env = run
    output = over_quota(env, "for i in 1 2 3 4 5 6 7 8; do fallocate -l 4M f$i; done; echo done")
    assert "No space left on device" in output
    assert_host_bounded(workspace.parent)


def test_dd_past_the_quota_fails_inside_and_never_reaches_the_host(run):
    task, workspace, env = run
    output = over_quota(env, "for i in 1 2 3 4; do dd if=/dev/urandom of=d$i bs=1M count=6 status=none; done")
    assert "No space left on device" in output
    assert_host_bounded(workspace.parent)


def test_many_small_files_run_out_of_room_inside(run):
    task, workspace, env = run
    output = over_quota(env, "for i in $(seq 1 6000); do echo x > s$i || exit 1; done")
    assert "No space left on device" in output
    assert_host_bounded(workspace.parent)


def test_sparse_files_cost_their_data_and_stay_sparse_after_the_run(adapter, run):
    task, workspace, env = run
    holes = env.execute({"command": "for i in 1 2 3 4 5 6 7 8; do truncate -s 8M h$i; done; echo ok"})
    assert holes["returncode"] == 0 and "ok" in holes["output"]  # 64 MiB of holes cost nothing
    fill = "for i in 1 2 3 4 5 6 7 8; do dd if=/dev/urandom of=h$i bs=1M count=2 conv=notrunc status=none; done"
    assert "No space left on device" in over_quota(env, fill)
    assert_host_bounded(workspace.parent)
    adapter.release_workspace(task, workspace)  # the run is over: a plain folder again
    assert not os.path.ismount(workspace) and (workspace / "h1").stat().st_size == 8 << 20
    assert_host_bounded(workspace.parent)  # copied out with its holes, not as 64 MiB of zeros


def test_hard_links_count_once_and_stay_links_after_the_run(adapter, run):
    task, workspace, env = run
    made = env.execute(
        {"command": "dd if=/dev/urandom of=a bs=1M count=5 status=none && for i in 1 2 3 4 5; do ln a l$i; done"}
    )
    assert made["returncode"] == 0, made["output"]  # one 5 MiB file under six names is 5 MiB
    adapter.release_workspace(task, workspace)
    assert os.lstat(workspace / "a").st_nlink == 6
    assert_host_bounded(workspace.parent)


def test_the_workspace_is_gone_after_grading_unless_kept(tmp_path: Path):
    require(bwrap_available(), "bubblewrap (Debian package bubblewrap) able to create a sandbox")
    require(quota.mount_method() is not None, "root (loop devices) or fuse2fs, to mount the workspace's image")
    from ctxpolicy.benchmarks.base import RunRecord

    kept = {}
    for keep in (False, True):
        cfg = {"adapter": "local", "environment": "bwrap", "cohorts": {}, "keep_workspaces": keep}
        adapter = get_adapter("local", cfg, tmp_path)
        run_dir = tmp_path / f"keep-{keep}"
        workspace = run_dir / "workspace"
        workspace.mkdir(parents=True)
        task = adapter.task("hello-world")
        adapter.prepare_workspace(task, workspace)
        (workspace / "hello.txt").write_text("Hello, world!\n")
        os.mkfifo(workspace / "trap")  # copied out and into the graded copy as a FIFO, never opened
        adapter.release_workspace(task, workspace)
        assert stat.S_ISFIFO(os.lstat(workspace / "trap").st_mode)
        record = RunRecord(run_dir=run_dir, task_id="hello-world", attempt=1, submission="", patch=None)
        verdict = adapter.grade_run(record, tmp_path / f"log-{keep}")
        assert verdict.resolved, Path(verdict.log).read_text()
        kept[keep] = workspace.exists()
        assert not quota.image_path(workspace).exists()
    assert kept == {False: False, True: True}


def test_without_loop_devices_fuse2fs_holds_the_same_quota(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The unprivileged path (fuse2fs), taken here by root: the same image, the same bound."""
    import shutil

    from ctxpolicy.sandbox import run_sandboxed

    require(bwrap_available(), "bubblewrap (Debian package bubblewrap) able to create a sandbox")
    require(shutil.which("fuse2fs") is not None and os.path.exists("/dev/fuse"), "fuse2fs (Debian package fuse2fs)")
    monkeypatch.setattr(quota, "mount_methods", lambda: ["fuse2fs"])
    workspace = tmp_path / "run" / "workspace"
    with quota.bounded_directory(workspace, LIMITS):
        assert quota.is_quota_mount(workspace)
        result = run_sandboxed("dd if=/dev/urandom of=d bs=1M count=20 status=none", workspace, 30, limits=LIMITS)
        assert "No space left on device" in result.output and result.limit == "disk", result.output
        assert_host_bounded(workspace.parent)
    assert not os.path.ismount(workspace) and not quota.image_path(workspace).exists()


def test_tables_written_past_a_real_quota_fail_whole_and_keep_the_old_tables(tmp_path: Path):
    """A table the full disk refuses is an error, its temporary file goes, and the tables written
    before stay as they were."""
    import numpy as np
    import pandas as pd

    from ctxpolicy.metrics.aggregate import Tables, write_tables

    require(quota.mount_method() is not None, "root (loop devices) or fuse2fs, to mount an image")
    runs = pd.DataFrame({"run_dir": ["a"], "resolved": [True]})
    small = pd.DataFrame({"x": np.arange(10.0)})
    large = pd.DataFrame({"x": np.random.default_rng(0).random(3_000_000)})  # 24 MB of incompressible floats
    with quota.bounded_directory(tmp_path / "tables", LIMITS) as out:
        written = [path.read_bytes() for path in write_tables(Tables(runs, small), out)]
        with pytest.raises(OSError) as failed:
            write_tables(Tables(runs, large), out)
        assert "No space left on device" in str(failed.value)
        assert [path.read_bytes() for path in (out / "runs.parquet", out / "calls.parquet")] == written
        assert sorted(p.name for p in out.iterdir() if p.name != "lost+found") == ["calls.parquet", "runs.parquet"]
