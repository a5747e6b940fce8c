"""For the proxy's tests and benchmark: serve an ASGI app on a free loopback port in a thread,
and an instant fake upstream (OpenAI chat completions, streaming or not, and Anthropic messages).

The fake answers every request at once; a ``FAULT:500`` anywhere in the messages gets HTTP 500.
It reports ``prompt_tokens`` as the local cl100k count of what it received, so a test can see
the compressed history arrive. Requests are kept in ``upstream.requests``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ctxpolicy.tokens import count_messages


@contextlib.contextmanager
def serve(app, host: str = "127.0.0.1") -> Iterator[str]:
    """Run ``app`` with uvicorn on a free port in a thread; yields ``http://host:port``."""
    sock = socket.socket()
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def settled(proxy, timeout_s: float = 20.0) -> None:
    """Wait until every request the proxy took has its call recorded (written after the answer)."""
    deadline = time.monotonic() + timeout_s
    while proxy.in_flight:
        if time.monotonic() > deadline:
            raise AssertionError(f"{proxy.in_flight} requests still in flight after {timeout_s}s")
        time.sleep(0.02)


class FakeUpstream:
    def __init__(self, model: str = "fake-upstream", count_tokens: bool = True):
        self.model = model
        self.count_tokens = count_tokens
        self.requests: list[dict] = []
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    def _prompt_tokens(self, messages: list) -> int:
        return count_messages(messages) if self.count_tokens else len(messages)

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def chat(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(body)
        messages = body["messages"]
        if "FAULT:500" in json.dumps(messages):
            return JSONResponse({"error": {"message": "internal server error (fake)", "code": 500}}, status_code=500)
        prompt = self._prompt_tokens(messages)
        n = len(self.requests)
        message: dict = {"role": "assistant", "content": f"answer {n}"}
        if body.get("tools"):
            message["tool_calls"] = [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})},
                }
            ]
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 3,
            "total_tokens": prompt + 3,
            "prompt_tokens_details": {"cached_tokens": 0},
        }
        if not body.get("stream"):
            return JSONResponse(
                {
                    "id": f"chatcmpl-{n}",
                    "object": "chat.completion",
                    "model": self.model,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": usage,
                }
            )
        include_usage = (body.get("stream_options") or {}).get("include_usage")

        def chunk(delta: dict, finish: str | None = None, **extra) -> bytes:
            payload = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                **extra,
            }
            return b"data: " + json.dumps(payload).encode() + b"\n\n"

        async def events():
            yield chunk({"role": "assistant", "content": ""})
            yield chunk({"content": message["content"]})
            if message.get("tool_calls"):
                call = message["tool_calls"][0]
                yield chunk({"tool_calls": [{"index": 0, **call}]})
            yield chunk({}, "stop")
            if include_usage:
                yield (
                    b"data: "
                    + json.dumps(
                        {
                            "id": f"chatcmpl-{n}",
                            "object": "chat.completion.chunk",
                            "model": self.model,
                            "choices": [],
                            "usage": usage,
                        }
                    ).encode()
                    + b"\n\n"
                )
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def messages(self, request: Request) -> Response:
        body = json.loads(await request.body())
        self.requests.append(body)
        flat = [{"role": "system", "content": body.get("system") or ""}] + [
            {"role": m["role"], "content": json.dumps(m["content"])} for m in body["messages"]
        ]
        prompt = self._prompt_tokens(flat)
        return JSONResponse(
            {
                "id": f"msg_{len(self.requests)}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [{"type": "text", "text": "done"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": prompt, "output_tokens": 2, "cache_read_input_tokens": 0},
            }
        )


class ScriptedUpstream:
    """A loopback upstream whose answer's shape is scripted by a marker in the messages.

    ``SHAPE:<name>`` anywhere in the request's messages picks the shape: ``ok`` (the default),
    ``truncated`` (a 200 whose JSON is cut off), ``no_choices`` (``choices: []``), ``stream_cut``
    (a stream that stops in the middle of an event), ``stream_malformed`` (a stream event that is
    not JSON) and ``trickle`` (a valid answer, one byte every ``trickle_s``, for at most
    ``trickle_for_s``). ``DELAY:<seconds>`` makes the answer wait first. With ``tools`` offered it
    answers with a ``bash`` tool call: ``ls`` first, then, once a tool result is in the history,
    mini-swe-agent's submit command. Requests are counted in ``requests``.
    """

    SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"

    def __init__(self, model: str = "scripted", trickle_s: float = 0.3, trickle_for_s: float = 20.0):
        self.model = model
        self.trickle_s = trickle_s
        self.trickle_for_s = trickle_for_s
        self.requests = 0
        self.user_agents: list[str] = []
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    async def models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    def _answer(self, body: dict) -> dict:
        message: dict = {"role": "assistant", "content": f"answer {self.requests}"}
        if body.get("tools"):
            done = any(m.get("role") == "tool" for m in body["messages"])
            command = self.SUBMIT if done else "ls"
            message = {
                "role": "assistant",
                "content": "THOUGHT: next step",
                "tool_calls": [
                    {
                        "id": f"call_{self.requests}",
                        "type": "function",
                        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                    }
                ],
            }
        return message

    async def chat(self, request: Request) -> Response:
        import asyncio
        import re

        body = json.loads(await request.body())
        self.requests += 1
        self.user_agents.append(request.headers.get("user-agent", ""))
        text = json.dumps(body["messages"])
        shape = (re.search(r"SHAPE:(\w+)", text) or [None, "ok"])[1]
        delay = re.search(r"DELAY:([0-9.]+)", text)
        if delay:
            await asyncio.sleep(float(delay[1]))
        n = self.requests
        message = self._answer(body)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
        whole = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
        if shape == "truncated":
            return Response(json.dumps(whole)[:40], media_type="application/json")
        if shape == "no_choices":
            return JSONResponse({**whole, "choices": []})
        if not body.get("stream"):
            data = json.dumps(whole).encode()
            if shape != "trickle":
                return Response(data, media_type="application/json")
            return StreamingResponse(self._trickle(data), media_type="application/json")

        def event(delta: dict, finish_reason: str | None = None) -> bytes:
            chunk = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            return b"data: " + json.dumps(chunk).encode() + b"\n\n"

        first = event({"role": "assistant", "content": message["content"]})
        rest = event({}, finish) + b"data: " + json.dumps({**whole, "choices": [], "usage": usage}).encode() + b"\n\n"
        if shape == "stream_cut":
            parts = [first, rest[:25]]
        elif shape == "stream_malformed":
            parts = [first, b"data: {this is not json\n\n", rest, b"data: [DONE]\n\n"]
        else:
            parts = [first, rest, b"data: [DONE]\n\n"]
        data = b"".join(parts)

        async def events():
            for part in parts:
                yield part

        body_iter = self._trickle(data) if shape == "trickle" else events()
        return StreamingResponse(body_iter, media_type="text/event-stream")

    async def _trickle(self, data: bytes):
        import asyncio

        deadline = time.monotonic() + self.trickle_for_s
        for byte in data:
            if time.monotonic() > deadline:
                return
            yield bytes([byte])
            await asyncio.sleep(self.trickle_s)
