"""scripts/slurm-local.sh leaves a dormant slurm.conf when no controller runs, so that the SLURM
executor plugin's `scontrol show config` at every `snakemake` start fails at once instead of
waiting 9 s (stopped controller) or 59 s (no config). Runs against a scratch SLURM_CONF."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from conftest import require

ROOT = Path(__file__).resolve().parents[1]


def _script(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLURM_CONF": str(tmp_path / "slurm.conf"), "CTXPOLICY_SLURM_STATE": str(tmp_path / "state")}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm-local.sh"), *args], env=env, capture_output=True, text=True, timeout=60
    )


def test_dormant_config_makes_scontrol_fail_at_once(tmp_path):
    require(shutil.which("scontrol") is not None, "SLURM client (Debian package slurm-client)")
    assert _script(tmp_path, "dormant").returncode == 0
    conf = (tmp_path / "slurm.conf").read_text()
    assert conf.startswith("# managed by ctxpolicy scripts/slurm-local.sh") and "\nMessageTimeout=1\n" in conf
    # the test suite's own local cluster may be up on the default port: point the scratch config at
    # a port nobody listens on, which is what a stopped controller looks like
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        free_port = probe_socket.getsockname()[1]
    (tmp_path / "slurm.conf").write_text(conf + f"SlurmctldPort={free_port}\n")
    start = time.monotonic()
    probe = subprocess.run(
        ["scontrol", "show", "config"],
        env={**os.environ, "SLURM_CONF": str(tmp_path / "slurm.conf")},
        capture_output=True,
        timeout=120,
    )
    assert probe.returncode != 0 and time.monotonic() - start < 2.0


def test_a_foreign_config_is_left_alone(tmp_path):
    (tmp_path / "slurm.conf").write_text("ClusterName=theirs\n")
    done = _script(tmp_path, "dormant")
    assert done.returncode == 0 and "not managed here" in done.stderr
    assert (tmp_path / "slurm.conf").read_text() == "ClusterName=theirs\n"
