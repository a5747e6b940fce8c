"""The proxy's stream accounting with the real openai SDK: a stream the client was sent through
``[DONE]`` is delivered, whatever the client or the upstream does next; one the client left
before ``[DONE]`` is a failed call saying so; a delivered call always has its prompt tokens.

The scripted upstream streams a long answer in many chunks and, like HTTP/1.1 servers that
stream in chunks, ends its body half a second after ``data: [DONE]``: the SDK stops reading at
``[DONE]`` and closes the connection before the upstream's body ends.
"""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from proxy_helpers import serve, settled
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from ctxpolicy.policies import parse_spec
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.recording import ProxySettings
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.rundir import read_calls, read_message_lines

WORDS = 120  # one chunk per word: a long answer
TAIL_S = 0.5  # how long the upstream keeps its body open after [DONE]


class SlowEndingUpstream:
    """Streams ``WORDS`` chunks (pausing after ten when the prompt says ``pause``), usage when asked (unless ``usage`` is off), ``[DONE]``, then
    keeps the body open ``TAIL_S`` seconds before ending it."""

    def __init__(self, usage: bool = True):
        self.usage = usage
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> StreamingResponse:
        body = json.loads(await request.body())
        include_usage = self.usage and (body.get("stream_options") or {}).get("include_usage")

        def event(payload: dict) -> bytes:
            return (
                b"data: "
                + json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "m", **payload}).encode()
                + b"\n\n"
            )

        async def events():
            yield event(
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
            )
            for n in range(WORDS):
                if n == 10 and "pause" in json.dumps(body["messages"]):
                    await asyncio.sleep(2)  # the client leaves meanwhile
                yield event({"choices": [{"index": 0, "delta": {"content": f"word{n} "}, "finish_reason": None}]})
            yield event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            if include_usage:
                usage = {"prompt_tokens": 42, "completion_tokens": WORDS, "total_tokens": 42 + WORDS}
                yield event({"choices": [], "usage": usage})
            yield b"data: [DONE]\n\n"
            await asyncio.sleep(TAIL_S)

        return StreamingResponse(events(), media_type="text/event-stream")


def _proxy(upstream_url: str, record_dir) -> Proxy:
    settings = ProxySettings(
        policy=parse_spec("FC"),
        threshold=None,
        upstream_url=upstream_url,
        upstream_model=None,
        summarizer_model=None,
        idle_timeout_s=3600.0,
        max_conversations=256,
        merge_same_role=False,
    )
    return Proxy(ProxyConfig(settings=settings, upstream_url=upstream_url, record_dir=record_dir))


@pytest.fixture
def proxied(tmp_path, request):
    upstream = SlowEndingUpstream(usage=getattr(request, "param", True))
    with serve(upstream.app) as up:
        proxy = _proxy(f"{up}/v1", tmp_path / "rec")
        with serve(build_app(proxy)) as url:
            yield (
                openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60),
                proxy,
                tmp_path / "rec",
            )


def _calls(record_dir) -> list[dict]:
    return [c for d in sorted(record_dir.glob("*/*__a*")) for c in read_calls(d)]


def test_streams_the_sdk_read_through_done_are_delivered(proxied):
    client, proxy, record_dir = proxied
    texts = []
    for k in range(4):
        stream = client.chat.completions.create(
            model="any", messages=[{"role": "user", "content": f"task {k}"}], stream=True
        )
        texts.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))
    assert all(t.count("word") == WORDS for t in texts)
    settled(proxy)
    calls = _calls(record_dir)
    assert len(calls) == 4
    assert [c["status"] for c in calls] == ["ok"] * 4, [c["error"] for c in calls]
    assert all(c["prompt_tokens"] == 42 and c["completion_tokens"] == WORDS for c in calls)


@pytest.mark.parametrize("proxied", [False], indirect=True)
def test_a_stream_without_usage_is_counted_locally_and_marked(proxied):
    client, proxy, record_dir = proxied
    stream = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}], stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices).count("word") == WORDS
    settled(proxy)
    (call,) = _calls(record_dir)
    assert call["status"] == "ok" and call["usage_source"] == "local"
    assert call["prompt_tokens"] > 0 and call["completion_tokens"] > WORDS // 2


def test_a_client_gone_before_done_is_a_failed_call_saying_so(proxied):
    client, proxy, record_dir = proxied
    stream = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "pause"}], stream=True)
    for n, _ in enumerate(stream):
        if n == 3:
            break
    stream.close()
    settled(proxy)
    (call,) = _calls(record_dir)
    assert call["status"] == "error" and "before" in call["error"] and "[DONE]" in call["error"], call["error"]


def test_the_streamed_answer_is_recorded(proxied):
    client, proxy, record_dir = proxied
    stream = client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}], stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    settled(proxy)
    (run_dir,) = sorted(record_dir.glob("*/*__a*"))
    (call,) = read_calls(run_dir)
    store = {row["id"]: row["message"] for row in read_message_lines(run_dir)}
    assert store[call["reply_id"]] == {"role": "assistant", "content": text}
    proxy.end_on_demand(None)
    assert not run_dir_problems(run_dir)
