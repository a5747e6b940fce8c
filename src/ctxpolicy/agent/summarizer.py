"""The summarizer a policy calls, through our chat client, reporting each call for telemetry."""

from __future__ import annotations

import time
from collections.abc import Callable

from ctxpolicy.agent.client import ChatClient, EndpointError
from ctxpolicy.policies import SummaryCall

# (the SummaryCall, latency in seconds, HTTP attempts) -> None
SummaryListener = Callable[[SummaryCall, float, int | None], None]


class RecordingSummarizer:
    """``ctxpolicy.policies.Summarizer`` over a ``ChatClient``; never raises, reports errors in the call."""

    def __init__(
        self,
        client: ChatClient,
        *,
        model: str,
        temperature: float,
        max_tokens: int,
        seed: int | None = None,
        deadline: Callable[[], float | None] = lambda: None,
        listener: SummaryListener | None = None,
    ):
        self.client = client
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

        start = time.time()
        t0 = time.perf_counter()
        try:
            response = self.client.complete(body, deadline=self._deadline())
        except EndpointError as exc:
            call = SummaryCall(
                request_messages=request_messages,
                text="",
                prompt_tokens=None,
                completion_tokens=None,
                cached_tokens=None,
                start=start,
                end=time.time(),
                model=self.model,
                error=f"{type(exc).__name__}: {exc}",
            )
            self._report(call, time.perf_counter() - t0, exc.attempts)
            return call
        call = SummaryCall(
            request_messages=request_messages,
            text=response.content or "",
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            cached_tokens=response.cached_tokens,
            start=response.start,
            end=response.end,
            model=response.model or self.model,
            error=None,
        )
        self._report(call, response.latency_s, response.attempts)
        return call

    def _report(self, call: SummaryCall, latency_s: float, attempts: int) -> None:
        if self._listener is not None:
            self._listener(call, latency_s, attempts)
