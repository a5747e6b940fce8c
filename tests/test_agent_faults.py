"""Runs against a misbehaving local server end with the right outcome, and the cell goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_llm_server import FakeBenchmark, FakeLLMServer, closed_port_url

from ctxpolicy.agent.cell import CELL_JSON, PlannedRun, run_cell
from ctxpolicy.agent.client import RetryPolicy
from ctxpolicy.agent.plan import make_identity
from ctxpolicy.rundir import run_dir_name
from ctxpolicy.agent.record import rebuild_prompts
from ctxpolicy.rundir import read_json
from ctxpolicy.rundir import read_calls
from ctxpolicy.agent.runner import Endpoint, execute_run
from ctxpolicy.agent.settings import RunSettings
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.benchmarks.base import Task
from ctxpolicy.policies import parse_spec

CONFIG = {"seed": 1234}
FAST = RunSettings(
    step_limit=4,
    wall_time_limit_s=60,
    command_timeout_s=5,
    format_error_limit=2,
    request_timeout_s=5.0,
    connect_timeout_s=1.0,
    retry=RetryPolicy(max_attempts=3, backoff_initial_s=0.01, backoff_max_s=0.02),
)
HANG = RunSettings(**{**FAST.__dict__, "request_timeout_s": 0.5})  # for runs meant to time out


def task(fault: str | None, task_id: str | None = None) -> Task:
    directive = f" FAULT:{fault}" if fault else ""
    return Task(
        task_id=task_id or f"t-{fault or 'ok'}",
        stratum="fake",
        kind="terminal",
        instruction=f"List the files, then submit.{directive}",
    )


def endpoint(url: str) -> Endpoint:
    return Endpoint(
        base_url=url,
        served_name="fake-model",
        server={"kind": "fake", "version": "0", "url": url},
        model={"name": "fake-model", "file": None, "sha256": None, "hub_id": None, "revision": None},
    )


def run(
    tmp_path: Path,
    url: str,
    the_task: Task,
    *,
    policy: str = "FC",
    threshold: int | None = None,
    settings: RunSettings = FAST,
    attempt: int = 1,
):
    spec = parse_spec(policy)
    identity = make_identity(
        seed=CONFIG["seed"],
        benchmark="fake",
        cohort="main",
        model="fake",
        policy=spec,
        task=the_task,
        attempt=attempt,
        threshold_setting="fixed" if threshold else None,
        threshold_tokens=threshold,
        summarizer=None,
        cell="cell",
        track="full",
    )
    run_dir = tmp_path / run_dir_name(the_task.task_id, attempt)
    result = execute_run(
        identity=identity,
        policy=spec,
        task=the_task,
        adapter=FakeBenchmark([the_task]),
        settings=settings,
        endpoint=endpoint(url),
        run_dir=run_dir,
    )
    return result, read_json(run_dir / "run.json"), list(read_calls(run_dir))


@pytest.fixture
def server():
    with FakeLLMServer(hang_s=10) as fake:
        yield fake


def test_well_behaved_server_gives_a_submitted_valid_run(tmp_path, server):
    result, record, calls = run(tmp_path, server.url, task(None))
    assert result.outcome == "submitted", record["error"]
    assert record["totals"]["agent_calls"] == 2 and len(calls) == 2
    assert all(c["status"] == "ok" and c["cached_tokens"] is not None for c in calls)
    assert record["totals"]["cached_tokens"] == sum(c["cached_tokens"] for c in calls)
    assert record["identity"]["seed"] == 1234
    assert run_dir_problems(result.run_dir) == []


def test_second_attempt_gets_another_seed(tmp_path, server):
    _, record, _ = run(tmp_path, server.url, task(None), attempt=2)
    assert record["identity"]["seed"] == 1235
    assert all(body["seed"] == 1235 for body in server.requests)


def test_refused_connection_ends_in_error_after_bounded_retries(tmp_path):
    result, record, calls = run(tmp_path, closed_port_url(), task(None))
    assert result.outcome == "error"
    assert "connection failed" in record["error"] and "3 attempts" in record["error"]
    assert [c["status"] for c in calls] == ["error"] and calls[0]["attempts"] == FAST.retry.max_attempts
    assert run_dir_problems(result.run_dir) == []


def test_server_error_500_is_retried_then_ends_in_error(tmp_path, server):
    result, record, _ = run(tmp_path, server.url, task("500"))
    assert result.outcome == "error" and "HTTP 500" in record["error"]
    assert len(server.requests) == FAST.retry.max_attempts


def test_transient_500_is_survived_by_retrying(tmp_path, server):
    result, record, calls = run(tmp_path, server.url, task("flaky"))
    assert result.outcome == "submitted", record["error"]
    assert calls[0]["attempts"] == 3


def test_hanging_server_times_out_into_error(tmp_path, server):
    result, record, _ = run(tmp_path, server.url, task("hang"), settings=HANG)
    assert result.outcome == "error" and "timeout" in record["error"]
    assert len(server.requests) == HANG.retry.max_attempts
    assert record["timing"]["wall_s"] < 8


def test_hang_past_the_wall_time_limit_is_a_time_limit(tmp_path, server):
    settings = RunSettings(**{**FAST.__dict__, "wall_time_limit_s": 1, "request_timeout_s": 30.0})
    result, record, _ = run(tmp_path, server.url, task("hang"), settings=settings)
    assert result.outcome == "time_limit", record["error"]
    assert record["timing"]["wall_s"] < 6
    # the latency counts from the instant the limit does: at least the limit, never the setup
    timing = record["timing"]
    assert 1.0 <= timing["agent_s"] <= timing["wall_s"] - timing["setup_s"] + 1e-6


def test_prompt_too_long_is_a_context_overflow_without_retries(tmp_path, server):
    result, record, calls = run(tmp_path, server.url, task("too_long"))
    assert result.outcome == "context_overflow"
    assert len(server.requests) == 1
    assert calls[0]["status"] == "error" and "exceed" in calls[0]["error"]


def test_dropped_connection_ends_in_error(tmp_path, server):
    result, _, _ = run(tmp_path, server.url, task("drop"))
    assert result.outcome == "error"


def test_repeated_format_errors_end_the_run_and_are_counted(tmp_path, server):
    result, record, _ = run(tmp_path, server.url, task("garbage"))
    assert result.outcome == "format_error_limit"
    assert record["totals"]["format_errors"] == FAST.format_error_limit


def test_step_limit(tmp_path, server):
    result, record, _ = run(tmp_path, server.url, task("loop"))
    assert result.outcome == "step_limit"
    assert record["totals"]["agent_calls"] == FAST.step_limit


def test_tool_calling_mode_submits(tmp_path, server):
    settings = RunSettings(**{**FAST.__dict__, "mode": "tool"})
    result, record, _ = run(tmp_path, server.url, task(None), settings=settings)
    assert result.outcome == "submitted", record["error"]
    assert server.requests[0]["tools"][0]["function"]["name"] == "bash"
    assert any(m["role"] == "tool" for m in server.requests[-1]["messages"])
    assert run_dir_problems(result.run_dir) == []


def test_truncation_policy_compresses_what_is_sent_but_not_the_trajectory(tmp_path, server):
    result, record, calls = run(
        tmp_path,
        server.url,
        task("loop"),
        policy="TR/Th/0.5",
        threshold=150,
        settings=RunSettings(**{**FAST.__dict__, "step_limit": 6}),
    )
    assert result.outcome == "step_limit"
    fired = [c for c in calls if c["events"]]
    assert fired and all(c["est_tokens_after"] < c["est_tokens_before"] for c in fired)
    assert record["totals"]["compression_events"] == sum(len(c["events"]) for c in calls)
    trajectory = read_json(result.run_dir / "trajectory.json")
    sent_last = server.requests[-1]["messages"]
    assert len([m for m in trajectory["messages"] if m["role"] != "exit"]) > len(sent_last)
    # every prompt rebuilds byte for byte from the message store
    assert rebuild_prompts(result.run_dir) == [body["messages"] for body in server.requests]
    assert run_dir_problems(result.run_dir) == []


def test_compression_persists_across_steps(tmp_path, server):
    result, _, calls = run(
        tmp_path,
        server.url,
        task("loop"),
        policy="TR/Th/0.5",
        threshold=150,
        settings=RunSettings(**{**FAST.__dict__, "step_limit": 6}),
    )
    prompts = rebuild_prompts(result.run_dir)
    first = next(i for i, c in enumerate(calls) if c["events"])
    assert first + 1 < len(calls)
    # the next prompt extends the compressed one instead of going back to the full history
    assert prompts[first + 1][: len(prompts[first])] == prompts[first] or calls[first + 1]["events"]


def test_summary_calls_are_recorded_before_their_agent_call(tmp_path, server):
    result, record, calls = run(
        tmp_path,
        server.url,
        task("loop"),
        policy="SU/Th/0.5",
        threshold=150,
        settings=RunSettings(**{**FAST.__dict__, "step_limit": 6}),
    )
    summaries = [c for c in calls if c["kind"] == "summary"]
    assert summaries, "the threshold should have fired a summary"
    for summary in summaries:
        following = calls[summary["index"] + 1]
        assert following["step"] == summary["step"]
        assert following["kind"] in ("summary", "agent")
    assert record["totals"]["summary_calls"] == len(summaries)
    assert rebuild_prompts(result.run_dir) == [body["messages"] for body in server.requests]
    assert run_dir_problems(result.run_dir) == []


def test_cell_goes_on_through_faults_and_redoes_only_missing_runs(tmp_path, server):
    faults = {
        None: "submitted",
        "500": "error",
        "too_long": "context_overflow",
        "garbage": "format_error_limit",
        "hang": "error",
    }
    tasks = [task(fault) for fault in faults]
    adapter = FakeBenchmark(tasks)
    cell_dir = tmp_path / "cell"

    def planned():
        runs = []
        for t in tasks:
            identity = make_identity(
                seed=CONFIG["seed"],
                benchmark="fake",
                cohort="main",
                model="fake",
                policy=parse_spec("FC"),
                task=t,
                attempt=1,
                threshold_setting=None,
                threshold_tokens=None,
                summarizer=None,
                cell="FC",
                track="full",
            )
            run_dir = cell_dir / run_dir_name(t.task_id, 1)
            settings = HANG if "hang" in t.task_id else FAST
            runs.append(
                PlannedRun(
                    run_dir,
                    t.task_id,
                    1,
                    lambda i=identity, t=t, d=run_dir, s=settings: execute_run(
                        identity=i,
                        policy=parse_spec("FC"),
                        task=t,
                        adapter=adapter,
                        settings=s,
                        endpoint=endpoint(server.url),
                        run_dir=d,
                    ),
                )
            )
        return runs

    results = run_cell(planned(), cell_dir=cell_dir, cell_info={"slug": "FC"}, concurrency=2, progress=False)
    assert [r.outcome for r in results] == list(faults.values())
    cell = json.loads((cell_dir / CELL_JSON).read_text())
    assert [r["outcome"] for r in cell["runs"]] == list(faults.values())

    requests_before = len(server.requests)
    (cell_dir / run_dir_name("t-ok", 1) / "run.json").unlink()
    again = run_cell(planned(), cell_dir=cell_dir, cell_info={"slug": "FC"}, concurrency=2, progress=False)
    assert [r.skipped for r in again] == [False, True, True, True, True]
    assert len(server.requests) - requests_before == 2  # only the redone run talked to the server


def test_a_named_summarizer_gets_the_summary_calls_on_its_own_endpoint(tmp_path, server):
    the_task = task("loop")
    identity = make_identity(
        seed=CONFIG["seed"],
        benchmark="fake",
        cohort="main",
        model="fake",
        policy=parse_spec("SU/Th/0.5"),
        task=the_task,
        attempt=1,
        threshold_setting="fixed",
        threshold_tokens=150,
        summarizer="other",
        cell="cell",
        track="summarizer",
    )
    with FakeLLMServer(model="other-model") as other:
        summarizer = Endpoint(
            base_url=other.url,
            served_name="other-model",
            server={"kind": "fake", "version": "0", "url": other.url},
            model={"name": "other-model", "file": None, "sha256": None, "hub_id": None, "revision": None},
        )
        result = execute_run(
            identity=identity,
            policy=parse_spec(identity.policy),
            task=the_task,
            adapter=FakeBenchmark([the_task]),
            settings=FAST,
            endpoint=endpoint(server.url),
            summarizer_endpoint=summarizer,
            run_dir=tmp_path / "run",
        )
    calls = list(read_calls(result.run_dir))
    summaries = [c for c in calls if c["kind"] == "summary"]
    assert summaries and len(other.requests) == len(summaries)
    assert all(body["model"] == "other-model" for body in other.requests)
    assert all(body["model"] == "fake-model" for body in server.requests)
    record = read_json(result.run_dir / "run.json")
    assert record["versions"]["summarizer"]["model"]["name"] == "other-model"
    assert record["identity"]["summarizer"] == "other"
