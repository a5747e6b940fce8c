"""The proxy under load and in front of broken upstreams (issue 21, cases 1-3): nothing it forwarded is lost.

The client is the real ``openai`` SDK (no retries of its own: every request is counted), the
upstream a scripted loopback server (``proxy_helpers.ScriptedUpstream``). Every test ends with
the accounting rule: in every conversation's records, ``proxy.requests`` equals its agent calls
(answered plus recorded failures), and the calls add up to what the upstream was sent.
Bounded in count and time: 150 requests for the load case, a 1 s deadline for the trickle.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest
from proxy_helpers import ScriptedUpstream, serve, settled

from ctxpolicy.rundir import read_json, read_jsonl
from ctxpolicy.policies import parse_spec
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.recording import ProxySettings

SYSTEM = {"role": "system", "content": "You are an agent."}
CONVERSATIONS, TURNS, SLOTS = 50, 3, 10


def make_proxy(upstream_url: str, record: Path, **options) -> Proxy:
    settings = ProxySettings(
        policy=parse_spec("FC"),
        threshold=None,
        upstream_url=upstream_url,
        upstream_model=None,
        summarizer_model=None,
        max_conversations=options.pop("max_conversations", 256),
    )
    return Proxy(ProxyConfig(settings=settings, upstream_url=upstream_url, record_dir=record, **options))


def sdk(base_url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30)


def accounted(record: Path) -> dict[str, int]:
    """Every conversation's requests = its agent calls; the totals of ok and failed calls."""
    totals = {"conversations": 0, "ok": 0, "error": 0}
    for run_dir in sorted(record.glob("*/*__a1")):
        run = read_json(run_dir / "run.json")
        assert run["complete"] is True, f"{run_dir}: not ended"
        calls = [c for c in read_jsonl(run_dir / "calls.jsonl") if c["kind"] == "agent"]
        assert run["proxy"]["requests"] == len(calls), f"{run_dir}: requests {run['proxy']['requests']} != calls"
        assert run["totals"]["agent_calls"] == len(calls)
        totals["conversations"] += 1
        for call in calls:
            totals[call["status"]] += 1
    return totals


@pytest.fixture(scope="module")
def upstream():
    scripted = ScriptedUpstream(trickle_s=0.3, trickle_for_s=15.0)
    with serve(scripted.app) as url:
        scripted.url = f"{url}/v1"
        yield scripted


def test_case1_fifty_conversations_through_ten_slots_lose_no_call(upstream, tmp_path):
    """Eviction never ends a conversation with a request in flight; a full proxy says 503."""
    proxy = make_proxy(upstream.url, tmp_path, max_conversations=SLOTS)
    sent_before = upstream.requests
    refused: list[int] = []
    with serve(build_app(proxy)) as url:

        def conversation(n: int) -> int:
            client = sdk(f"{url}/v1")
            history = [SYSTEM, {"role": "user", "content": f"task {n} DELAY:0.05"}]
            for _ in range(TURNS):
                for _attempt in range(600):  # at most ~30 s refused: the proxy never stays full
                    try:
                        reply = client.chat.completions.create(model="m", messages=history)
                        break
                    except openai.APIStatusError as exc:
                        assert exc.status_code == 503, f"HTTP {exc.status_code}: {exc.message}"
                        assert "in flight" in exc.message
                        refused.append(n)
                        time.sleep(0.05)
                else:
                    raise AssertionError("the proxy stayed full")
                history += [
                    {"role": "assistant", "content": reply.choices[0].message.content},
                    {"role": "user", "content": "observation"},
                ]
            return n

        with ThreadPoolExecutor(CONVERSATIONS) as pool:
            assert sorted(pool.map(conversation, range(CONVERSATIONS))) == list(range(CONVERSATIONS))
        settled(proxy)
        assert len(proxy.store) <= SLOTS
    totals = accounted(tmp_path)
    assert totals["ok"] == CONVERSATIONS * TURNS and totals["error"] == 0
    assert totals["conversations"] == CONVERSATIONS  # one run each, evicted between turns or not (issue 30)
    assert upstream.requests - sent_before == CONVERSATIONS * TURNS  # a refused request was never forwarded


def test_case2_a_trickling_upstream_meets_one_deadline_per_request(upstream, tmp_path):
    """1 byte every 0.3 s: the 1 s deadline covers the whole body, streamed or not."""
    proxy = make_proxy(upstream.url, tmp_path, request_timeout_s=1.0)
    with serve(build_app(proxy)) as url:
        client = sdk(f"{url}/v1")
        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as whole:
            client.chat.completions.create(model="m", messages=[SYSTEM, {"role": "user", "content": "SHAPE:trickle a"}])
        assert whole.value.status_code == 504
        with pytest.raises(openai.APIError):
            stream = client.chat.completions.create(
                model="m", messages=[SYSTEM, {"role": "user", "content": "SHAPE:trickle b"}], stream=True
            )
            for _chunk in stream:
                pass
        assert time.monotonic() - started < 8, "the trickle outlasted the deadline"
        settled(proxy)
    assert accounted(tmp_path) == {"conversations": 2, "ok": 0, "error": 2}
    for run_dir in tmp_path.glob("*/*__a1"):
        [call] = read_jsonl(run_dir / "calls.jsonl")
        assert "timed out" in call["error"], call["error"]
        assert read_json(run_dir / "run.json")["outcome"] == "error"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_case2_sigterm_mid_request_ends_within_seconds_and_records_the_call(upstream, tmp_path):
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), *sys.path]))}
    command = [sys.executable, "-m", "ctxpolicy", "proxy", "--policy", "FC", "--endpoint", upstream.url]
    command += ["--listen", f"127.0.0.1:{port}", "--out", str(tmp_path), "--request-timeout", "60"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    errors: list[BaseException] = []

    def ask(text: str, stream: bool) -> None:
        try:
            answer = sdk(f"http://127.0.0.1:{port}/v1").chat.completions.create(
                model="m", messages=[SYSTEM, {"role": "user", "content": text}], stream=stream
            )
            for _chunk in answer if stream else ():
                pass
        except BaseException as exc:  # the proxy went away mid-answer: expected
            errors.append(exc)

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and process.poll() is None, "proxy did not start"
                time.sleep(0.2)
        before = upstream.requests
        clients = [threading.Thread(target=ask, args=(f"SHAPE:trickle {n}", n == 1)) for n in range(2)]
        for thread in clients:
            thread.start()
        while upstream.requests - before < 2:
            assert time.monotonic() < deadline, "the requests never reached the upstream"
            time.sleep(0.05)
        time.sleep(0.5)  # both in flight, mid-trickle
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
        took = time.monotonic() - signalled
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    for thread in clients:
        thread.join(timeout=10)
    assert process.returncode == 0, output
    assert took < 10, f"shutdown took {took:.1f}s"
    assert accounted(tmp_path) == {"conversations": 2, "ok": 0, "error": 2}
    for run_dir in tmp_path.glob("*/*__a1"):
        run = read_json(run_dir / "run.json")
        assert run["proxy"]["ended"] == "shutdown" and run["outcome"] == "error"
        [call] = read_jsonl(run_dir / "calls.jsonl")
        assert call["status"] == "error" and call["error"]


@pytest.mark.parametrize(
    ("shape", "stream", "reason"),
    [
        ("truncated", False, "not JSON"),
        ("no_choices", False, "no choices"),
        ("stream_cut", True, "cut"),
        ("stream_malformed", True, "not JSON"),
    ],
)
def test_case3_an_answer_the_client_cannot_use_is_a_failed_call(upstream, tmp_path, shape, stream, reason):
    proxy = make_proxy(upstream.url, tmp_path)
    with serve(build_app(proxy)) as url:
        client = sdk(f"{url}/v1")
        messages = [SYSTEM, {"role": "user", "content": f"SHAPE:{shape}"}]
        with pytest.raises(openai.APIError) as raised:
            answer = client.chat.completions.create(model="m", messages=messages, stream=stream)
            for _chunk in answer if stream else ():
                pass
        assert reason in str(raised.value), raised.value
        fine = client.chat.completions.create(
            model="m", messages=[SYSTEM, {"role": "user", "content": "ok"}], stream=stream
        )
        if stream:
            assert "".join(c.choices[0].delta.content or "" for c in fine if c.choices).startswith("answer")
        settled(proxy)
    assert accounted(tmp_path) == {"conversations": 2, "ok": 1, "error": 1}
    failed = [
        read_json(d / "run.json") for d in tmp_path.glob("*/*__a1") if read_json(d / "run.json")["outcome"] == "error"
    ]
    assert len(failed) == 1 and reason in failed[0]["error"]
