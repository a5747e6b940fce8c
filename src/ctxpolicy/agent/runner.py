"""One run, start to finish: workspace, agent loop, submission, and the run record.

``execute_run`` never raises for a run's own failure: whatever goes wrong ends the run with an
outcome (``error`` with the reason when nothing more specific applies) and a complete record,
so that a cell goes on. Only ``run.json`` written last marks the run complete.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxpolicy.agent.client import ChatClient
from ctxpolicy.agent.record import RunRecorder
from ctxpolicy.agent.settings import AGENT_DIR, RunSettings, load_templates
from ctxpolicy.agent.versions import hardware, software_versions
from ctxpolicy.atomic import atomic_write_text
from ctxpolicy.rundir import CALLS_SCHEMA_VERSION as SCHEMA_VERSION  # run.json's version follows calls.jsonl's
from ctxpolicy.schemas import schema
from ctxpolicy.rundir import (
    PATCH_DIFF,
    TRAJECTORY_JSON,
    WORKSPACE,
    mark_run_dir,
    reset_run_dir,
    write_record,
    write_run_json,
)

if TYPE_CHECKING:
    from ctxpolicy.policies.spec import PolicySpec

# The run outcomes: their one list is run.json's schema (ctxpolicy.schemas, "outcome").
OUTCOMES: tuple[str, ...] = tuple(schema("run")["properties"]["outcome"]["enum"])

# mini-swe-agent exit statuses (and ours, from ctxpolicy.agent.agent) -> run outcomes
_OUTCOME_OF_EXIT = {
    "Submitted": "submitted",
    "LimitsExceeded": "step_limit",
    "TimeExceeded": "time_limit",
    "RepeatedFormatError": "format_error_limit",
    "ContextOverflow": "context_overflow",
    "EndpointError": "error",
}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoint:
    """Where the model answers, and what answers there (recorded in run.json ``versions``)."""

    base_url: str
    served_name: str
    server: dict = field(default_factory=dict)  # kind, version, url
    model: dict = field(default_factory=dict)  # name, file, sha256, hub_id, revision
    api_key: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class RunIdentity:
    benchmark: str
    cohort: str
    task_id: str
    stratum: str
    model: str
    policy: str
    primitive: str
    trigger: str | None
    threshold_setting: str | None
    threshold_tokens: int | None
    depth: float | None
    summarizer: str | None
    attempt: int
    seed: int
    cell: str
    track: str


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    outcome: str
    error: str | None
    skipped: bool = False


@dataclass(frozen=True)
class RunInputs:
    """What one run is given: who it is and its policy, parsed (the cell's spec: the identity
    records its text), the task and its benchmark adapter, the settings, the endpoints (the
    summarizer's None: the agent's own), its directory and the agent's templates."""

    identity: RunIdentity
    policy: PolicySpec
    task: Any
    adapter: Any
    settings: RunSettings
    endpoint: Endpoint
    run_dir: Path
    summarizer_endpoint: Endpoint | None = None
    agent_dir: Path = AGENT_DIR

    def __post_init__(self) -> None:
        if str(self.policy) != self.identity.policy:
            raise ValueError(f"run policy {str(self.policy)!r} is not its identity's {self.identity.policy!r}")

    @property
    def summary_endpoint(self) -> Endpoint:
        """The endpoint that writes the summaries."""
        return self.summarizer_endpoint or self.endpoint


def outcome_of(exit_status: str) -> str:
    return _OUTCOME_OF_EXIT.get(exit_status, "error")


def run_seed(base_seed: int, attempt: int) -> int:
    """Attempts of one task differ in seed: attempt 1 uses the config's seed, attempt k adds k-1."""
    return base_seed + attempt - 1


def execute_run(
    *,
    identity: RunIdentity,
    policy: PolicySpec,
    task: Any,
    adapter: Any,
    settings: RunSettings,
    endpoint: Endpoint,
    run_dir: Path,
    summarizer_endpoint: Endpoint | None = None,
    agent_dir: Path = AGENT_DIR,
    cancel: threading.Event | None = None,
) -> RunResult:
    """Run the agent on the task with ``policy`` (the cell's parsed spec, whose text ``identity``
    records) and write run.json; ``cancel`` set by the end (the cell was
    interrupted, its commands killed) means the run is not recorded and RunCancelled is raised."""
    run = RunInputs(identity, policy, task, adapter, settings, endpoint, Path(run_dir), summarizer_endpoint, agent_dir)
    run_dir = run.run_dir
    mark_run_dir(run_dir)  # first: a run killed at any point leaves a folder that is ours to redo
    reset_run_dir(run_dir)
    start = time.time()
    state = _RunState()
    try:
        _run_agent(state, run)
    except Exception as exc:  # a run never crashes its cell
        state.outcome = "error"
        state.error = f"{type(exc).__name__}: {exc}"
        state.traceback = traceback.format_exc()
        log.warning("run %s failed: %s", run_dir, state.error)
    end = time.time()
    if cancel is not None and cancel.is_set():
        raise RunCancelled(f"{run_dir}: interrupted; no run.json written")
    record = _complete_record(run, state, start, end)
    write_run_json(run_dir, record)
    return RunResult(run_dir, state.outcome, state.error)


def _complete_record(run: RunInputs, state: _RunState, start: float, end: float) -> dict:
    """The run record; if what the run left cannot be summed up, an ``error`` record without it."""
    try:
        return run_record(run, state, start, end)
    except Exception as exc:  # a run never ends without its record
        state.outcome = "error"
        state.error = f"cannot build the run record: {type(exc).__name__}: {exc}"
        state.traceback = traceback.format_exc()
        state.agent = state.recorder = None
        log.warning("run %s: %s", run.identity.task_id, state.error)
        return run_record(run, state, start, end)


class RunCancelled(RuntimeError):
    """The cell was interrupted while this run was in flight."""


@dataclass
class _RunState:
    outcome: str = "error"
    error: str | None = None
    traceback: str | None = None
    submission: str = ""
    agent: Any = None
    recorder: RunRecorder | None = None
    setup_s: float = 0.0
    agent_s: float = 0.0


def _run_agent(state: _RunState, run: RunInputs) -> None:
    from ctxpolicy.tokens import count_message

    task, adapter, settings, endpoint, run_dir = run.task, run.adapter, run.settings, run.endpoint, run.run_dir
    templates = load_templates(settings.mode, run.agent_dir)
    t0 = time.perf_counter()
    workspace = run_dir / WORKSPACE
    workspace.mkdir(parents=True, exist_ok=True)
    adapter.prepare_workspace(task, workspace)

    with contextlib.ExitStack() as cleanup:
        # last of all, the workspace leaves its quota storage (benchmarks.local: a plain folder again)
        cleanup.callback(adapter.release_workspace, task, workspace)
        env = adapter.make_environment(task, workspace, settings.command_timeout_s)
        state.setup_s = time.perf_counter() - t0
        cleanup.callback(_close_environment, env)
        agent_client = cleanup.enter_context(_client(endpoint, settings))
        summary_client = agent_client
        if run.summary_endpoint.base_url != endpoint.base_url:
            summary_client = cleanup.enter_context(_client(run.summary_endpoint, settings))
        state.recorder = cleanup.enter_context(RunRecorder(run_dir, count_message))
        agent = state.agent = build_agent(
            run, AgentParts(templates, env, workspace, state.recorder, agent_client, summary_client)
        )
        t1 = time.perf_counter()
        try:
            exit_extra = agent.run(task.instruction, submission_instructions=adapter.submission_instructions(task))
        finally:
            # from the instant the agent's wall-time limit starts (PolicyAgent.started_at)
            started = agent.started_at
            state.agent_s = time.time() - started if started is not None else time.perf_counter() - t1
            write_record(run_dir / TRAJECTORY_JSON, agent.serialize(_trajectory_extra(run.identity)))
        state.outcome = outcome_of(exit_extra.get("exit_status", ""))
        if state.outcome == "error":
            state.error = exit_extra.get("reason") or exit_extra.get("exit_status") or "unknown exit"
        elif state.outcome == "submitted":
            state.submission = adapter.collect_submission(task, workspace, exit_extra.get("submission", ""))
            if task.kind == "repo":
                atomic_write_text(run_dir / PATCH_DIFF, state.submission)


@dataclass(frozen=True)
class AgentParts:
    """What a run has set up for its agent: the prompt templates, the environment and its
    workspace, the recorder, and the chat clients of the model and of the summarizer."""

    templates: Any
    env: Any
    workspace: Path
    recorder: RunRecorder
    agent_client: ChatClient
    summary_client: ChatClient


def build_agent(run: RunInputs, parts: AgentParts):
    """The policy agent for one run, its model and its summarizer (given at construction), all on
    our chat client."""
    # Imported here: mini-swe-agent takes a second to import.
    from ctxpolicy.agent.agent import PolicyAgent
    from ctxpolicy.agent.model import EndpointModel
    from ctxpolicy.policies import EndpointSummarizer, HistoryDump

    identity, settings, endpoint, templates = run.identity, run.settings, run.endpoint, parts.templates
    model = EndpointModel(
        parts.agent_client,
        model_name=endpoint.served_name,
        base_url=endpoint.base_url,
        mode=settings.mode,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        stop_after_action=settings.stop_after_action,
        seed=identity.seed,
        format_error_template=templates.format_error_template,
        observation_template=templates.observation_template,
    )

    def summarizer_for(agent: PolicyAgent) -> EndpointSummarizer:
        return EndpointSummarizer(
            run.summary_endpoint.base_url,
            run.summary_endpoint.served_name,
            transport=parts.summary_client,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            seed=identity.seed,
            deadline=lambda: agent.deadline,
            listener=agent.on_summary_call,
        )

    return PolicyAgent(
        model,
        parts.env,
        policy=run.policy,
        threshold=identity.threshold_tokens,
        recorder=parts.recorder,
        summarizer_for=summarizer_for,
        dump=HistoryDump(parts.workspace),
        system_template=templates.system_template,
        instance_template=templates.instance_template,
        step_limit=settings.step_limit,
        cost_limit=0,
        wall_time_limit_seconds=settings.wall_time_limit_s or 0,
        max_consecutive_format_errors=settings.format_error_limit,
    )


def _client(endpoint: Endpoint, settings: RunSettings) -> ChatClient:
    return ChatClient(
        endpoint.base_url,
        request_timeout_s=settings.request_timeout_s,
        connect_timeout_s=settings.connect_timeout_s,
        retry=settings.retry,
        api_key=endpoint.api_key,
    )


def _close_environment(env: Any) -> None:
    for name in ("cleanup", "close"):
        method = getattr(env, name, None)
        if callable(method):
            try:
                method()
            except Exception as exc:  # cleanup failure must not hide the run's outcome
                log.warning("environment %s() failed: %s", name, exc)
            return


def _trajectory_extra(identity: RunIdentity) -> dict:
    return {"info": {"ctxpolicy": {"identity": asdict(identity)}}}


def totals_of(calls: list[dict], steps: int, format_errors: int | None) -> dict:
    agent_calls = [c for c in calls if c["kind"] == "agent"]
    reported = [c["cached_tokens"] for c in calls if c.get("cached_tokens") is not None]
    prompt = [c["prompt_tokens"] for c in agent_calls if c.get("prompt_tokens") is not None]
    return {
        "steps": steps,
        "agent_calls": len(agent_calls),
        "summary_calls": len(calls) - len(agent_calls),
        "prompt_tokens": sum(c.get("prompt_tokens") or 0 for c in calls),
        "completion_tokens": sum(c.get("completion_tokens") or 0 for c in calls),
        "cached_tokens": sum(reported) if reported else None,
        "compression_events": sum(len(c.get("events") or ()) for c in agent_calls),
        "format_errors": format_errors,
        "peak_prompt_tokens": max(prompt, default=0),
        "failed_calls": sum(1 for c in calls if c.get("status") != "ok"),
    }


def run_record(run: RunInputs, state: _RunState, start: float, end: float) -> dict:
    """run.json's content for ``run`` as ``state`` leaves it (docs/schema.md, "run record")."""
    identity, endpoint, summarizer_endpoint = run.identity, run.endpoint, run.summarizer_endpoint
    agent = state.agent
    calls = state.recorder.calls if state.recorder else []
    llm_s = agent.llm_s if agent else 0.0
    tool_s = agent.tool_s if agent else 0.0
    return {
        "schema_version": SCHEMA_VERSION,
        "complete": True,
        "identity": asdict(identity),
        "outcome": state.outcome,
        "error": state.error,
        "submission": state.submission,
        "timing": {
            "start": start,
            "end": end,
            "wall_s": end - start,
            "setup_s": state.setup_s,
            "agent_s": state.agent_s,
            "llm_s": llm_s,
            "tool_s": tool_s,
        },
        "totals": totals_of(calls, agent.n_calls if agent else 0, agent.format_errors if agent else 0),
        "settings": run.settings.record(),
        "versions": {
            **software_versions(),
            "model": endpoint.model,
            "server": endpoint.server,
            "summarizer": None
            if summarizer_endpoint is None
            else {"model": summarizer_endpoint.model, "server": summarizer_endpoint.server},
        },
        "hardware": hardware(),
        "trajectory_file": TRAJECTORY_JSON,
        "traceback": state.traceback,
    }
