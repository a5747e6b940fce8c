"""Summarizers: the one piece of I/O a policy performs.

The policy builds the request (a system and a user message from a template pair, see prompts.py);
a summarizer only sends it and reports what came back as a :class:`SummaryCall`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ctxpolicy.policies.prompts import BLOCK_BEGIN, BLOCK_END
from ctxpolicy.tokens import count_messages, count_text

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


@runtime_checkable
class Summarizer(Protocol):
    def summarize(self, request_messages: list[dict]) -> SummaryCall: ...


class EndpointSummarizer:
    """Sends the request to an OpenAI-compatible ``{base_url}/chat/completions`` endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        temperature: float = DEFAULT_TEMPERATURE,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout_s: float = 600.0,
        api_key: str | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.api_key = api_key

    def summarize(self, request_messages: list[dict]) -> SummaryCall:
        import httpx

        from ctxpolicy.chat_completion import MalformedCompletion, parse_completion
        from ctxpolicy.deadline_http import request

        body = {
            "model": self.model,
            "messages": request_messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        start = time.time()
        try:  # timeout_s is a hard deadline for the whole request, however the server paces its bytes
            response = request(
                "POST", f"{self.base_url}/chat/completions", json=body, headers=headers, timeout_s=self.timeout_s
            )
            response.raise_for_status()
            completion = parse_completion(response.json())
        except (httpx.HTTPError, MalformedCompletion, ValueError) as exc:
            return SummaryCall(
                request_messages,
                "",
                None,
                None,
                None,
                start,
                time.time(),
                self.model,
                error=f"{type(exc).__name__}: {exc}",
            )
        usage = completion.usage
        return SummaryCall(
            request_messages,
            completion.choices[0].message.content or "",
            usage.prompt_tokens if usage else None,
            usage.completion_tokens if usage else None,
            completion.cached_tokens,
            start,
            time.time(),
            completion.model or self.model,
        )


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
            return SummaryCall(
                request_messages,
                "",
                None,
                None,
                None,
                start,
                time.time(),
                self.model,
                error="DeterministicSummarizer: asked to fail",
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
