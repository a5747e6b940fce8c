"""ctxpolicy proxy against an instant fake upstream: conversations, compression, records, errors."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest
from proxy_helpers import FakeUpstream, serve, settled

from ctxpolicy.agent.record import rebuild_prompts
from ctxpolicy.rundir import read_json
from ctxpolicy.rundir import read_calls
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.policies import PolicySession, parse_spec
from ctxpolicy.proxy import anthropic
from ctxpolicy.proxy.alternation import merge_same_role
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.conversations import ConversationStore
from ctxpolicy.proxy.recording import ProxySettings

SYSTEM = {"role": "system", "content": "You are an agent."}
OBSERVATION = "output line " * 30


def task(text: str = "Fix the bug.") -> list[dict]:
    return [SYSTEM, {"role": "user", "content": text}]


def proxy_for(upstream_url: str, policy: str = "TR/Th/0.5", threshold: int | None = 150, **config) -> Proxy:
    spec = parse_spec(policy)
    settings = ProxySettings(
        policy=spec,
        threshold=threshold if spec.needs_threshold else None,
        upstream_url=upstream_url,
        upstream_model=None,
        summarizer_model=None,
        idle_timeout_s=config.pop("idle_timeout_s", 3600.0),
        max_conversations=config.pop("max_conversations", 256),
        merge_same_role=config.pop("merge_same_role", False),
    )
    return Proxy(ProxyConfig(settings=settings, upstream_url=upstream_url, **config))


@pytest.fixture(scope="module")
def upstream():
    fake = FakeUpstream()
    with serve(fake.app) as url:
        fake.url = f"{url}/v1"
        yield fake


@pytest.fixture
def recorded(upstream, tmp_path):
    """A recording TR/Th/0.5 proxy in front of the fake; yields (base_url, record_dir)."""
    proxy = proxy_for(upstream.url, record_dir=tmp_path / "rec")
    with serve(build_app(proxy)) as url:
        yield f"{url}/v1", tmp_path / "rec", proxy


def agent_loop(client: openai.OpenAI, messages: list[dict], steps: int, **kwargs) -> list:
    """A minimal agent: call, append the answer and an observation, repeat."""
    responses = []
    for _ in range(steps):
        response = client.chat.completions.create(model="any", messages=messages, max_tokens=8, **kwargs)
        responses.append(response)
        messages += [
            {"role": "assistant", "content": response.choices[0].message.content},
            {"role": "user", "content": OBSERVATION},
        ]
    return responses


def run_dirs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*__a1"))


def test_compressed_history_reaches_the_upstream_and_is_recorded(recorded, upstream):
    url, record_dir, proxy = recorded
    client = openai.OpenAI(base_url=url, api_key="unused")
    start = len(upstream.requests)
    responses = agent_loop(client, task(), 6)
    prompts = [r.usage.prompt_tokens for r in responses]
    assert max(prompts) < 300, prompts  # the client's history grows past 400 tokens; the upstream never sees it
    assert any(b < a for a, b in zip(prompts, prompts[1:])), "an event should shrink the prompt"
    sent = upstream.requests[start:]
    assert all(m[:2] == task() for m in (r["messages"] for r in sent))
    assert len(sent[-1]["messages"]) < 2 + 2 * 5
    settled(proxy)  # the call line is written after the answer went out
    [run_dir] = run_dirs(record_dir)
    calls = list(read_calls(run_dir))
    assert [c["prompt_tokens"] for c in calls] == prompts
    assert sum(len(c["events"]) for c in calls) >= 1 and calls[-1]["est_tokens_before"] > calls[-1]["est_tokens_after"]


def test_streaming_passes_chunks_through_and_records_usage(recorded):
    url, record_dir, proxy = recorded
    client = openai.OpenAI(base_url=url, api_key="unused")
    chunks = list(client.chat.completions.create(model="any", messages=task("stream it"), stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith("answer")
    assert all(c.choices for c in chunks), "the usage-only chunk the proxy asked for is not passed on"
    with_usage = list(
        client.chat.completions.create(
            model="any", messages=task("stream it too"), stream=True, stream_options={"include_usage": True}
        )
    )
    assert with_usage[-1].usage is not None and with_usage[-1].usage.prompt_tokens > 0
    settled(proxy)
    lines = [read_calls(d)[0] for d in run_dirs(record_dir)]
    assert len(lines) == 2 and all(c["prompt_tokens"] > 0 and c["status"] == "ok" for c in lines)
    assert all("usage_source" not in c for c in lines)


def test_tool_calls_pass_through(recorded):
    url, _, _ = recorded
    client = openai.OpenAI(base_url=url, api_key="unused")
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    response = client.chat.completions.create(model="any", messages=task("use tools"), tools=tools)
    call = response.choices[0].message.tool_calls[0]
    messages = task("use tools") + [
        response.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "file.py"},
    ]
    again = client.chat.completions.create(model="any", messages=messages, tools=tools)
    assert again.choices[0].message.tool_calls


def test_interleaved_conversations_do_not_mix(upstream, tmp_path):
    proxy = proxy_for(upstream.url, policy="FC", record_dir=tmp_path)
    with serve(build_app(proxy)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        a, b = task("task A"), task("task B")
        for step in range(3):
            for name, history in (("A", a), ("B", b)):
                response = client.chat.completions.create(model="any", messages=history)
                sent = upstream.requests[-1]["messages"]
                assert sent == history, f"conversation {name} step {step} got another history"
                history += [
                    {"role": "assistant", "content": response.choices[0].message.content},
                    {"role": "user", "content": f"observation {name}{step}"},
                ]
        # same prefix, told apart by the client's header
        headers = [{"X-Ctxpolicy-Conversation": "first"}, {"X-Ctxpolicy-Conversation": "second"}]
        for h in headers:
            client.chat.completions.create(model="any", messages=task("task A"), extra_headers=h)
        assert len(proxy.store) == 4
    dirs = run_dirs(tmp_path)
    assert len(dirs) == 4 and {d.name.split("-")[0] for d in dirs} >= {"first", "second"}
    for d in dirs:
        record = read_json(d / "run.json")
        assert record["proxy"]["history_rewrites"] == 0 and record["outcome"] == "not_graded"


def test_longest_prefix_rule_and_history_rewrite():
    ended = []
    store = ConversationStore(lambda: PolicySession("FC"), on_end=lambda c, why: ended.append((c.id, why)))
    assert store.claim(task("other"), name=None, now=0).created
    history = task() + [{"role": "assistant", "content": "a1"}, {"role": "user", "content": "o1"}]
    first = store.claim(task(), name=None, now=0)
    assert first.created and first.new_messages == task()
    second = store.claim(history, name=None, now=1)
    assert second.conversation is first.conversation and second.new_messages == history[2:]
    fresh = store.claim(task(), name=None, now=2)  # same prefix, nothing more: a new conversation
    assert fresh.created and fresh.conversation is not first.conversation
    longer = store.claim(history + [{"role": "assistant", "content": "a2"}], name=None, now=3)
    assert longer.conversation is first.conversation and len(longer.new_messages) == 1  # the longest prefix wins
    assert (
        store.claim(task() + [{"role": "assistant", "content": "b1"}], name=None, now=3.5).conversation
        is fresh.conversation
    )
    edited = task() + [{"role": "user", "content": "my own summary of b1"}]
    rewrite = store.claim(edited, name=None, now=4)  # extends neither: the most recently used one is rewritten
    assert rewrite.rewritten and rewrite.conversation is fresh.conversation
    assert rewrite.new_messages == edited and store.rewrites == 1
    assert rewrite.conversation.rewrites == 1 and not ended
    store.expire(now=4 + store.idle_timeout_s + 1)
    assert len(store) == 3, "a conversation with requests in flight (claimed, not released) never expires"
    for conversation in store.conversations():
        while conversation.busy:
            store.release(conversation, now=4)
    store.expire(now=4 + store.idle_timeout_s + 1)
    assert len(store) == 0 and len(ended) == 3


def test_a_client_rewriting_its_history_gets_a_fresh_context_counted_and_recorded(recorded, upstream):
    url, record_dir, _ = recorded
    client = openai.OpenAI(base_url=url, api_key="unused")
    messages = task("rewrite me")
    agent_loop(client, messages, 3)
    compacted = task("rewrite me") + [{"role": "user", "content": "Summary so far: looked at three files."}]
    client.chat.completions.create(model="any", messages=compacted)
    assert upstream.requests[-1]["messages"] == compacted  # the working context restarts from what was sent
    health = httpx.get(url.removesuffix("/v1") + "/health").json()
    assert health["history_rewrites"] == 1 and health["conversations"] == 1


def test_records_validate_and_aggregate(upstream, tmp_path):
    proxy = proxy_for(upstream.url, record_dir=tmp_path / "rec")
    with serve(build_app(proxy)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        agent_loop(client, task("one"), 4)
        with pytest.raises(openai.InternalServerError):
            client.with_options(max_retries=0).chat.completions.create(model="any", messages=task("FAULT:500 please"))
    dirs = run_dirs(tmp_path / "rec")
    assert len(dirs) == 2
    for d in dirs:
        assert run_dir_problems(d) == []
        check = subprocess.run(
            [sys.executable, "-m", "ctxpolicy.agent.validate", str(d)], capture_output=True, text=True, timeout=60
        )
        assert check.returncode == 0, check.stdout
    outcomes = sorted(read_json(d / "run.json")["outcome"] for d in dirs)
    assert outcomes == ["error", "not_graded"]
    identity = read_json(dirs[0] / "run.json")["identity"]
    assert identity["track"] == "proxy" and identity["benchmark"] == "proxy" and identity["attempt"] == 1
    tables = tmp_path / "tables"
    result = subprocess.run(
        [sys.executable, "-m", "ctxpolicy", "aggregate", "--runs", str(tmp_path / "rec"), "--out", str(tables)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    import pandas as pd

    runs = pd.read_parquet(tables / "runs.parquet")
    assert len(runs) == 2 and set(runs["track"].astype(str)) == {"proxy"}
    assert not runs["has_verdict"].any()  # never graded: no resolve rate counts them
    ok = runs[runs["outcome"].astype(str) == "not_graded"].iloc[0]
    assert ok["billed_exact"] > 0 and ok["compression_events"] >= 1  # the cost columns, as for harness runs
    priced = subprocess.run(
        [sys.executable, "-m", "ctxpolicy", "cost", "-i", ok["run_dir"], "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert priced.returncode == 0, priced.stderr
    cost = json.loads(priced.stdout)  # `ctxpolicy cost` prices the recorded run as aggregate does
    assert cost["exact"]["billed_input"] == pytest.approx(ok["billed_exact"])
    assert cost["estimated"]["billed_input"] == pytest.approx(ok["billed_est"])


def test_summarizing_policy_records_its_summary_calls(upstream, tmp_path):
    from ctxpolicy.policies import EndpointSummarizer

    proxy = proxy_for(
        upstream.url,
        policy="SU/Th/0.5",
        threshold=150,
        record_dir=tmp_path,
        summarizer=EndpointSummarizer(upstream.url, "fake-upstream", max_tokens=16),
    )
    with serve(build_app(proxy)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        agent_loop(client, task("summarize me"), 4)
        settled(proxy)
    [run_dir] = run_dirs(tmp_path)
    calls = list(read_calls(run_dir))
    summaries = [c for c in calls if c["kind"] == "summary"]
    assert summaries and all(c["status"] == "ok" for c in summaries)
    first = calls.index(summaries[0])
    assert calls[first + 1]["kind"] == "agent" and calls[first + 1]["step"] == summaries[0]["step"]
    assert calls[first + 1]["events"][0]["primitive"] == "SU"
    assert run_dir_problems(run_dir) == [] and read_json(run_dir / "run.json")["totals"]["summary_calls"] >= 1


def test_bad_input_gets_json_errors(upstream, tmp_path):
    proxy = proxy_for(upstream.url, record_dir=tmp_path, max_body_bytes=10_000)
    with serve(build_app(proxy)) as url:
        post = f"{url}/v1/chat/completions"
        cases = [
            (httpx.post(post, content=b"{not json"), 400, "invalid_json"),
            (httpx.post(post, json={"model": "m"}), 400, "invalid_request"),
            (httpx.post(post, json={"messages": [{"content": "no role"}]}), 400, "invalid_request"),
            (httpx.post(post, json={"messages": task("x" * 20_000)}), 413, "request_too_large"),
            (
                httpx.post(
                    f"{url}/v1/messages",
                    json={"messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
                ),
                400,
                "invalid_request",
            ),
        ]
        for response, status, kind in cases:
            assert response.status_code == status and response.json()["error"]["type"] == kind, response.text
        assert httpx.post(post, json={"messages": task("FAULT:500")}).status_code == 500


def test_upstream_refusing_connections_is_a_502_and_recorded(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    proxy = proxy_for(dead, record_dir=tmp_path)
    with serve(build_app(proxy)) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json={"messages": task()})
        assert response.status_code == 502 and response.json()["error"]["type"] == "upstream_unreachable"
        assert httpx.get(f"{url}/v1/models").status_code == 502
    [run_dir] = run_dirs(tmp_path)
    record = read_json(run_dir / "run.json")
    assert record["outcome"] == "error" and "unreachable" in record["error"] and run_dir_problems(run_dir) == []


def test_bearer_token_and_api_key_are_enforced_and_never_recorded(upstream, tmp_path):
    proxy = proxy_for(upstream.url, record_dir=tmp_path, client_token="s3cret-client", api_key="s3cret-upstream")
    with serve(build_app(proxy)) as url:
        post = f"{url}/v1/chat/completions"
        assert httpx.post(post, json={"messages": task()}).status_code == 401
        ok = httpx.post(post, json={"messages": task()}, headers={"Authorization": "Bearer s3cret-client"})
        assert ok.status_code == 200
    recorded = "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    assert "s3cret" not in recorded


def test_idle_conversations_expire_and_memory_stays_bounded(upstream, tmp_path):
    proxy = proxy_for(upstream.url, record_dir=tmp_path, idle_timeout_s=0.3, max_conversations=2)
    with serve(build_app(proxy)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        for n in range(3):
            client.chat.completions.create(model="any", messages=task(f"task {n}"))
        assert len(proxy.store) == 2  # the oldest was ended to make room
        assert len([d for d in run_dirs(tmp_path) if read_json(d / "run.json")["complete"]]) == 1
        time.sleep(1.0)
        assert len(proxy.store) == 0
    ended = {read_json(d / "run.json")["proxy"]["ended"] for d in run_dirs(tmp_path)}
    assert ended == {"evicted", "idle"}


def test_anthropic_messages_round_trip():
    body = {
        "system": "S",
        "messages": [
            {"role": "user", "content": "do it"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.py", "is_error": True},
                    {"type": "text", "text": "go on"},
                ],
            },
        ],
    }
    messages = anthropic.to_openai(body)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == {"command": "ls"}
    system, back = anthropic.from_openai(messages)
    assert system == "S"
    assert back[0] == {"role": "user", "content": [{"type": "text", "text": "do it"}]}
    assert back[1]["content"][1] == {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}
    assert back[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "a.py", "is_error": True},
        {"type": "text", "text": "go on"},
    ]


def test_anthropic_front_door_compresses_and_records(upstream, tmp_path):
    proxy = proxy_for(upstream.url, policy="TR/Th/0.5", threshold=150, record_dir=tmp_path)
    with serve(build_app(proxy)) as url:
        messages = [{"role": "user", "content": "anthropic task"}]
        sizes = []
        for _ in range(5):
            response = httpx.post(
                f"{url}/v1/messages", json={"model": "m", "max_tokens": 8, "system": "S", "messages": messages}
            )
            assert response.status_code == 200 and response.json()["content"][0]["text"] == "done"
            sent = upstream.requests[-1]
            assert sent["system"] == "S" and sent["messages"][0]["content"][0]["text"] == "anthropic task"
            sizes.append(len(sent["messages"]))
            messages += [{"role": "assistant", "content": "thinking"}, {"role": "user", "content": OBSERVATION}]
    assert sizes[-1] < 1 + 2 * 4, sizes
    [run_dir] = run_dirs(tmp_path)
    assert run_dir_problems(run_dir) == [] and read_json(run_dir / "run.json")["settings"]["front_door"] == "anthropic"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_command_line_start_up_errors_and_sigterm_writes_records(upstream, tmp_path):
    base = [sys.executable, "-m", "ctxpolicy", "proxy"]
    bad = subprocess.run(
        base + ["--policy", "NOPE/Th", "--endpoint", upstream.url], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--policy" in bad.stderr and "Traceback" not in bad.stderr
    refused = subprocess.run(
        base + ["--policy", "FC", "--endpoint", f"http://127.0.0.1:{_free_port()}/v1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "does not answer" in refused.stderr
    missing_key = subprocess.run(
        base + ["--policy", "FC", "--endpoint", upstream.url, "--api-key-env", "NO_SUCH_VAR_X"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing_key.returncode == 2 and "NO_SUCH_VAR_X" in missing_key.stderr

    port = _free_port()
    env = {**os.environ, "UPSTREAM_KEY": "k-secret-123"}
    process = subprocess.Popen(
        base
        + [
            "--policy",
            "OTRC/St",
            "--endpoint",
            upstream.url,
            "--listen",
            f"127.0.0.1:{port}",
            "--out",
            str(tmp_path),
            "--api-key-env",
            "UPSTREAM_KEY",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and process.poll() is None, "proxy did not start"
                time.sleep(0.2)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")
        agent_loop(client, task("cli"), 2)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, output
    assert "k-secret-123" not in output
    [run_dir] = run_dirs(tmp_path)
    assert read_json(run_dir / "run.json")["proxy"]["ended"] == "shutdown" and run_dir_problems(run_dir) == []


def test_merge_same_role_joins_runs_of_plain_messages_only():
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    messages = [
        SYSTEM,
        {"role": "user", "content": "task"},
        {"role": "user", "content": "[2 tool results removed]"},
        {"role": "assistant", "content": "a", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
        {"role": "tool", "tool_call_id": "c2", "content": "y"},
        {"role": "user", "content": [{"type": "text", "text": "p1"}]},
        {"role": "user", "content": "p2"},
    ]
    merged = merge_same_role(messages)
    assert [m["role"] for m in merged] == ["system", "user", "assistant", "tool", "tool", "user"]
    assert merged[1] == {"role": "user", "content": "task\n\n[2 tool results removed]"}
    assert merged[-1]["content"] == [{"type": "text", "text": "p1"}, {"type": "text", "text": "p2"}]
    assert messages[1] == {"role": "user", "content": "task"}  # the input is left as it was
    assert merge_same_role(merged) == merged


def test_merge_same_role_is_opt_in_and_what_is_sent_is_recorded(upstream, tmp_path):
    two_users = task() + [{"role": "user", "content": "and a second user message"}]
    for merge in (False, True):
        proxy = proxy_for(upstream.url, policy="FC", record_dir=tmp_path / str(merge), merge_same_role=merge)
        with serve(build_app(proxy)) as url:
            openai.OpenAI(base_url=f"{url}/v1", api_key="unused").chat.completions.create(
                model="any", messages=two_users
            )
            settled(proxy)
        roles = [m["role"] for m in upstream.requests[-1]["messages"]]
        assert roles == (["system", "user"] if merge else ["system", "user", "user"])
        [run_dir] = run_dirs(tmp_path / str(merge))
        assert len(rebuild_prompts(run_dir)[0]) == len(roles)


def test_conversations_end_on_demand(upstream, tmp_path):
    proxy = proxy_for(upstream.url, record_dir=tmp_path)
    with serve(build_app(proxy)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused")
        for n in range(2):
            client.chat.completions.create(model="any", messages=task(f"task {n}"))
        settled(proxy)
        first, second = sorted(c.id for c in proxy.store.conversations())
        assert httpx.post(f"{url}/conversations/end", json={"conversation": "nope"}).status_code == 404
        assert httpx.post(f"{url}/conversations/end", json={"conversation": 3}).status_code == 400
        assert httpx.post(f"{url}/conversations/end", json={"conversation": first}).json()["ended"] == [first]
        assert [c.id for c in proxy.store.conversations()] == [second]
        assert httpx.post(f"{url}/conversations/end").json() == {"ended": [second], "busy": []}
        assert len(proxy.store) == 0
    assert {read_json(d / "run.json")["proxy"]["ended"] for d in run_dirs(tmp_path)} == {"ended"}
