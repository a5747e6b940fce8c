"""ctxpolicy proxy in front of the embedded llama.cpp server, for real: the openai SDK (streaming
and not) and mini-swe-agent's own LitellmModel on a local-suite task, recorded and aggregated.

Kept small for CI: one model load for the module, short prompts, a few output tokens per call.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import openai
import pytest
from conftest import LLM_THREADS, require
from proxy_helpers import serve, settled

from ctxpolicy.agent.record import rebuild_prompts
from ctxpolicy.rundir import read_json, read_jsonl
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.policies import parse_spec
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.recording import ProxySettings

pytestmark = pytest.mark.llm

REPO = Path(__file__).resolve().parents[1]
GGUF = "qwen2.5-coder-0.5b-instruct-q4_k_m"
MODEL_CFG = {
    "server": "llamacpp",
    "served_name": "qwen05b-proxy",
    "gguf": GGUF,
    "ctx_size": 4096,
    "threads": LLM_THREADS,
    "parallel": 2,
    "prefix_caching": True,
    "seed": 1,
}
THRESHOLD = 400  # the SDK conversation passes it at its third call
OBSERVATION = "\n".join(f"line {i}: value = {i * 37 % 101}" for i in range(30))  # ~240 tokens


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    from ctxpolicy.serving.models import cached_model
    from ctxpolicy.serving.server import start_server

    require(
        cached_model(GGUF) is not None, f"embedded model (python -m ctxpolicy.serving.models ensure --install {GGUF})"
    )
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with start_server(MODEL_CFG, log_path=log, ready_timeout_s=180) as server:
        yield server


@pytest.fixture(scope="module")
def proxied(llama, tmp_path_factory):
    """(proxy base URL, record dir) for a recording TR/Th/0.5 proxy in front of llama.cpp."""
    record = tmp_path_factory.mktemp("proxy-real")
    settings = ProxySettings(
        policy=parse_spec("TR/Th/0.5"),
        threshold=THRESHOLD,
        upstream_url=llama.base_url,
        upstream_model=None,
        summarizer_model=None,
    )
    proxy = Proxy(ProxyConfig(settings=settings, upstream_url=llama.base_url, record_dir=record))
    with serve(build_app(proxy)) as url:
        yield f"{url}/v1", record, proxy
    # leaving the block shut the proxy down: every conversation has its run.json now


def _task(text: str) -> list[dict]:
    return [
        {"role": "system", "content": "You are terse. Answer in at most five words."},
        {"role": "user", "content": text},
    ]


def _run_dir(record: Path, proxy: Proxy, conversation_text: str) -> Path:
    [conversation] = [c for c in proxy.store.conversations() if c.last_history[1]["content"] == conversation_text]
    return next(record.glob(f"*/{conversation.id}__a1"))


def test_sdk_non_streaming_upstream_receives_the_compressed_history(proxied):
    url, record, proxy = proxied
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    messages = _task("Read the tool outputs and say OK.")
    prompts = []
    for _ in range(4):
        response = client.chat.completions.create(model="qwen05b-proxy", messages=messages, max_tokens=4, temperature=0)
        prompts.append(response.usage.prompt_tokens)
        messages += [
            {"role": "assistant", "content": response.choices[0].message.content or "OK"},
            {"role": "user", "content": OBSERVATION},
        ]
    settled(proxy)
    calls = list(read_jsonl(_run_dir(record, proxy, messages[1]["content"]) / "calls.jsonl"))
    assert [c["prompt_tokens"] for c in calls] == prompts  # what llama.cpp reported is what was recorded
    fired = [i for i, c in enumerate(calls) if c["events"]]
    assert fired, f"no compression event at threshold {THRESHOLD}: {prompts}"
    first = fired[0]
    assert prompts[first] < prompts[first - 1] or prompts[first] < calls[first]["est_tokens_before"], prompts
    assert max(prompts) < 2 * THRESHOLD  # the client's history reached ~800 tokens; llama.cpp never saw it whole


def test_sdk_streaming_with_and_without_usage(proxied):
    url, _, _ = proxied
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    plain = list(
        client.chat.completions.create(
            model="qwen05b-proxy", messages=_task("Say hello."), max_tokens=4, temperature=0, stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in plain if c.choices).strip()
    assert all(c.choices for c in plain)  # the usage chunk the proxy asked for is not passed on
    counted = list(
        client.chat.completions.create(
            model="qwen05b-proxy",
            messages=_task("Say bye."),
            max_tokens=4,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert counted[-1].usage is not None and counted[-1].usage.prompt_tokens > 10


def test_interleaved_conversations_and_a_history_rewrite(proxied):
    url, record, proxy = proxied
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    a, b = _task("Conversation A: count."), _task("Conversation B: count.")
    for step in range(2):
        for history in (a, b):
            response = client.chat.completions.create(
                model="qwen05b-proxy", messages=history, max_tokens=3, temperature=0
            )
            history += [
                {"role": "assistant", "content": response.choices[0].message.content or "1"},
                {"role": "user", "content": f"next {step}"},
            ]
    rewrites = proxy.store.rewrites
    rewritten = _task("Conversation A: count.") + [{"role": "user", "content": "(earlier turns summarized) next 1"}]
    client.chat.completions.create(model="qwen05b-proxy", messages=rewritten, max_tokens=3, temperature=0)
    assert proxy.store.rewrites == rewrites + 1
    settled(proxy)
    for history in (a, b):
        prompts = rebuild_prompts(_run_dir(record, proxy, history[1]["content"]))
        assert all(p[1] == history[1] for p in prompts)  # never a message of the other conversation
    a_prompts = rebuild_prompts(_run_dir(record, proxy, a[1]["content"]))
    assert a_prompts[-1] == rewritten and a_prompts[1] == a[:4]


def test_anthropic_messages_front_door_with_tool_use(proxied):
    import httpx

    url, record, proxy = proxied
    messages = [
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py b.py"},
                {"type": "text", "text": "Which file is first?"},
            ],
        },
    ]
    tools = [
        {
            "name": "bash",
            "description": "run a command",
            "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
        }
    ]
    body = {
        "model": "qwen05b-proxy",
        "max_tokens": 4,
        "temperature": 0,
        "system": "You are terse.",
        "messages": messages,
        "tools": tools,
    }
    base = url.removesuffix("/v1")
    answer = httpx.post(f"{base}/v1/messages", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    assert answer.json()["type"] == "message" and answer.json()["usage"]["input_tokens"] > 0
    with httpx.stream("POST", f"{base}/v1/messages", json={**body, "stream": True}, timeout=300) as stream:
        events = [line for line in stream.iter_lines() if line.startswith("event:")]
    assert "event: message_start" in events and "event: message_stop" in events
    settled(proxy)
    [conversation] = [c for c in proxy.store.conversations() if c.data["record"].front_door == "anthropic"]
    calls = list(read_jsonl(next(record.glob(f"*/{conversation.id}__a1")) / "calls.jsonl"))
    assert len(calls) == 2 and all(c["status"] == "ok" and c["prompt_tokens"] > 0 for c in calls)


def test_mini_swe_agent_litellm_model_through_the_proxy(proxied, tmp_path):
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_model import LitellmModel

    from ctxpolicy.agent.plan import repo_root
    from ctxpolicy.agent.settings import load_templates
    from ctxpolicy.benchmarks import get_adapter
    from ctxpolicy.study.config import load_config
    from ctxpolicy.sandbox import bwrap_available

    require(bwrap_available(), "bubblewrap (Debian package bubblewrap)")
    url, record, proxy = proxied
    config = load_config(repo_root() / "config" / "config.yaml")
    cohort = tmp_path / "cohort.txt"
    cohort.write_text("tinyweb-001\n")
    adapter = get_adapter("local", {**config["benchmarks"]["local"], "cohorts": {"main": str(cohort)}}, repo_root())
    task = adapter.tasks("main")[0]
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    adapter.prepare_workspace(task, workspace)
    templates = load_templates("tool")
    model = LitellmModel(
        model_name="openai/qwen05b-proxy",
        cost_tracking="ignore_errors",
        model_kwargs={
            "api_base": url,
            "api_key": "unused",
            "max_tokens": 40,
            "temperature": 0,
            "extra_headers": {"X-Ctxpolicy-Conversation": "mini-swe-agent"},
        },
    )
    agent = DefaultAgent(
        model,
        adapter.make_environment(task, workspace, 30),
        system_template=templates.system_template,
        instance_template=templates.instance_template,
        step_limit=2,
        cost_limit=0,
        max_consecutive_format_errors=3,
    )
    try:
        agent.run(task.instruction, submission_instructions=adapter.submission_instructions(task))
    except Exception as exc:  # the agent's own exits are not under test; the proxy's handling is
        pytest.fail(f"mini-swe-agent stopped with {type(exc).__name__}: {exc}")
    assert agent.n_calls >= 2
    settled(proxy)
    [run_dir] = list(record.glob("*/mini-swe-agent-*__a1"))
    calls = list(read_jsonl(run_dir / "calls.jsonl"))
    assert len(calls) == agent.n_calls and all(c["status"] == "ok" and c["prompt_tokens"] > 0 for c in calls)


def test_records_validate_and_aggregate_after_shutdown(proxied, tmp_path_factory):
    """Runs last in this module: ends every conversation as the proxy's shutdown does."""
    url, record, proxy = proxied
    proxy.store.end_all("shutdown")  # what SIGTERM does at the end of the drain
    dirs = sorted(record.glob("*/*__a1"))
    assert len(dirs) >= 5
    for run_dir in dirs:
        assert run_dir_problems(run_dir) == [], run_dir
        assert read_json(run_dir / "run.json")["identity"]["track"] == "proxy"
    check = subprocess.run(
        [sys.executable, "-m", "ctxpolicy.agent.validate", *map(str, dirs)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout
    out = tmp_path_factory.mktemp("tables")
    result = subprocess.run(
        [sys.executable, "-m", "ctxpolicy", "aggregate", "--runs", str(record), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    import pandas as pd

    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == len(dirs) and (runs["compression_events"] > 0).any()
