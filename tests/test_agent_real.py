"""One real run end to end: the embedded model on llama.cpp, the offline suite, bubblewrap."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import require

from ctxpolicy.agent.plan import endpoint_for_server, make_identity, repo_root
from ctxpolicy.agent.record import rebuild_prompts
from ctxpolicy.rundir import read_json
from ctxpolicy.rundir import read_calls
from ctxpolicy.agent.runner import OUTCOMES, execute_run
from ctxpolicy.agent.settings import build_settings
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.study.config import load_config
from ctxpolicy.study import Study
from ctxpolicy.policies import parse_spec

MODEL = "qwen05b"
TASK = "tinyweb-001"  # a repository task: the model needs several steps, so prefix reuse shows
THRESHOLD = 300  # low enough that truncation fires within two steps

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def embedded_run(embedded_llm, tmp_path_factory):
    """One run on the shared embedded model server (config/config.yaml's qwen05b), two steps."""
    from ctxpolicy.benchmarks import get_adapter
    from ctxpolicy.sandbox import bwrap_available

    config = load_config(repo_root() / "config" / "config.yaml")
    require(bwrap_available(), "bubblewrap (Debian package bubblewrap)")

    tmp = tmp_path_factory.mktemp("real")
    cohort = tmp / "cohort.txt"
    cohort.write_text(f"{TASK}\n")
    bench_cfg = {**config["benchmarks"]["local"], "cohorts": {"main": str(cohort)}}
    adapter = get_adapter("local", bench_cfg, repo_root())
    adapter.check_environment()
    task = adapter.tasks("main")[0]
    policy = parse_spec("TR/Th/0.5")
    settings = build_settings(
        Study(config), "local", MODEL, overrides={"step_limit": 2, "max_tokens": 128, "wall_time_limit_s": 1200}
    )
    identity = make_identity(
        seed=config["seed"],
        benchmark="local",
        cohort="main",
        model=MODEL,
        policy=policy,
        task=task,
        attempt=1,
        threshold_setting="fixed",
        threshold_tokens=THRESHOLD,
        summarizer=None,
        cell="TR_Th_0.5__fixed",
        track="full",
    )
    return execute_run(
        identity=identity,
        policy=policy,
        task=task,
        adapter=adapter,
        settings=settings,
        endpoint=endpoint_for_server(embedded_llm),
        run_dir=tmp / f"{TASK}__a1",
    )


def test_real_run_completes_with_an_outcome(embedded_run):
    record = read_json(embedded_run.run_dir / "run.json")
    assert record["outcome"] in OUTCOMES and record["outcome"] != "error", record["error"]
    assert record["versions"]["server"]["kind"] == "llamacpp"
    assert record["versions"]["model"]["sha256"]
    assert record["totals"]["agent_calls"] >= 1


def test_real_run_fills_every_telemetry_field(embedded_run):
    calls = list(read_calls(embedded_run.run_dir))
    assert calls
    for call in calls:
        assert call["status"] == "ok"
        assert call["prompt_tokens"] > 0 and call["completion_tokens"] > 0
        assert call["cached_tokens"] is not None  # llama.cpp reports cached prompt tokens
        assert call["latency_s"] > 0 and call["end"] >= call["start"]
        assert call["est_tokens_before"] > 0 and call["est_tokens_after"] > 0
        assert call["message_ids"]
    if len(calls) > 1:
        assert any(c["cached_tokens"] > 0 for c in calls[1:]), "later calls should reuse the cached prefix"


def test_real_run_directory_validates_and_rebuilds(embedded_run):
    assert run_dir_problems(embedded_run.run_dir) == []
    calls = list(read_calls(embedded_run.run_dir))
    prompts = rebuild_prompts(embedded_run.run_dir)
    assert len(prompts) == len(calls)
    assert prompts[0][0]["role"] == "system" and prompts[0][1]["role"] == "user"
    trajectory = read_json(embedded_run.run_dir / "trajectory.json")
    assert trajectory["trajectory_format"] == "mini-swe-agent-1.1"
    assert Path(embedded_run.run_dir / "workspace").is_dir()
