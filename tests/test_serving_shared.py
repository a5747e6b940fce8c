"""The shared model server of a local Snakemake run (ctxpolicy.serving.shared): started once by
the first cell, reused by the next, gone within seconds of its owner (Snakemake) being killed.
A stand-in vLLM executable (test_serving's) plays the model server; the processes are real."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import yaml
import test_serving

from ctxpolicy.agent.cell import cell_endpoint
from ctxpolicy.study.config import load_config
from ctxpolicy.serving import health
from ctxpolicy.serving.shared import ENV, Session, alive, attach, session_from_environment, stop_all

ROOT = Path(__file__).resolve().parents[1]
fake_vllm = test_serving.fake_vllm  # the stand-in vLLM executable, as a fixture of this module too


@pytest.fixture
def study(tmp_path: Path, fake_vllm) -> Path:
    config = yaml.safe_load((ROOT / "config" / "test_workflow.yaml").read_text())
    config["models"]["qwen05b"] = {**fake_vllm("ok"), "max_model_len": 4096, "startup_timeout_s": 30}
    config["results_dir"] = str(tmp_path / "results")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture
def owner():
    process = subprocess.Popen(["sleep", "120"])  # stands in for Snakemake
    yield process
    process.kill()
    process.wait()


def _gone_within(pids: list[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def test_cells_share_one_server_that_dies_with_its_owner(study, owner, tmp_path, monkeypatch, fake_vllm):
    session = Session(owner.pid, tmp_path / "results" / ".servers")
    monkeypatch.setenv(ENV, session.announce())
    config = load_config(study)
    urls = []
    for cell in ("a", "b"):
        with cell_endpoint(
            config["models"]["qwen05b"],
            study,
            "qwen05b",
            url=None,
            served_name=None,
            log_path=tmp_path / cell / "server.log",
        ) as endpoint:
            urls.append(endpoint.base_url)
            assert endpoint.server["kind"] == "vllm"
    assert urls[0] == urls[1] and health.check(urls[0]).ok  # one server, still up between cells
    assert not (tmp_path / "a" / "server.log").exists()
    server_pids = fake_vllm.pids()
    serve_pid = json.loads(next(session.directory.glob("*.json")).read_text())["serve_pid"]

    owner.kill()  # kill -9 of Snakemake: no onerror runs
    owner.wait()
    assert _gone_within([serve_pid, *server_pids], 15), "shared server outlived its owner"
    assert session_from_environment() is None  # a dead owner's session is not used


def test_stop_all_ends_the_session_and_a_new_owner_starts_afresh(study, owner, tmp_path, fake_vllm):
    session = Session(owner.pid, tmp_path / ".servers")
    model_cfg = load_config(study)["models"]["qwen05b"]
    first = attach(session, config_path=study, model="qwen05b", model_cfg=model_cfg)
    pids = fake_vllm.pids()
    stopped = stop_all(session.directory, owner.pid)
    assert len(stopped) == 1 and _gone_within([*stopped, *pids], 15)
    assert not health.check(first.base_url).ok
    assert not list(session.directory.glob("*.json"))  # serve removed its ready file
