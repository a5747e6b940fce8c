"""A chat-completions client for any OpenAI-compatible endpoint, with bounded retries.

We call the endpoint with httpx rather than litellm because a run must record exactly what
the server said: the raw ``usage``, type-checked (``ctxpolicy.chat_completion``), the server's own
context-overflow rejection (which litellm maps to a provider-specific exception only for the
message texts it knows), and one bounded retry loop (litellm and mini-swe-agent each add their
own, which multiplies the attempts). The request body is the OpenAI chat schema and nothing else,
so vLLM, llama.cpp and hosted APIs all take it. Every HTTP attempt ends by a hard wall-clock
deadline (``ctxpolicy.deadline_http``): the sooner of ``request_timeout_s`` and the run's deadline.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy import deadline_http
from ctxpolicy.agent.settings import RetryPolicy
from ctxpolicy.chat_completion import ChatResponse, MalformedCompletion, chat_response, parse_token_report

# Texts by which vLLM, llama.cpp, OpenAI and TGI reject a prompt that does not fit the context.
_OVERFLOW_PATTERN = re.compile(
    r"context[ _]length|maximum context|exceed_context_size|exceeds the available context"
    r"|context window|prompt is too long|too many tokens|input is too long",
    re.IGNORECASE,
)


class EndpointError(CtxpolicyError, RuntimeError):
    """The endpoint failed for good (after retries, or with a non-retryable answer)."""

    attempts: int | None = None  # HTTP attempts made, set when the error leaves ChatClient.complete


class TransientEndpointError(EndpointError):
    """A failure worth retrying: refused connection, timeout, 5xx, 429."""


class ContextOverflowError(EndpointError):
    """The server rejected the prompt as longer than its context."""


class DeadlineExceeded(EndpointError):
    """The run's wall-time limit passed while waiting for the endpoint."""


class MalformedResponseError(EndpointError):
    """The server answered 200 with something that is not a usable chat completion (not retried)."""


def cached_tokens_of(payload: dict) -> int | None:
    """Server-reported cached prompt tokens, or None where the server does not report them."""
    return parse_token_report(payload).cached_tokens


def is_context_overflow(status_code: int, body: str) -> bool:
    return status_code == 413 or (400 <= status_code < 500 and bool(_OVERFLOW_PATTERN.search(body)))


def parse_chat_payload(payload: Any, *, start: float, end: float, latency_s: float, attempts: int) -> ChatResponse:
    """The response of a validated answer; raises MalformedResponseError naming the bad field."""
    try:
        return chat_response(payload, start=start, end=end, latency_s=latency_s, attempts=attempts)
    except MalformedCompletion as exc:
        raise MalformedResponseError(str(exc)) from None


class ChatClient:
    """POSTs chat completions to ``{base_url}/chat/completions``; thread-safe, one per run.

    ``request_timeout_s`` bounds one HTTP attempt from its start to the answer's last byte (a
    deadline, not httpx's per-read timeout); the ``deadline`` given to ``complete`` bounds them all.
    A ``policies.SummaryTransport`` too: the harness's summarizer sends through it.
    """

    errors: tuple[type[Exception], ...] = (EndpointError,)  # what ``complete`` raises for a failed call

    def __init__(
        self,
        base_url: str,
        *,
        request_timeout_s: float = 600.0,
        connect_timeout_s: float = 10.0,
        retry: RetryPolicy | None = None,
        api_key: str | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.request_timeout_s = request_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retry = retry if retry is not None else RetryPolicy()
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def close(self) -> None:
        """Nothing to release: each request opens and closes its own connection."""

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def complete(self, body: dict, *, deadline: float | None = None) -> ChatResponse:
        """One logical call: retried on transient failures, bounded by attempts and ``deadline``
        (seconds since the epoch, like ``time.time()``).

        Raises ContextOverflowError, DeadlineExceeded, MalformedResponseError or EndpointError
        (with the last reason); ``attempts`` is set on the error.
        """
        start = time.time()
        t0 = time.perf_counter()
        attempts = 0

        def stop(state: RetryCallState) -> bool:
            return stop_after_attempt(self.retry.max_attempts)(state) or _past(deadline)

        retrying = Retrying(
            stop=stop,
            wait=wait_exponential(multiplier=self.retry.backoff_initial_s, max=self.retry.backoff_max_s),
            retry=retry_if_exception_type(TransientEndpointError),
            sleep=lambda seconds: time.sleep(_until(deadline, seconds)),
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    attempts += 1
                    payload = self._post_once(body, deadline)
                    response = parse_chat_payload(
                        payload, start=start, end=time.time(), latency_s=time.perf_counter() - t0, attempts=attempts
                    )
        except TransientEndpointError as exc:
            if _past(deadline):
                final: EndpointError = DeadlineExceeded(f"wall-time limit reached waiting for the endpoint: {exc}")
            else:
                final = EndpointError(f"{exc} (gave up after {attempts} attempts)")
            final.attempts = attempts
            raise final from exc
        except EndpointError as exc:
            exc.attempts = attempts
            raise
        return response

    def _post_once(self, body: dict, deadline: float | None) -> Any:
        timeout_s = self.request_timeout_s
        if deadline is not None:
            timeout_s = min(timeout_s, deadline - time.time())
            if timeout_s <= 0:
                raise DeadlineExceeded("wall-time limit reached before the request was sent")
        url = f"{self.base_url}/chat/completions"
        try:
            response = deadline_http.request(
                "POST",
                url,
                json=body,
                headers=self._headers,
                timeout_s=timeout_s,
                connect_timeout_s=self.connect_timeout_s,
            )
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:  # no retry mends the URL
            raise EndpointError(f"not a usable endpoint URL: {url}: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise TransientEndpointError(f"timeout after {timeout_s:.1f}s: {type(exc).__name__} at {url}") from exc
        except httpx.TransportError as exc:
            raise TransientEndpointError(f"connection failed: {type(exc).__name__}: {exc} at {url}") from exc
        if response.status_code >= 500 or response.status_code == 429:
            raise TransientEndpointError(f"HTTP {response.status_code} from {url}: {response.text[:300]}")
        if response.status_code >= 400:
            if is_context_overflow(response.status_code, response.text):
                raise ContextOverflowError(f"HTTP {response.status_code}: {response.text[:300]}")
            raise EndpointError(f"HTTP {response.status_code} from {url}: {response.text[:300]}")
        try:
            return response.json()
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested beyond Python's stack
            raise TransientEndpointError(f"non-JSON answer from {url}: {response.text[:200]!r}") from exc


def _until(deadline: float | None, seconds: float) -> float:
    return seconds if deadline is None else max(0.0, min(seconds, deadline - time.time()))


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.time() >= deadline
