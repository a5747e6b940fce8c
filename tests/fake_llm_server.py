"""A local OpenAI-compatible chat server that misbehaves on request, for the agent's fault tests.

Behaviour is chosen per request by a directive anywhere in the messages, ``FAULT:<mode>``:

  (none)     a well-behaved agent: step 1 runs ``ls``, step 2 submits
  500        HTTP 500, always
  flaky      HTTP 500 for the first two requests of that conversation, then as (none)
  hang       answers only after ``hang_s`` seconds (longer than the client's timeout)
  too_long   HTTP 400 with llama.cpp's exceed_context_size_error
  drop       closes the connection without an answer
  garbage    answers with no command at all (a format error every step)
  loop       never submits (``ls`` forever)
  usage_lots      answers as (none) but with ``usage.prompt_tokens: "lots"``
  cached_abc      answers as (none) but with ``usage.prompt_tokens_details.cached_tokens: "abc"``
  no_choices      answers 200 with ``choices: []``

``FakeLLMServer(fault=MODE)`` applies MODE to every request without a directive (for tasks whose
text we do not write, e.g. the offline suite's).

A refused connection needs no mode: use ``closed_port_url()``. Usage reports
``prompt_tokens_details.cached_tokens`` like vLLM and recent llama.cpp. Requests are kept in
``server.requests`` for assertions. Bind is loopback only; every wait is bounded.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIRECTIVE = re.compile(r"FAULT:([a-z_0-9]+)")
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
OVERFLOW_BODY = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 20000,
        "n_ctx": 16384,
    }
}


def closed_port_url() -> str:
    """A loopback URL where nothing listens (the port was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _text_of(messages: list[dict]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


class FakeLLMServer:
    def __init__(self, hang_s: float = 20.0, model: str = "fake-model", fault: str | None = None):
        self.hang_s = hang_s
        self.model = model
        self.fault = fault
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._counts: Counter = Counter()
        self._stop = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    # --- behaviour -----------------------------------------------------------------------------

    def respond(self, body: dict) -> tuple[int, dict | None]:
        """(status, JSON body) for a request; (0, None) means: drop the connection."""
        messages = body.get("messages") or []
        text = _text_of(messages)
        match = DIRECTIVE.search(text)
        mode = match.group(1) if match else (self.fault or "ok")
        with self._lock:
            self.requests.append(body)
            conversation = messages[1]["content"] if len(messages) > 1 else text
            self._counts[conversation] += 1
            seen = self._counts[conversation]
        if mode == "500" or (mode == "flaky" and seen <= 2):
            return 500, {"error": {"message": "internal server error (fake)", "code": 500}}
        if mode == "too_long":
            return 400, OVERFLOW_BODY
        if mode == "drop":
            return 0, None
        if mode == "hang":
            self._stop.wait(self.hang_s)
            return 503, {"error": {"message": "hung"}}
        steps = sum(1 for m in messages if m.get("role") == "assistant")
        if mode == "garbage":
            return 200, self._completion(body, "I am not sure what to do here.", None)
        command = "ls" if mode == "loop" or steps == 0 else SUBMIT
        return 200, _corrupted(self._completion(body, f"THOUGHT: step {steps + 1}.", command), mode)

    def _completion(self, body: dict, thought: str, command: str | None) -> dict:
        prompt_tokens = max(1, len(json.dumps(body.get("messages"))) // 4)
        message: dict = {"role": "assistant", "content": thought}
        if command is not None and body.get("tools"):
            message["tool_calls"] = [
                {
                    "id": f"call_{len(self.requests)}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
            ]
        elif command is not None:
            message["content"] = f"{thought}\n\n```mswea_bash_command\n{command}\n```"
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": 12,
                "total_tokens": prompt_tokens + 12,
                "prompt_tokens_details": {"cached_tokens": prompt_tokens // 2},
            },
        }

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload = server.respond(body)
                if status == 0:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                data = json.dumps({"object": "list", "data": [{"id": server.model, "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _corrupted(completion: dict, mode: str) -> dict:
    if mode == "usage_lots":
        completion["usage"]["prompt_tokens"] = "lots"
    elif mode == "cached_abc":
        completion["usage"]["prompt_tokens_details"]["cached_tokens"] = "abc"
    elif mode == "no_choices":
        completion["choices"] = []
    return completion


class FakeBenchmark:
    """A minimal benchmark adapter for the fault tests: tasks given in code, commands run locally.

    The real adapters (ctxpolicy.benchmarks) and the bubblewrap sandbox are exercised by the
    end-to-end test with the embedded model; here only the agent's own logic is under test.
    """

    name = "fake"

    def __init__(self, tasks):
        self._tasks = list(tasks)

    def tasks(self, cohort: str):
        return list(self._tasks)

    def check_environment(self) -> None:
        pass

    def prepare_workspace(self, task, workspace) -> None:
        (workspace / "README.txt").write_text(task.instruction)

    def release_workspace(self, task, workspace) -> None:
        pass

    def make_environment(self, task, workspace, command_timeout_s: int):
        from minisweagent.environments.local import LocalEnvironment

        return LocalEnvironment(cwd=str(workspace), timeout=command_timeout_s)

    def submission_instructions(self, task) -> str:
        return f"When you are done, run exactly: {SUBMIT}"

    def collect_submission(self, task, workspace, submission_text: str) -> str:
        return submission_text
