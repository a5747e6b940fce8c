"""Hostile commands against the real bubblewrap sandbox: secrets, fork bombs, disk floods, network."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from ctxpolicy.sandbox import SandboxEnvironment, SandboxLimits, run_sandboxed
from sandbox_helpers import processes_with

pytestmark = pytest.mark.sandbox


@pytest.fixture
def workspace(sandbox_workspace: Path) -> Path:
    return sandbox_workspace


SMALL = SandboxLimits(tmp_mb=32, disk_mb=64)


def test_root_only_files_stay_unreadable(workspace: Path) -> None:
    result = run_sandboxed("head -c 64 /etc/shadow; echo; grep '^Uid:' /proc/self/status", workspace, timeout_s=20)
    assert "Permission denied" in result.output, result.output
    assert "root:" not in result.output
    uids = result.output.split("Uid:")[1].split()
    assert "0" not in uids, f"a sandboxed command ran as host root: {uids}"


def test_fork_bomb_is_capped_and_gone_at_the_timeout(workspace: Path) -> None:
    marker = f"bomb{uuid.uuid4().hex}"
    start = time.monotonic()
    result = run_sandboxed(f": {marker}; bomb() {{ bomb | bomb & }}; bomb; sleep 60", workspace, timeout_s=5)
    elapsed = time.monotonic() - start
    assert result.timed_out
    assert elapsed < 6.5, f"the call returned {elapsed:.1f} s after a 5 s limit"
    assert processes_with(marker) == [], "processes of the fork bomb outlived the call"
    assert "Resource temporarily unavailable" in result.output  # the process cap, not the machine, stopped it


def test_without_a_cgroup_the_process_limit_still_caps_the_bomb(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ctxpolicy.sandbox.bwrap.PidsCgroup.create", lambda max_pids: None)  # RLIMIT_NPROC path
    assert int(run_sandboxed("ulimit -u", workspace, timeout_s=20).output) >= SandboxLimits().pids
    marker = f"bomb{uuid.uuid4().hex}"
    result = run_sandboxed(f": {marker}; bomb() {{ bomb | bomb & }}; bomb; sleep 60", workspace, timeout_s=2)
    assert result.timed_out and result.duration_s < 3.5
    assert processes_with(marker) == []
    assert "Resource temporarily unavailable" in result.output


def test_a_2_gb_file_in_the_workspace_hits_the_disk_quota(workspace: Path) -> None:
    result = run_sandboxed(
        "dd if=/dev/zero of=big bs=1M count=2048 status=none; echo exit=$?", workspace, timeout_s=30, limits=SMALL
    )
    assert result.limit == "disk" and "disk quota exceeded" in result.reason
    assert "[sandbox: disk quota exceeded" in result.output
    assert (workspace / "big").stat().st_size <= SMALL.disk_bytes


def test_many_files_in_the_workspace_stop_the_command(workspace: Path) -> None:
    flood = "for i in $(seq 1 2048); do head -c 1048576 /dev/zero > f$i; done; sleep 60"
    result = run_sandboxed(flood, workspace, timeout_s=30, limits=SMALL)
    assert not result.timed_out and result.duration_s < 10
    assert result.limit == "disk", result.output[-500:]


def test_a_2_gb_file_in_tmp_hits_the_tmpfs_size(workspace: Path) -> None:
    result = run_sandboxed(
        "dd if=/dev/zero of=/tmp/big bs=1M count=2048 status=none; df -m /tmp | tail -1",
        workspace,
        timeout_s=30,
        limits=SMALL,
    )
    assert "No space left on device" in result.output, result.output
    assert f" {SMALL.tmp_mb} " in result.output  # df shows the tmpfs's size in MiB


def test_disk_quota_ends_the_agent_run_as_an_error(workspace: Path) -> None:
    from minisweagent.exceptions import InterruptAgentFlow

    from ctxpolicy.agent.runner import outcome_of

    env = SandboxEnvironment(workspace, timeout=30, limits=SMALL)
    with pytest.raises(InterruptAgentFlow) as exc:
        env.execute({"command": "dd if=/dev/zero of=big bs=1M count=2048"})
    extra = exc.value.messages[0]["extra"]
    assert outcome_of(extra["exit_status"]) == "error"
    assert extra["reason"].startswith("sandbox: disk quota exceeded")


def test_no_route_out(workspace: Path) -> None:
    probe = (
        "python - <<'EOF'\nimport socket\nfor host in ('1.1.1.1', '8.8.8.8'):\n    try:\n"
        "        socket.create_connection((host, 53), timeout=3)\n        print('reached', host)\n"
        "    except OSError as e:\n        print('blocked', host, e)\nEOF"
    )
    result = run_sandboxed(probe, workspace, timeout_s=20)
    assert "reached" not in result.output
    assert result.output.count("Network is unreachable") == 2, result.output


def test_limits_hold_as_the_unprivileged_user(workspace: Path) -> None:
    result = run_sandboxed("ulimit -t; ulimit -v; ulimit -f", workspace, timeout_s=20, limits=SMALL)
    cpu, memory_kib, file_blocks = result.output.split()
    assert int(cpu) == SMALL.cpu_s and int(memory_kib) == SMALL.memory_mb * 1024
    assert int(file_blocks) * 1024 == SMALL.disk_bytes
    if os.geteuid() == 0:  # raising a hard limit back needs privileges the command no longer has
        assert run_sandboxed("ulimit -f unlimited", workspace, timeout_s=20).returncode != 0


def test_a_fifo_left_in_the_workspace_does_not_break_grading(workspace: Path, tmp_path: Path) -> None:
    import threading

    from ctxpolicy.benchmarks import get_adapter

    adapter = get_adapter("local", {"adapter": "local", "environment": "bwrap", "cohorts": {}}, tmp_path)
    # copying a FIFO fails (shutil) or blocks (a plain open); either way one run must not stop the cell's grading
    assert (
        run_sandboxed(
            "mkfifo trap && python -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"sock\")'",
            workspace,
            timeout_s=20,
        ).returncode
        == 0
    )
    log_dir = tmp_path / "log"
    log_dir.mkdir()
    verdicts: list = []
    grader = threading.Thread(
        target=lambda: verdicts.append(adapter.grade_state("hello-world", workspace, log_dir)), daemon=True
    )
    grader.start()
    grader.join(60)
    assert not grader.is_alive(), "grading blocked on a FIFO the agent left behind"
    assert verdicts, "grading raised on special files the agent left behind"
    assert not verdicts[0].resolved
