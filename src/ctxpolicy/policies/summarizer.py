"""Summarizers: the one piece of I/O a policy performs.

The policy builds the request (a system and a user message from a template pair, see prompts.py);
a summarizer only sends it and reports what came back as a :class:`SummaryCall`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ctxpolicy.policies.prompts import BLOCK_BEGIN, BLOCK_END
from ctxpolicy.tokens import count_messages, count_text

if TYPE_CHECKING:
    from ctxpolicy.chat_completion import ChatResponse

DEFAULT_TEMPERATURE = 0.2
DEFAULT_MAX_TOKENS = 4096


@dataclass(frozen=True)
class SummaryCall:
    request_messages: list[dict]
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    start: float
    end: float
    model: str
    error: str | None = None

    @classmethod
    def failed(cls, request_messages: list[dict], *, start: float, model: str, error: str) -> SummaryCall:
        """A call that brought no summary back (ended now): ``error`` says why."""
        return cls(request_messages, "", None, None, None, start, time.time(), model, error=error)


@runtime_checkable
class Summarizer(Protocol):
    def summarize(self, request_messages: list[dict]) -> SummaryCall: ...


class SummaryTransport(Protocol):
    """Sends one chat-completions body and answers a ``chat_completion.ChatResponse``: the harness's
    ``agent.client.ChatClient`` (retries, the run's deadline) or
    :class:`HttpTransport`. ``errors`` are the exceptions it raises for a failed call."""

    errors: tuple[type[Exception], ...]

    def complete(self, body: dict, *, deadline: float | None = None) -> ChatResponse: ...


# (the SummaryCall, latency in seconds, HTTP attempts) -> None
SummaryListener = Callable[[SummaryCall, float, int | None], None]


class HttpTransport:
    """One POST to ``{base_url}/chat/completions`` under a hard deadline of ``timeout_s``, no retries."""

    def __init__(self, base_url: str, *, timeout_s: float = 600.0, api_key: str | None = None):
        import httpx

        from ctxpolicy.chat_completion import MalformedCompletion

        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.api_key = api_key
        self.errors = (httpx.HTTPError, MalformedCompletion, ValueError)

    def complete(self, body: dict, *, deadline: float | None = None) -> ChatResponse:
        from ctxpolicy.chat_completion import chat_response
        from ctxpolicy.deadline_http import request

        timeout_s = self.timeout_s if deadline is None else max(0.0, min(self.timeout_s, deadline - time.time()))
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        start, t0 = time.time(), time.perf_counter()
        # timeout_s is a hard deadline for the whole request, however the server paces its bytes
        response = request("POST", f"{self.base_url}/chat/completions", json=body, headers=headers, timeout_s=timeout_s)
        response.raise_for_status()
        return chat_response(
            response.json(), start=start, end=time.time(), latency_s=time.perf_counter() - t0, attempts=1
        )


class EndpointSummarizer:
    """The one summarizer client of an OpenAI-compatible server: the harness, the proxy and the replay.

    It sends the policy's request through ``transport`` (by default :class:`HttpTransport` to
    ``base_url``; the harness passes its ``ChatClient``), never raises (a failed call is a
    :class:`SummaryCall` with ``error``), and reports every call to ``listener``.
    """

    def __init__(
        self,
        base_url: str | None,
        model: str,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout_s: float = 600.0,
        api_key: str | None = None,
        *,
        seed: int | None = None,
        transport: SummaryTransport | None = None,
        deadline: Callable[[], float | None] = lambda: None,
        listener: SummaryListener | None = None,
    ):
        if transport is None:
            if not base_url:
                raise ValueError("EndpointSummarizer: base_url is required when no transport is given")
            transport = HttpTransport(base_url, timeout_s=timeout_s, api_key=api_key)
        self.transport = transport
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self._deadline = deadline
        self._listener = listener

    def summarize(self, request_messages: list[dict]) -> SummaryCall:
        body = {
            "model": self.model,
            "messages": request_messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stream": False,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        start, t0 = time.time(), time.perf_counter()
        try:
            reply = self.transport.complete(body, deadline=self._deadline())
        except self.transport.errors as exc:
            call = SummaryCall.failed(
                request_messages, start=start, model=self.model, error=f"{type(exc).__name__}: {exc}"
            )
            self._report(call, time.perf_counter() - t0, getattr(exc, "attempts", None))
            return call
        call = SummaryCall(
            request_messages,
            reply.content or "",
            reply.prompt_tokens,
            reply.completion_tokens,
            reply.cached_tokens,
            reply.start,
            reply.end,
            reply.model or self.model,
        )
        self._report(call, reply.latency_s, reply.attempts)
        return call

    def _report(self, call: SummaryCall, latency_s: float, attempts: int | None) -> None:
        if self._listener is not None:
            self._listener(call, latency_s, attempts)


_TRANSCRIPT_LINE_RE = re.compile(r"^(?!###)\S.*$", re.MULTILINE)


class DeterministicSummarizer:
    """A stand-in for tests: a reproducible extract of the request, no model involved.

    Structured requests (those naming the ``[CONTEXT SUMMARY]`` marker) get the five sections
    between the markers; free requests get prose. The extract is taken from the role-tagged
    transcript (from the first ``### `` line on). ``fail=True`` reports an error instead.
    """

    model = "deterministic"

    def __init__(self, words: int = 40, fail: bool = False):
        self.words = words
        self.fail = fail
        self.requests: list[list[dict]] = []

    def summarize(self, request_messages: list[dict]) -> SummaryCall:
        self.requests.append(request_messages)
        start = time.time()
        prompt = "\n".join(str(m.get("content") or "") for m in request_messages)
        if self.fail:
            return SummaryCall.failed(
                request_messages, start=start, model=self.model, error="DeterministicSummarizer: asked to fail"
            )
        digest = hashlib.sha256(json.dumps(request_messages, sort_keys=True).encode()).hexdigest()[:8]
        transcript = prompt[max(0, prompt.find("### ")) :]
        gist = " ".join(" ".join(_TRANSCRIPT_LINE_RE.findall(transcript)).split()[: self.words])
        if BLOCK_BEGIN in prompt:
            text = (
                f"{BLOCK_BEGIN}\n## Task\nrequest {digest}\n## Files Modified\nNone\n"
                f"## Files Examined\nNone\n## Execution Anchors\n{gist}\n## Current State\ncontinuing\n"
                f"{BLOCK_END}"
            )
        else:
            text = f"Summary {digest}: {gist}"
        return SummaryCall(
            request_messages,
            text,
            count_messages(request_messages),
            count_text(text),
            None,
            start,
            time.time(),
            self.model,
        )
