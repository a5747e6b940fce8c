"""Hostile endpoints: a trickling server cannot outlast a deadline, a bad answer never loses a run.

The trickling server is a real loopback HTTP server that sends its answer one byte at a time,
each byte well within httpx's read timeout, so only an overall deadline can end the call. Bad
``usage`` payloads come from the fake chat server; each must leave a recorded call with a named
error, an outcome and a valid run directory.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from fake_llm_server import FakeBenchmark, FakeLLMServer

from ctxpolicy import cli
from ctxpolicy.agent.cell import CELL_JSON, PlannedRun, RunsUnrecorded, run_cell
from ctxpolicy.agent.cell_lock import cell_lock
from ctxpolicy.agent.client import ChatClient, EndpointError, RetryPolicy
from ctxpolicy.agent.plan import make_identity
from ctxpolicy.rundir import run_dir_name
from ctxpolicy.rundir import read_json, read_jsonl
from ctxpolicy.agent.runner import Endpoint, RunResult, execute_run
from ctxpolicy.agent.settings import RunSettings
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.benchmarks.base import Task
from ctxpolicy.policies import EndpointSummarizer, parse_spec
from ctxpolicy.serving.health import check

BYTE_EVERY_S = 0.5  # far inside every read timeout below: only an overall deadline ends the call
TRICKLE_FOR_S = 12  # then the server hangs up, so that a missing deadline fails the test instead of hanging it
FAST = RunSettings(
    step_limit=3,
    wall_time_limit_s=60,
    command_timeout_s=5,
    format_error_limit=2,
    request_timeout_s=5.0,
    connect_timeout_s=1.0,
    retry=RetryPolicy(max_attempts=2, backoff_initial_s=0.01, backoff_max_s=0.02),
)
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class TricklingServer:
    """Answers every request with one byte per ``BYTE_EVERY_S``: in the headers, or after them in the body."""

    def __init__(self, phase: str):
        self.phase = phase
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)  # accept() wakes up to see the stop
        self._thread = threading.Thread(target=self._accept, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def __enter__(self) -> TricklingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                if self.phase == "headers":
                    conn.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                else:
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{"
                    )
                give_up = time.monotonic() + TRICKLE_FOR_S
                while not self._stop.wait(BYTE_EVERY_S) and time.monotonic() < give_up:
                    conn.sendall(b"a" if self.phase == "headers" else b" ")
            except OSError:  # the client hung up: what a deadline should do
                return


@pytest.fixture
def trickle_body():
    with TricklingServer("body") as server:
        yield server


def endpoint(url: str) -> Endpoint:
    return Endpoint(
        base_url=url,
        served_name="fake-model",
        server={"kind": "fake", "version": "0", "url": url},
        model={"name": "fake-model", "file": None, "sha256": None, "hub_id": None, "revision": None},
    )


def fake_task(fault: str | None = None) -> Task:
    directive = f" FAULT:{fault}" if fault else ""
    return Task(
        task_id=f"t-{fault or 'ok'}",
        stratum="fake",
        kind="terminal",
        instruction=f"List the files, then submit.{directive}",
    )


def identity_of(task: Task, policy: str = "FC", threshold: int | None = None):
    return make_identity(
        seed=1,
        benchmark="fake",
        cohort="main",
        model="fake",
        policy=parse_spec(policy),
        task=task,
        attempt=1,
        threshold_setting="fixed" if threshold else None,
        threshold_tokens=threshold,
        summarizer=None,
        cell="cell",
        track="full",
    )


def execute(run_dir: Path, url: str, task: Task, settings: RunSettings = FAST, **identity) -> RunResult:
    run_identity = identity_of(task, **identity)
    return execute_run(
        identity=run_identity,
        policy=parse_spec(run_identity.policy),
        task=task,
        adapter=FakeBenchmark([task]),
        settings=settings,
        endpoint=endpoint(url),
        run_dir=run_dir,
    )


# --- a trickling server meets a deadline ---------------------------------------------------------


def test_a_trickling_body_ends_at_the_per_request_limit(trickle_body):
    client = ChatClient(trickle_body.url, request_timeout_s=3.0, retry=RetryPolicy(max_attempts=1))
    t0 = time.monotonic()
    with pytest.raises(EndpointError, match="timeout"):
        client.complete(BODY)
    assert 2.9 < time.monotonic() - t0 < 5


def test_trickling_headers_end_at_the_run_deadline():
    with TricklingServer("headers") as server:
        client = ChatClient(server.url, request_timeout_s=600.0, retry=RetryPolicy(max_attempts=3))
        t0 = time.monotonic()
        with pytest.raises(EndpointError) as raised:
            client.complete(BODY, deadline=time.time() + 2.0)
        took = time.monotonic() - t0
    assert type(raised.value).__name__ == "DeadlineExceeded" and took < 3.5


def test_a_run_against_a_trickling_server_ends_at_its_wall_time_limit(tmp_path, trickle_body):
    settings = RunSettings(**{**FAST.__dict__, "wall_time_limit_s": 3, "request_timeout_s": 600.0})
    result = execute(tmp_path / "run", trickle_body.url, fake_task(), settings)
    record = read_json(result.run_dir / "run.json")
    assert result.outcome == "time_limit", record["error"]
    assert record["timing"]["wall_s"] < 5
    calls = list(read_jsonl(result.run_dir / "calls.jsonl"))
    assert [c["status"] for c in calls] == ["error"] and "DeadlineExceeded" in calls[0]["error"]
    assert run_dir_problems(result.run_dir) == []


def test_summary_calls_end_at_their_deadline(trickle_body):
    client = ChatClient(trickle_body.url, request_timeout_s=600.0, retry=RetryPolicy(max_attempts=1))
    recording = EndpointSummarizer(
        None, "m", temperature=0.0, max_tokens=8, transport=client, deadline=lambda: time.time() + 1.5
    )
    t0 = time.monotonic()
    call = recording.summarize(BODY["messages"])
    assert call.error and "DeadlineExceeded" in call.error and time.monotonic() - t0 < 3

    t0 = time.monotonic()
    call = EndpointSummarizer(trickle_body.url, "m", timeout_s=1.5).summarize(BODY["messages"])
    assert call.error and "DeadlineExpired" in call.error and time.monotonic() - t0 < 3


def test_the_health_check_ends_at_its_deadline():
    with TricklingServer("headers") as server:
        t0 = time.monotonic()
        health = check(server.url, timeout_s=1.5)
        took = time.monotonic() - t0
    assert not health.ok and "DeadlineExpired" in health.detail and took < 3


# --- bad answers are recorded calls with a named error ----------------------------------------------


@pytest.mark.parametrize(
    "fault, named",
    [
        ("usage_lots", "usage.prompt_tokens: 'lots'"),
        ("cached_abc", "usage.prompt_tokens_details.cached_tokens: 'abc'"),
        ("no_choices", "choices: []"),
    ],
)
def test_a_bad_answer_is_a_recorded_failed_call_and_the_run_has_an_outcome(tmp_path, fault, named):
    with FakeLLMServer() as server:
        result = execute(tmp_path / "run", server.url, fake_task(fault))
    record = read_json(result.run_dir / "run.json")
    assert result.outcome == "error" and named in record["error"]
    calls = list(read_jsonl(result.run_dir / "calls.jsonl"))
    assert len(calls) == 1 and calls[0]["status"] == "error"
    assert calls[0]["error"].startswith("MalformedResponseError") and named in calls[0]["error"]
    assert calls[0]["attempts"] == 1  # a malformed answer is not retried
    assert record["totals"]["failed_calls"] == 1 and record["totals"]["prompt_tokens"] == 0
    assert run_dir_problems(result.run_dir) == []


def test_a_bad_summary_answer_is_a_failed_summary_call_not_a_crash(tmp_path):
    # the agent's server answers well; the summarizer's answers every request with prompt_tokens "lots"
    task = fake_task()
    with FakeLLMServer() as server, FakeLLMServer(fault="usage_lots", model="other") as summarizer:
        summary = Endpoint(
            base_url=summarizer.url,
            served_name="other",
            server={"kind": "fake", "version": "0", "url": summarizer.url},
            model={"name": "other", "file": None, "sha256": None, "hub_id": None, "revision": None},
        )
        result = execute_run(
            identity=identity_of(task, "SU/Th/0.5", 150),
            policy=parse_spec("SU/Th/0.5"),
            task=task,
            adapter=FakeBenchmark([task]),
            settings=FAST,
            endpoint=endpoint(server.url),
            summarizer_endpoint=summary,
            run_dir=tmp_path / "run",
        )
    record = read_json(result.run_dir / "run.json")
    summaries = [c for c in read_jsonl(result.run_dir / "calls.jsonl") if c["kind"] == "summary"]
    assert summaries and all(c["status"] == "error" and "usage.prompt_tokens" in c["error"] for c in summaries)
    assert result.outcome != "error", record["error"]  # the policy fell back; the run went on
    assert run_dir_problems(result.run_dir) == []


def test_every_run_a_cell_counts_has_a_run_json(tmp_path):
    faults = ("usage_lots", "cached_abc", "no_choices", None)
    tasks = [fake_task(fault) for fault in faults]
    cell_dir = tmp_path / "cell"
    with FakeLLMServer() as server:
        runs = [
            PlannedRun(
                cell_dir / run_dir_name(t.task_id, 1),
                t.task_id,
                1,
                lambda t=t: execute(cell_dir / run_dir_name(t.task_id, 1), server.url, t),
            )
            for t in tasks
        ]
        results = run_cell(runs, cell_dir=cell_dir, cell_info={"slug": "FC"}, concurrency=2, progress=False)
    assert [r.outcome for r in results] == ["error", "error", "error", "submitted"]
    cell = read_json(cell_dir / CELL_JSON)
    for entry in cell["runs"]:
        assert read_json(cell_dir / entry["run_dir"] / "run.json")["outcome"] == entry["outcome"]


def test_a_run_whose_record_cannot_be_summed_still_writes_run_json(tmp_path, monkeypatch):
    from ctxpolicy.agent import runner

    def broken_totals(calls, steps, format_errors):
        if calls:  # a value that cannot be summed
            raise TypeError("unsupported operand type(s) for +: 'int' and 'str'")
        return original(calls, steps, format_errors)

    original = runner.totals_of
    monkeypatch.setattr(runner, "totals_of", broken_totals)
    with FakeLLMServer() as server:
        result = execute(tmp_path / "run", server.url, fake_task())
    record = read_json(result.run_dir / "run.json")
    assert result.outcome == "error" and "cannot build the run record: TypeError" in record["error"]
    assert record["complete"] is True and record["traceback"]


def test_a_cell_never_counts_a_run_without_run_json(tmp_path):
    cell_dir = tmp_path / "cell"

    def crash():
        raise OSError(28, "No space left on device")

    runs = [PlannedRun(cell_dir / "a__a1", "a", 1, crash)]
    with pytest.raises(RunsUnrecorded, match="a__a1"):
        run_cell(runs, cell_dir=cell_dir, cell_info={"slug": "FC"}, concurrency=1, progress=False)
    assert not (cell_dir / CELL_JSON).exists()


# --- ctxpolicy run: a bad answer, an overwrite, a held cell ---------------------------------------------


@pytest.fixture
def study(tmp_path):
    from agent_helpers import offline_study

    return offline_study(tmp_path)


def run_argv(study: Path, url: str, out: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--config",
        str(study),
        "--benchmark",
        "local",
        "--model",
        "qwen05b",
        "--policy",
        "FC",
        "--task",
        "hello-world",
        "--endpoint",
        url,
        "--out",
        str(out),
        *extra,
    ]


def test_ctxpolicy_run_with_a_bad_usage_answer_records_an_error_run(study, tmp_path, capsys):
    out = tmp_path / "cell" / "hello-world__a1"
    with FakeLLMServer(fault="usage_lots") as server:
        code = cli.main(run_argv(study, server.url, out))
    assert code == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["outcome"] == "error"
    assert "usage.prompt_tokens" in read_json(out / "run.json")["error"]


def test_ctxpolicy_run_never_replaces_a_complete_run_silently(study, tmp_path, capsys):
    out = tmp_path / "cell" / "hello-world__a1"
    with FakeLLMServer() as server:
        assert cli.main(run_argv(study, server.url, out)) == 0
        first = (out / "run.json").read_bytes()
        calls = len(server.requests)
        capsys.readouterr()

        assert cli.main(run_argv(study, server.url, out)) == 2
        err = capsys.readouterr().err
        assert "holds a complete run" in err and "--force" in err and len(err.strip().splitlines()) == 1
        assert (out / "run.json").read_bytes() == first and len(server.requests) == calls

        with cell_lock(out.parent):  # run-cell working on this cell
            assert cli.main(run_argv(study, server.url, out, "--force")) == 1
        assert "another run-cell" in capsys.readouterr().err
        assert (out / "run.json").read_bytes() == first and len(server.requests) == calls

        assert cli.main(run_argv(study, server.url, out, "--force")) == 0
    assert read_json(out / "run.json")["timing"]["start"] > json.loads(first)["timing"]["start"]


def test_ctxpolicy_run_into_an_unusable_run_directory_is_one_line(study, tmp_path, capsys):
    out = tmp_path / "cell" / "hello-world__a1"
    (out / "run.json").mkdir(parents=True)  # a folder named run.json makes no run directory (rundir.is_run_dir)
    (out / "run.json" / "notes.txt").write_text("someone's")
    assert cli.main(run_argv(study, "http://127.0.0.1:9/v1", out)) == 2
    err = capsys.readouterr().err
    assert "not a run directory" in err and "--force" in err and len(err.strip().splitlines()) == 1
    assert cli.main(run_argv(study, "http://127.0.0.1:9/v1", out, "--force")) == 1
    err = capsys.readouterr().err
    assert "Is a directory" in err and len(err.strip().splitlines()) == 1
    assert (out / "run.json" / "notes.txt").read_text() == "someone's"
