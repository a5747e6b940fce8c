"""SIGTERM/SIGINT to a real `ctxpolicy run-cell` process: every process it started is gone within
seconds, nothing in flight is recorded as complete, and the cell lock names it while it works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from agent_helpers import TASKS, offline_study
from fake_llm_server import FakeLLMServer

from ctxpolicy import cli
from ctxpolicy.rundir import is_complete_run


class StuckLLMServer(FakeLLMServer):
    """hello-world: the model runs a command that outlives the test; csv-sum: the request hangs."""

    def respond(self, body: dict):
        text = "\n".join(str(m.get("content") or "") for m in body.get("messages") or [])
        with self._lock:
            self.requests.append(body)
        if "csv" in text.lower():
            self._stop.wait(self.hang_s)
            return 503, {"error": {"message": "hung"}}
        return 200, self._completion(body, "THOUGHT: wait.", "sleep 60")


@pytest.fixture
def study(tmp_path):
    return offline_study(tmp_path)


def _wait_for(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def _sleeping_command(proc: psutil.Process) -> list[psutil.Process]:
    assert proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE, "run-cell ended early"
    try:
        tree = proc.children(recursive=True)
    except psutil.Error:
        return []
    return tree if any(p.name() == "sleep" for p in tree if p.is_running()) else []


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_cell_kills_its_processes_and_records_nothing_in_flight(study, tmp_path, capsys, signum):
    cell_dir = tmp_path / "cell"
    argv = [
        sys.executable,
        "-m",
        "ctxpolicy",
        "run-cell",
        "--config",
        str(study),
        "--benchmark",
        "local",
        "--model",
        "qwen05b",
        "--policy",
        "FC",
        "--concurrency",
        "2",
        "--no-progress",
        "--out",
        str(cell_dir),
    ]
    with StuckLLMServer(hang_s=60) as server:
        child = subprocess.Popen(
            [*argv, "--endpoint", server.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            proc = psutil.Process(child.pid)
            tree = _wait_for(lambda: _sleeping_command(proc), 60, "the sandboxed `sleep 60`")
            _wait_for(lambda: len(server.requests) >= 2, 30, "the hanging request")

            assert cli.main([*argv[3:], "--endpoint", server.url]) == 1  # the lock is held: fails at once
            assert f"pid {child.pid}" in capsys.readouterr().err

            started = time.monotonic()
            child.send_signal(signum)
            _, err = child.communicate(timeout=15)
            took = time.monotonic() - started
        finally:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
    assert child.returncode == 128 + signum, err
    assert took < 8, f"run-cell took {took:.1f}s to exit"
    _wait_for(
        lambda: not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
        5,
        f"the processes of run-cell to go: {tree}",
    )
    assert not (cell_dir / "cell.json").exists()
    assert not any(is_complete_run(cell_dir / f"{task}__a1") for task in TASKS)
    assert "no cell.json" in err
    # the runs in flight never reach their own release: no workspace may stay mounted on its image
    mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    assert not [m for m in mounts if m.startswith(str(cell_dir))], f"mounts left behind: {mounts}"
