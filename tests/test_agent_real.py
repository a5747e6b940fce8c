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


def _real_run(llm, out: Path, task_id: str, spec: str, cell: str, threshold: int | None, overrides: dict):
    """One run of ``task_id`` on the shared embedded model server (config/config.yaml's qwen05b)."""
    from ctxpolicy.benchmarks import get_adapter
    from ctxpolicy.sandbox import bwrap_available

    config = load_config(repo_root() / "config" / "config.yaml")
    require(bwrap_available(), "bubblewrap (Debian package bubblewrap)")

    cohort = out / "cohort.txt"
    cohort.write_text(f"{task_id}\n")
    bench_cfg = {**config["benchmarks"]["local"], "cohorts": {"main": str(cohort)}}
    adapter = get_adapter("local", bench_cfg, repo_root())
    adapter.check_environment()
    task = adapter.tasks("main")[0]
    policy = parse_spec(spec)
    settings = build_settings(Study(config), "local", MODEL, overrides=overrides)
    identity = make_identity(
        seed=config["seed"],
        benchmark="local",
        cohort="main",
        model=MODEL,
        policy=policy,
        task=task,
        attempt=1,
        threshold_setting="fixed",
        threshold_tokens=threshold,
        summarizer=None,
        cell=cell,
        track="full",
    )
    return execute_run(
        identity=identity,
        policy=policy,
        task=task,
        adapter=adapter,
        settings=settings,
        endpoint=endpoint_for_server(llm),
        run_dir=out / f"{task_id}__a1",
    )


@pytest.fixture(scope="module")
def embedded_run(embedded_llm, tmp_path_factory):
    """Two steps of a repository task under truncation."""
    overrides = {"step_limit": 2, "max_tokens": 128, "wall_time_limit_s": 1200}
    return _real_run(
        embedded_llm, tmp_path_factory.mktemp("real"), TASK, "TR/Th/0.5", "TR_Th_0.5__fixed", THRESHOLD, overrides
    )


def test_real_calls_stop_at_the_closing_fence_and_record_it_closed(embedded_llm, tmp_path):
    """config/config.yaml's stop_after_action, for real: the model writes its command and a blank
    line, llama.cpp stops there (finish_reason "stop", the stop sequence left out, well below the
    cap) and the recorded message has its block closed again."""
    from ctxpolicy.agent.model import FENCE_STOP, parse_text_action

    run = _real_run(
        embedded_llm, tmp_path, "hello-world", "FC", "FC", None, {"step_limit": 1, "wall_time_limit_s": 1200}
    )
    record = read_json(run.run_dir / "run.json")
    assert record["settings"]["stop_after_action"] is True and record["settings"]["max_tokens"] == 128
    [call] = list(read_calls(run.run_dir))
    assert call["finish_reason"] == "stop" and call["completion_tokens"] < 128
    [message] = [m for m in read_json(run.run_dir / "trajectory.json")["messages"] if m["role"] == "assistant"]
    sent = message["extra"]["response"]["choices"][0]["message"]["content"]
    assert message["extra"]["fence_restored"] is True
    assert FENCE_STOP not in sent and message["content"] == sent + "\n```"
    assert (
        parse_text_action(sent) is None and parse_text_action(message["content"]) == 'echo "Hello, world!" > hello.txt'
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
