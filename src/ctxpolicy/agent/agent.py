"""mini-swe-agent's DefaultAgent with the compression policy inserted before every call.

The agent's own ``messages`` stay complete (they are the trajectory). What is sent is the
*working context* of a ``ctxpolicy.policies.PolicySession``: the context sent last time, as the
policy left it, plus the messages added since. Compression is therefore persistent: what a
policy removed stays removed, and the prefix the server cached last step is still the prefix
this step, unless an event changes it.
"""

from __future__ import annotations

from collections.abc import Callable

import time
from typing import Any

from minisweagent.agents.default import AgentConfig, DefaultAgent
from minisweagent.exceptions import FormatError, InterruptAgentFlow, LimitsExceeded, TimeExceeded

from ctxpolicy.agent.client import ChatResponse, ContextOverflowError, DeadlineExceeded, EndpointError
from ctxpolicy.agent.messages import api_message
from ctxpolicy.agent.model import EndpointModel
from ctxpolicy.agent.record import RunRecorder, summary_call_record
from ctxpolicy.rundir import CallRecord
from ctxpolicy.policies import HistoryDump, PolicySession, PolicySpec, SummaryCall, actions
from ctxpolicy.tokens import count_messages


class ContextOverflow(InterruptAgentFlow):
    """The server rejected the prompt as longer than its context."""


class EndpointFailed(InterruptAgentFlow):
    """The endpoint kept failing after bounded retries."""


def exit_message(status: str, reason: str) -> dict:
    return {"role": "exit", "content": reason, "extra": {"exit_status": status, "submission": "", "reason": reason}}


class PolicyAgent(DefaultAgent):
    def __init__(
        self,
        model: EndpointModel,
        env: Any,
        *,
        policy: PolicySpec,
        threshold: int | None,
        recorder: RunRecorder,
        summarizer_for: Callable[[PolicyAgent], Any] | None = None,
        dump: HistoryDump | None = None,
        **agent_config: Any,
    ):
        """``summarizer_for(agent)`` makes the agent's summarizer (a ``policies.Summarizer``) at
        construction: it may bind the agent's ``deadline`` and ``on_summary_call``."""
        super().__init__(model, env, config_class=AgentConfig, **agent_config)
        self.model: EndpointModel = model
        self.policy = policy
        self.threshold = threshold
        self.recorder = recorder
        self.summarizer = summarizer_for(self) if summarizer_for is not None else None
        self.dump = dump
        self.session = self._new_session()
        self._absorbed = 0
        self.format_errors = 0
        self.llm_s = 0.0
        self.tool_s = 0.0
        self._step = 0
        self.started_at: float | None = None  # time.time() when run() started the trajectory

    # --- limits ----------------------------------------------------------------------------

    @property
    def deadline(self) -> float | None:
        limit = self.config.wall_time_limit_seconds
        return self._start_time + limit if limit > 0 else None

    def _raise_if_out_of_budget(self) -> None:
        if 0 < self.config.step_limit <= self.n_calls:
            raise LimitsExceeded(exit_message("LimitsExceeded", f"step limit {self.config.step_limit} reached"))
        if self.deadline is not None and time.time() >= self.deadline:
            raise TimeExceeded(
                exit_message("TimeExceeded", f"wall-time limit {self.config.wall_time_limit_seconds}s reached")
            )

    # --- the loop ----------------------------------------------------------------------------

    def _new_session(self) -> PolicySession:
        mode = getattr(getattr(self.model, "config", None), "mode", "text")
        return PolicySession(
            self.policy,
            threshold=self.threshold,
            summarizer=self.summarizer,
            dump=self.dump,
            action_format=actions.of_mode(mode),  # what RunSettings.record records
        )

    @property
    def context(self) -> list[dict]:
        """The working context sent at the last call."""
        return self.session.context

    def run(self, task: str = "", **kwargs) -> dict:
        self.session, self._absorbed = self._new_session(), 0
        # one reading: the wall-time limit counts from it, and so does the run's latency
        # (run.json timing.agent_s, A.5's "from trajectory start"), so the two never drift apart
        self._start_time = self.started_at = time.time()
        return super().run(task, **kwargs)

    def step(self) -> list[dict]:
        try:
            return super().step()
        except FormatError:
            self.format_errors += 1
            raise

    def query(self) -> dict:
        self._raise_if_out_of_budget()
        step = self.n_calls + 1
        before, events = self._compress(step)
        self._raise_if_out_of_budget()  # a summary call may have used up the time
        self.n_calls = step
        response = self._call(step, before, events)
        message = self.model.parse(response)  # FormatError here is counted by step()
        self.add_messages(message)
        return message

    def _compress(self, step: int) -> tuple[int, list[dict]]:
        self.session.append(api_message(m) for m in self.messages[self._absorbed :])
        self._absorbed = len(self.messages)
        self._step = step
        turn = self.session.prepare(calls=step - 1)
        return turn.tokens_before, turn.events

    def _call(self, step: int, est_before: int, events: list[dict]) -> ChatResponse:
        message_ids = self.recorder.store(self.context)
        call = {
            "kind": "agent",
            "step": step,
            "est_tokens_before": est_before,
            "est_tokens_after": count_messages(self.context),
            "message_ids": message_ids,
            "events": events,
        }
        start, t0 = time.time(), time.perf_counter()
        try:
            response = self.model.complete(self.context, deadline=self.deadline)
        except EndpointError as exc:
            latency = time.perf_counter() - t0
            self.llm_s += latency
            self.recorder.record_call(failed_call(call, exc, start, time.time(), latency))
            raise _interrupt_for(exc) from exc
        self.llm_s += response.latency_s
        self.recorder.record_call(ok_call(call, response))
        return response

    def execute_actions(self, message: dict) -> list[dict]:
        t0 = time.perf_counter()
        try:
            return super().execute_actions(message)
        finally:
            self.tool_s += time.perf_counter() - t0

    # --- summary telemetry -----------------------------------------------------------------

    def on_summary_call(self, call: SummaryCall, latency_s: float, attempts: int | None) -> None:
        """Listener for ``policies.EndpointSummarizer``: one ``summary`` line, in the step that made it."""
        self.llm_s += latency_s
        self.recorder.record_call(
            summary_call_record(
                call,
                step=self._step,
                latency_s=latency_s,
                message_ids=self.recorder.store(call.request_messages),
                attempts=attempts,
            )
        )


def ok_call(call: dict, response: ChatResponse) -> CallRecord:
    return CallRecord.answered(
        step=call["step"],
        start=response.start,
        end=response.end,
        latency_s=response.latency_s,
        prompt_tokens=response.prompt_tokens,
        completion_tokens=response.completion_tokens,
        cached_tokens=response.cached_tokens,
        est_tokens_before=call["est_tokens_before"],
        est_tokens_after=call["est_tokens_after"],
        message_ids=call["message_ids"],
        events=call["events"],
        attempts=response.attempts,
        finish_reason=response.finish_reason,
        model=response.model,
    )


def failed_call(call: dict, exc: EndpointError, start: float, end: float, latency_s: float) -> CallRecord:
    return CallRecord.failed(
        kind=call["kind"],
        step=call["step"],
        start=start,
        end=end,
        latency_s=latency_s,
        error=f"{type(exc).__name__}: {exc}",
        est_tokens_before=call["est_tokens_before"],
        est_tokens_after=call["est_tokens_after"],
        message_ids=call["message_ids"],
        events=call["events"],
        attempts=exc.attempts,
    )


def _interrupt_for(exc: EndpointError) -> InterruptAgentFlow:
    reason = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, ContextOverflowError):
        return ContextOverflow(exit_message("ContextOverflow", reason))
    if isinstance(exc, DeadlineExceeded):
        return TimeExceeded(exit_message("TimeExceeded", reason))
    return EndpointFailed(exit_message("EndpointError", reason))
