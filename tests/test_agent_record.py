"""The run directory: atomic records, killed runs, the message store and prompt rebuilding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fake_llm_server import FakeLLMServer

from ctxpolicy.agent.messages import message_id
from ctxpolicy.agent.record import RunRecorder, rebuild_prompts
from ctxpolicy.rundir import is_complete_run, read_jsonl, reset_run_dir, write_record
from ctxpolicy.rundir import CallRecord, read_calls

TESTS = Path(__file__).resolve().parent


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    write_record(target, {"complete": True, "n": 1})
    assert json.loads(target.read_text()) == {"complete": True, "n": 1}

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        write_record(target, {"complete": True, "n": 2})
    assert json.loads(target.read_text()) == {"complete": True, "n": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temporary file left behind


def test_is_complete_needs_a_parsable_record_that_says_so(tmp_path):
    assert not is_complete_run(tmp_path)
    (tmp_path / "run.json").write_text('{"complete": tr')
    assert not is_complete_run(tmp_path)
    (tmp_path / "run.json").write_text('{"complete": false}')
    assert not is_complete_run(tmp_path)
    (tmp_path / "run.json").write_text('{"complete": true}')
    assert is_complete_run(tmp_path)


def test_store_keeps_each_distinct_message_once_and_prompts_rebuild(tmp_path):
    system = {"role": "system", "content": "be brief"}
    user = {"role": "user", "content": "hi", "extra": {"not": "sent"}}
    reply = {"role": "assistant", "content": "hello"}
    with RunRecorder(tmp_path, count_tokens=lambda m: len(m["content"])) as recorder:
        first = recorder.store([system, user])
        second = recorder.store([system, user, reply])
        recorder.record_call(_call(first))
        recorder.record_call(_call(second))
    lines = list(read_jsonl(tmp_path / "messages.jsonl"))
    assert [line["id"] for line in lines] == second
    assert all(line["id"] == message_id(line["message"]) for line in lines)
    assert "extra" not in lines[1]["message"] and lines[1]["tokens"] == 2
    assert rebuild_prompts(tmp_path) == [
        [system, {"role": "user", "content": "hi"}],
        [system, {"role": "user", "content": "hi"}, reply],
    ]
    assert [c["index"] for c in read_calls(tmp_path)] == [0, 1]


def _call(message_ids: list[str]) -> CallRecord:
    return CallRecord(
        kind="agent",
        step=1,
        start=0.0,
        end=1.0,
        latency_s=1.0,
        status="ok",
        error=None,
        prompt_tokens=3,
        completion_tokens=1,
        cached_tokens=None,
        est_tokens_before=3,
        est_tokens_after=3,
        message_ids=message_ids,
        events=[],
    )


def test_message_id_ignores_extra_and_key_order():
    a = {"role": "user", "content": "x", "extra": {"t": 1}}
    b = {"content": "x", "role": "user"}
    assert message_id(a) == message_id(b)
    assert message_id(b) != message_id({"role": "assistant", "content": "x"})


def test_rebuild_names_unknown_ids(tmp_path):
    (tmp_path / "messages.jsonl").write_text("")
    (tmp_path / "calls.jsonl").write_text(json.dumps({"index": 0, "message_ids": ["0123456789abcdef"]}) + "\n")
    with pytest.raises(ValueError, match="0123456789abcdef"):
        rebuild_prompts(tmp_path)


def test_reset_removes_a_previous_attempt(tmp_path):
    for name in ("run.json", "calls.jsonl", "messages.jsonl", "trajectory.json", "verdict.json"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "f").write_text("x")
    (tmp_path / "keep.txt").write_text("x")
    reset_run_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


KILLED_RUN = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    import test_agent_faults as t
    from ctxpolicy.agent.settings import RunSettings
    settings = RunSettings(**{{**t.FAST.__dict__, "request_timeout_s": 60.0}})
    t.run(Path({out!r}), {url!r}, t.task("hang"), settings=settings)
""")


def test_a_killed_run_leaves_no_complete_record(tmp_path):
    with FakeLLMServer(hang_s=30) as server:
        code = KILLED_RUN.format(tests=str(TESTS), out=str(tmp_path), url=server.url)
        process = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
        run_dir = tmp_path / "t-hang__a1"
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.requests, "the run never called the server"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    assert (run_dir / "messages.jsonl").is_file()
    assert not (run_dir / "run.json").exists()
    assert not is_complete_run(run_dir)
