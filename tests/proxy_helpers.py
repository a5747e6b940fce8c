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
