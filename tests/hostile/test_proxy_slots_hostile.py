"""The proxy's request path under `--max-conversations` (issue 30): a conversation evicted while
idle and taken up again by its client goes on in its own run directory, with the working context
it had; a request that finds every slot busy waits for one, and past the wait it is a 503 with
`Retry-After`.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest
from proxy_helpers import FakeUpstream, ScriptedUpstream, serve, settled

from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.metrics.records import read_run
from ctxpolicy.policies import parse_spec
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.recording import ProxySettings
from ctxpolicy.rundir import read_calls, read_json

SYSTEM = {"role": "system", "content": "You are an agent."}


def _proxy(upstream_url: str, record: Path, slots: int, policy: str = "TR/Th/0.5", **options) -> Proxy:
    spec = parse_spec(policy)
    settings = ProxySettings(
        policy=spec,
        threshold=60 if spec.needs_threshold else None,
        upstream_url=upstream_url,
        upstream_model="up",
        summarizer_model=None,
        max_conversations=slots,
    )
    return Proxy(ProxyConfig(settings=settings, upstream_url=upstream_url, record_dir=record, **options))


def _post(url: str, messages: list[dict]) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": messages}, timeout=30)


def _turns(task: str, n: int) -> list[list[dict]]:
    """The histories a client sends: its own fixed answers, so two proxies see the same requests."""
    history = [SYSTEM, {"role": "user", "content": f"task {task}: " + "describe the repository. " * 6}]
    sent = []
    for k in range(n):
        sent.append(list(history))
        history += [
            {"role": "assistant", "content": f"step {k} of {task}: " + "I read a file. " * 8},
            {"role": "user", "content": f"observation {k}: " + "line of output. " * 8},
        ]
    return sent


def _conversations(record: Path, slots: int) -> tuple[dict[str, Path], list[dict]]:
    """Three conversations through ``slots`` slots: A twice, then B and C (A evicted when C starts
    with two slots), then A again. Returns the run directories by task, and what the upstream got."""
    upstream = FakeUpstream()
    a, b, c = _turns("A", 3), _turns("B", 1), _turns("C", 1)
    with serve(upstream.app) as upstream_url:
        proxy = _proxy(f"{upstream_url}/v1", record, slots)
        with serve(build_app(proxy)) as url:
            for messages in (a[0], a[1], b[0], c[0], a[2]):
                answer = _post(url, messages)
                assert answer.status_code == 200, answer.text
            settled(proxy)
    runs = {}
    for path in sorted(record.rglob("run.json")):
        task = read_json(path)["identity"]["task_id"]
        runs[task] = path.parent
    return runs, upstream.requests


def test_an_evicted_conversation_resumed_by_its_client_goes_on_in_its_own_run(tmp_path):
    runs, sent = _conversations(tmp_path / "evicting", slots=2)
    assert len(runs) == 3, sorted(runs)  # A, B and C: A's third call did not start a fourth run
    a_run = [p for p in runs.values() if len([c for c in read_calls(p) if c["kind"] == "agent"]) == 3]
    assert len(a_run) == 1, runs
    run_dir = a_run[0]
    record = read_json(run_dir / "run.json")
    assert record["complete"] is True and record["proxy"]["requests"] == 3
    assert record["proxy"]["evictions"] == 1 and record["totals"]["agent_calls"] == 3
    assert [c["index"] for c in read_calls(run_dir)] == list(range(len(read_calls(run_dir))))
    assert run_dir_problems(run_dir) == []
    read_run(run_dir)  # the tables read it whole: call counts agree, every prompt's messages are stored

    # the working context went on as if the conversation had never been evicted
    _, unevicted = _conversations(tmp_path / "roomy", slots=8)
    assert sent[-1]["messages"] == unevicted[-1]["messages"]
    assert len(sent[-1]["messages"]) < len(_turns("A", 3)[2])  # TR had cut it: the compression went on


def test_a_request_that_finds_every_slot_busy_waits_then_503_with_retry_after(tmp_path):
    upstream = ScriptedUpstream()
    with serve(upstream.app) as upstream_url:
        slow = [SYSTEM, {"role": "user", "content": "task slow DELAY:1.5"}]
        other = [SYSTEM, {"role": "user", "content": "task other"}]

        def in_flight(url: str) -> threading.Thread:
            """The slow request, once the upstream has it (its slot busy for 1.5 s)."""
            before = upstream.requests
            thread = threading.Thread(target=_post, args=(url, slow))
            thread.start()
            deadline = time.monotonic() + 10
            while upstream.requests == before:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            return thread

        waiting = _proxy(f"{upstream_url}/v1", tmp_path / "waits", 1, "FC", slot_wait_s=10.0)
        with serve(build_app(waiting)) as url:
            thread = in_flight(url)
            started = time.monotonic()
            answer = _post(url, other)  # waits for the slow request's slot, then is answered
            assert answer.status_code == 200, answer.text
            assert time.monotonic() - started > 0.5
            thread.join()
            settled(waiting)

        impatient = _proxy(f"{upstream_url}/v1", tmp_path / "refuses", 1, "FC", slot_wait_s=0.3)
        with serve(build_app(impatient)) as url:
            thread = in_flight(url)
            started = time.monotonic()
            refused = _post(url, other)
            assert refused.status_code == 503 and refused.json()["error"]["type"] == "proxy_busy"
            assert refused.headers["retry-after"] == "1"
            assert 0.25 < time.monotonic() - started < 1.4
            thread.join()
            settled(impatient)


@pytest.mark.parametrize("wait", ["-1"])
def test_slot_wait_must_not_be_negative(wait, capsys):
    from ctxpolicy import cli

    rc = cli.main(["proxy", "--policy", "FC", "--endpoint", "http://127.0.0.1:9/v1", "--slot-wait", wait])
    assert rc == 2 and "--slot-wait" in capsys.readouterr().err
