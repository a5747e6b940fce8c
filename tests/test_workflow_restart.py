"""Killing Snakemake in the middle of a cell and starting it again loses no completed run and
redoes none: the cell's only declared output is cell.json (written last), so Snakemake never
deletes run directories, and `ctxpolicy run-cell` skips runs whose run.json is complete."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import require
from workflow_helpers import (
    ROOT,
    SMALL_MODEL_RUNS,
    bubblewrap_ready,
    embedded_model_ready,
    snakemake_command,
    workflow_env,
    write_study,
)

# three short runs (a few tokens a call): the kill comes after the first completes, while the
# other two are still to do (a third run keeps the kill inside the cell even when the second is
# quick), and the restart has them to do
TASKS = ["hello-world", "count-errors", "fix-permissions"]
SHORT_CALLS = {"models.qwen05b.max_tokens": 24}
CELL = "results/runs/local/qwen05b/FC"


def complete_runs(cell_dir: Path) -> dict[str, tuple[int, int, str, str]]:
    """run dir -> (inode, mtime_ns, sha256 of run.json, sha256 of calls.jsonl) for every complete run."""
    found = {}
    for run_json in sorted(cell_dir.glob("*__a*/run.json")):
        try:
            if not json.loads(run_json.read_text()).get("complete"):
                continue
        except (OSError, json.JSONDecodeError):
            continue
        stat = run_json.stat()
        calls = run_json.with_name("calls.jsonl")
        found[run_json.parent.name] = (stat.st_ino, stat.st_mtime_ns, sha(run_json), sha(calls))
    return found


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.llm
@pytest.mark.sandbox
def test_kill_mid_cell_then_restart_keeps_every_completed_run(tmp_path):
    require(embedded_model_ready(), "the embedded model (scripts/bootstrap.sh assembles it)")
    require(bubblewrap_ready(), "bubblewrap (Debian package bubblewrap)")
    config = write_study(
        tmp_path, "test_workflow.yaml", {"main": TASKS, "sweep": TASKS[:1]}, **SMALL_MODEL_RUNS, **SHORT_CALLS
    )
    command = snakemake_command(tmp_path, config, f"{CELL}/cell.json", "--cores", "2")
    cell_dir = tmp_path / CELL

    first = subprocess.Popen(
        command,
        cwd=ROOT,
        env=workflow_env(),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 1200
        while not complete_runs(cell_dir):
            assert first.poll() is None, f"snakemake ended before any run completed:\n{first.stdout.read()[-3000:]}"
            assert time.monotonic() < deadline, "no run completed within 20 minutes"
            time.sleep(0.2)
        assert not (cell_dir / "cell.json").exists(), "the cell finished before it could be killed"
        servers = [json.loads(p.read_text()) for p in (tmp_path / "results" / ".servers").glob("*.json")]
        assert servers, "the local run used no shared model server"
        pids = [pid for server in servers for pid in (server["serve_pid"], server["pid"])]
        # the harshest kill: Snakemake, the job's shell and run-cell at once, mid-run (the model
        # server follows its parent); a half-written run directory is left behind
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=120)
        for _ in range(300):  # the cell's run-cell and model server go down with it
            if not group_alive(first.pid):
                break
            time.sleep(0.2)
        assert not group_alive(first.pid), "processes of the killed workflow are still running"
        # the run's shared model server (its own session) follows its owner, Snakemake
        for _ in range(100):
            if not any(Path(f"/proc/{pid}").exists() for pid in pids):
                break
            time.sleep(0.2)
        assert not any(Path(f"/proc/{pid}").exists() for pid in pids), "the shared model server outlived Snakemake"
    finally:
        if group_alive(first.pid):
            os.killpg(first.pid, signal.SIGKILL)

    before = complete_runs(cell_dir)
    assert 1 <= len(before) < len(TASKS)
    assert not (cell_dir / "cell.json").exists()

    # a hard kill leaves Snakemake's lock behind: --unlock, as Snakemake itself asks
    unlock = subprocess.run(
        snakemake_command(tmp_path, config, "--unlock"),
        cwd=ROOT,
        env=workflow_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unlock.returncode == 0, unlock.stderr[-2000:]
    second = subprocess.run(command, cwd=ROOT, env=workflow_env(), capture_output=True, text=True, timeout=1800)
    assert second.returncode == 0, (second.stdout + second.stderr)[-3000:]

    after = complete_runs(cell_dir)
    assert sorted(after) == sorted(f"{task}__a1" for task in TASKS)
    for run, stat in before.items():
        assert after[run] == stat, f"{run} was redone or changed by the restart"
    listed = json.loads((cell_dir / "cell.json").read_text())
    assert len(listed["runs"]) == len(TASKS)
