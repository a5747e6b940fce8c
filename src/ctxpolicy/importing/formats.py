"""Public trajectory formats read into one neutral shape: the agent's calls, what each sent, what
each got back. Pure functions of the file's parsed JSON; no file is written here.

* mini-swe-agent 1.x (``trajectory_format: mini-swe-agent-1``) and 2.x (``mini-swe-agent-1.1``)
  ``.traj.json``, text mode and tool calling: every assistant message is a call; the prompt is
  every message before it (mini-swe-agent sends its whole history); usage, cost and the time the
  answer came are under the message's ``extra`` (``extra.response.usage``, ``extra.cost`` or
  OpenRouter's ``extra.response.usage.cost``,
  ``extra.timestamp``; 1.x: the message's ``timestamp``). 2.x's trailing ``exit`` message is no
  call: its exit status is kept, the message left out. A bare list of messages (the oldest files)
  is read as 1.x.
* SWE-agent ``.traj`` (text and function calling): the calls are the non-demonstration assistant
  items of ``history``; the prompt of call k is ``trajectory[k].query`` (what the step sent, after
  SWE-agent's history processors) where every step has one and each extends the one before, else
  the history up to the call. ``is_demo`` items are demonstrations: the protected prefix runs
  through the first user message that is not one. ``tool_call_ids`` lists become ``tool_call_id``.
* OpenAI chat logs: a JSON object ``{"messages": [...]}``, a list of such objects, or JSON lines of
  them; every assistant message is a call, ``usage`` on the message (or the conversation's list of
  ``usage``, one per assistant message) where present.

A file that does not fit is a ``FormatProblem`` naming the field and the value.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.agent.messages import api_message
from ctxpolicy.policies import actions
from ctxpolicy.policies.history import protected_prefix_length
from ctxpolicy.policies.messages import message_problem, surrogate_problem

AUTO = "auto"
SOURCE_FORMATS = {  # what run.json's imported.format says
    "mini-swe-agent-1": "mini-swe-agent 1.x",
    "mini-swe-agent-1.1": "mini-swe-agent 2.x",
    "swe-agent": "SWE-agent",
    "openai": "OpenAI chat log",
}
TASK_SUFFIXES = (".traj.json", ".traj", ".jsonl", ".json")
UNSAFE = re.compile(r"[^A-Za-z0-9._+=@-]+")


class FormatProblem(CtxpolicyError, ValueError):
    """A trajectory that cannot be read: ``field`` and ``value`` say where and what."""

    def __init__(self, field_name: str, value: Any, reason: str = "", *, text: str | None = None) -> None:
        if text is None:  # ASCII only: a parsed value may hold escapes or unpaired surrogates
            shown = json.dumps(value, ensure_ascii=True, default=str)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            text = f"field {field_name} is {shown}" + (f": {reason}" if reason else "")
        super().__init__(text)
        self.field, self.value = field_name, value

    @classmethod
    def at(cls, field_name: str, reason: str) -> FormatProblem:
        """A problem whose reason shows the value itself (``policies.messages``' lines)."""
        return cls(field_name, None, text=f"field {field_name}: {reason}")


@dataclass
class Call:
    """One agent call: the prompt it sent, the answer, and what the source says about it."""

    prompt: list[dict]
    reply: dict
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost: float | None = None
    cost_source: str | None = None  # "provider" (the answer's usage carries the bill) or "agent"
    end: float | None = None
    model: str | None = None
    finish_reason: str | None = None

    @property
    def has_usage(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


@dataclass
class Trajectory:
    """One imported conversation, in the neutral shape the writer records."""

    task_id: str
    source_format: str
    """A key of ``SOURCE_FORMATS``."""
    history: list[dict]
    """The whole conversation as sent (API keys only), the exit message left out."""
    calls: list[Call]
    prefix_length: int
    """The protected prefix: through the real task (demonstrations before it included)."""
    action_format: str | None
    """Detected (``policies.actions.detect``); None when no action is recognised."""
    exit_status: str | None = None
    submission: str = ""
    prompts_from: str = "history"
    """``query`` (SWE-agent's own record of each step's prompt) or ``history``."""
    model_name: str | None = None
    totals: dict = field(default_factory=dict)
    """What the source says about the whole run (cost, tokens sent and received, api calls)."""
    notes: list[str] = field(default_factory=list)
    """Things the user should know about this import (one line each)."""


# ---------------------------------------------------------------- detection


def detect_format(name: str, data: Any) -> str:
    """The format of a parsed file (``name`` is the file's name, for its suffix): the first
    format of ``TABLE`` whose ``detect`` claims it."""
    for row in TABLE.values():
        if row.detect(name, data):
            return row.name
    raise FormatProblem("(top level)", type(data).__name__, "no trajectory format recognised")


def _is_mini_swe_agent(name: str, data: Any) -> bool:
    if isinstance(data, Mapping):
        if str(data.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return True
        if _is_swe_agent(name, data):
            return False
        return "messages" in data and name.endswith(".traj.json")
    return isinstance(data, list) and name.endswith(".traj.json")


def _is_swe_agent(name: str, data: Any) -> bool:
    return isinstance(data, Mapping) and isinstance(data.get("history"), list)


def _is_openai(name: str, data: Any) -> bool:
    return isinstance(data, list) or (isinstance(data, Mapping) and "messages" in data)


def task_id_of(name: str) -> str:
    """The task id a file name gives (``django__django-11099.traj.json`` -> ``django__django-11099``)."""
    for suffix in TASK_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return safe_task_id(name)


def own_task_id(data: Mapping, name: str) -> str:
    """The trajectory's own ``instance_id`` (mini-swe-agent's SWE-bench runner writes it; a
    SWE-agent file may carry one), else the one its file name gives: a renamed file keeps its task."""
    own = data.get("instance_id")
    if own is None:
        return task_id_of(name)
    if not isinstance(own, str) or not own.strip():
        raise FormatProblem("instance_id", own, "expected the task id (a non-empty string)")
    return safe_task_id(own)


def safe_task_id(task_id: str) -> str:
    return UNSAFE.sub("_", task_id).strip("_") or "task"


# ---------------------------------------------------------------- shared pieces


def _message(item: Any, where: str) -> dict:
    """One message as sent (API keys only), checked as every policy needs it (``policies.messages``:
    roles, content parts, tool calls, text without unpaired surrogates)."""
    problem = message_problem(item, where)
    if problem is None:
        item = api_message(dict(item))
        problem = surrogate_problem(item, where)
    if problem is not None:
        raise FormatProblem.at(*problem)
    return item


def _int_or_none(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or int(value) != value:
        raise FormatProblem(where, value, "expected a non-negative integer")
    return int(value)


def _usage(usage: Any, where: str) -> tuple[int | None, int | None, int | None]:
    """(prompt, completion, cached) tokens of an OpenAI-style ``usage`` (all None when absent)."""
    if usage is None:
        return None, None, None
    if not isinstance(usage, Mapping):
        raise FormatProblem(where, usage, "expected an object")
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    if cached is None:
        cached = usage.get("cache_read_input_tokens")  # Anthropic's name, as litellm passes it on
    return (
        _int_or_none(usage.get("prompt_tokens"), f"{where}.prompt_tokens"),
        _int_or_none(usage.get("completion_tokens"), f"{where}.completion_tokens"),
        _int_or_none(cached, f"{where}.prompt_tokens_details.cached_tokens"),
    )


def _number_or_none(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _calls_over(history: list[dict], replies: list[int], extras: list[Mapping]) -> list[Call]:
    """Calls whose prompt is the history before each reply (an agent that sends its whole history)."""
    calls = []
    for position, extra in zip(replies, extras):
        calls.append(Call(prompt=history[:position], reply=history[position], **_call_facts(extra, position)))
    return calls


def _call_facts(extra: Mapping, position: int) -> dict:
    where = f"messages[{position}].extra"
    response = extra.get("response") if isinstance(extra, Mapping) else None
    facts: dict[str, Any] = {}
    if isinstance(response, Mapping):
        prompt, completion, cached = _usage(response.get("usage"), f"{where}.response.usage")
        facts.update(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)
        facts["model"] = response.get("model") if isinstance(response.get("model"), str) else None
        choices = response.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            reason = choices[0].get("finish_reason")
            facts["finish_reason"] = reason if isinstance(reason, str) else None
    facts["cost"], facts["cost_source"] = _price(extra, response)
    facts["end"] = _number_or_none(extra.get("timestamp")) if isinstance(extra, Mapping) else None
    return facts


def _price(extra: Mapping, response: Mapping | None) -> tuple[float | None, str | None]:
    """The call's price and who set it: ``provider`` where the answer's own usage carries the bill
    (OpenRouter's ``usage.cost``), else ``agent`` where the harness priced the call itself
    (mini-swe-agent's ``extra.cost``, from its litellm's price map of the day). An impossible price
    (negative, not finite) is no price at all."""
    usage = response.get("usage") if isinstance(response, Mapping) else None
    for value, source in (
        (usage.get("cost") if isinstance(usage, Mapping) else None, "provider"),
        (extra.get("cost") if isinstance(extra, Mapping) else None, "agent"),
    ):
        cost = _number_or_none(value)
        if cost is not None and math.isfinite(cost) and cost >= 0:
            return cost, source
    return None, None


def _finish(trajectory: Trajectory) -> Trajectory:
    if not trajectory.calls:
        raise FormatProblem("messages", len(trajectory.history), "no assistant message: nothing was called")
    trajectory.action_format = actions.detect(trajectory.history)
    if trajectory.action_format is None:
        trajectory.notes.append("no action recognised in any assistant message (no fenced command, no tool call)")
    return trajectory


# ---------------------------------------------------------------- mini-swe-agent


def read_mini_swe_agent(name: str, data: Any) -> Trajectory:
    if isinstance(data, list):
        data = {"messages": data, "trajectory_format": "mini-swe-agent-1"}
    if not isinstance(data, Mapping):
        raise FormatProblem("(top level)", type(data).__name__, "expected an object with messages")
    version = str(data.get("trajectory_format") or "mini-swe-agent-1")
    if version not in ("mini-swe-agent-1", "mini-swe-agent-1.1"):
        raise FormatProblem("trajectory_format", version, "known: mini-swe-agent-1, mini-swe-agent-1.1")
    raw = data.get("messages")
    if not isinstance(raw, list):
        raise FormatProblem("messages", raw, "expected a list")
    info = data.get("info") if isinstance(data.get("info"), Mapping) else {}
    exit_status, submission = info.get("exit_status"), info.get("submission")
    history: list[dict] = []
    replies: list[int] = []
    extras: list[Mapping] = []
    for index, item in enumerate(raw):
        if isinstance(item, Mapping) and item.get("role") == "exit":
            if index != len(raw) - 1:
                raise FormatProblem(f"messages[{index}].role", "exit", "an exit message before the end")
            extra = item.get("extra") if isinstance(item.get("extra"), Mapping) else {}
            exit_status = extra.get("exit_status", exit_status)
            submission = extra.get("submission", submission)
            continue
        message = _message(item, f"messages[{index}]")
        if message["role"] == "assistant":
            replies.append(len(history))
            extra = item.get("extra") if isinstance(item.get("extra"), Mapping) else {}
            if "timestamp" not in extra and _number_or_none(item.get("timestamp")) is not None:
                extra = {**extra, "timestamp": item["timestamp"]}  # 1.x keeps it on the message
            extras.append(extra)
        history.append(message)
    model_stats = info.get("model_stats") if isinstance(info.get("model_stats"), Mapping) else {}
    agent_config = info.get("config") if isinstance(info.get("config"), Mapping) else {}  # the source agent's
    model_config = agent_config.get("model") if isinstance(agent_config.get("model"), Mapping) else {}
    trajectory = Trajectory(
        task_id=own_task_id(data, name),
        source_format=version,
        history=history,
        calls=_calls_over(history, replies, extras),
        prefix_length=protected_prefix_length(history),
        action_format=None,
        exit_status=None if exit_status is None else str(exit_status),
        submission=submission if isinstance(submission, str) else "",
        model_name=model_config.get("model_name") if isinstance(model_config.get("model_name"), str) else None,
        totals={k: model_stats[k] for k in ("instance_cost", "api_calls") if k in model_stats},
    )
    return _finish(trajectory)


# ---------------------------------------------------------------- SWE-agent


def _swe_message(item: Any, where: str) -> list[dict]:
    """A SWE-agent history item as sent: ``tool_call_ids`` becomes ``tool_call_id`` (one message
    per id; SWE-agent answers each call of a step with the same observation)."""
    message = _message(item, where)
    ids = item.get("tool_call_ids") if isinstance(item, Mapping) else None
    if message["role"] == "tool" and "tool_call_id" not in message:
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise FormatProblem(f"{where}.tool_call_ids", ids, "a tool message needs the ids of its calls")
        return [{**message, "tool_call_id": i} for i in ids]
    return [message]


def _swe_sequence(items: Sequence, where: str) -> tuple[list[dict], list[int], list[bool]]:
    """Messages, the position of each non-demonstration assistant message, and demo flags."""
    messages: list[dict] = []
    replies: list[int] = []
    demo: list[bool] = []
    for index, item in enumerate(items):
        converted = _swe_message(item, f"{where}[{index}]")
        is_demo = bool(item.get("is_demo")) if isinstance(item, Mapping) else False
        if converted[0]["role"] == "assistant" and not is_demo:
            replies.append(len(messages))
        messages += converted
        demo += [is_demo] * len(converted)
    return messages, replies, demo


def _prefix_through_task(messages: list[dict], demo: list[bool]) -> int:
    """Through the first user message that is no demonstration (all of it if there is none)."""
    for index, (message, is_demo) in enumerate(zip(messages, demo)):
        if message["role"] == "user" and not is_demo:
            return index + 1
    return len(messages)


def read_swe_agent(name: str, data: Any) -> Trajectory:
    if not isinstance(data, Mapping) or not isinstance(data.get("history"), list):
        raise FormatProblem("history", data.get("history") if isinstance(data, Mapping) else data, "expected a list")
    history, replies, demo = _swe_sequence(data["history"], "history")
    steps = data.get("trajectory") if isinstance(data.get("trajectory"), list) else []
    info = data.get("info") if isinstance(data.get("info"), Mapping) else {}
    trajectory = Trajectory(
        task_id=own_task_id(data, name),
        source_format="swe-agent",
        history=history,
        calls=[Call(prompt=history[:p], reply=history[p]) for p in replies],
        prefix_length=_prefix_through_task(history, demo),
        action_format=None,
        exit_status=None if info.get("exit_status") is None else str(info.get("exit_status")),
        submission=info.get("submission") if isinstance(info.get("submission"), str) else "",
    )
    queries = [step.get("query") if isinstance(step, Mapping) else None for step in steps]
    if steps and len(steps) == len(replies) and all(isinstance(q, list) and q and q != [{}] for q in queries):
        prompts = [_swe_sequence(q, f"trajectory[{k}].query")[0] for k, q in enumerate(queries)]
        if all(later[: len(earlier)] == earlier for earlier, later in zip(prompts, prompts[1:])):
            for call, prompt in zip(trajectory.calls, prompts):
                call.prompt = prompt
            trajectory.prompts_from = "query"
            _, _, query_demo = _swe_sequence(queries[0], "trajectory[0].query")
            trajectory.prefix_length = _prefix_through_task(prompts[0], query_demo)
        else:
            trajectory.notes.append(
                "the steps' queries do not extend each other (SWE-agent's history processors rewrote "
                "them): prompts rebuilt from the history, as a full-context agent would have sent them"
            )
    elif steps and len(steps) != len(replies):
        trajectory.notes.append(f"{len(steps)} trajectory steps but {len(replies)} agent answers in the history")
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), Mapping) else {}
    trajectory.totals = {
        k: stats[k] for k in ("instance_cost", "tokens_sent", "tokens_received", "api_calls") if k in stats
    }
    return _finish(trajectory)


# ---------------------------------------------------------------- OpenAI chat logs


def conversations_of(name: str, text: str) -> list[tuple[str, Any]]:
    """(task id, conversation) of each conversation in an OpenAI chat-log file (JSON or JSON lines)."""
    stem = task_id_of(name)
    try:
        data = json.loads(text)
        items = (
            data
            if isinstance(data, list) and data and isinstance(data[0], Mapping) and "messages" in data[0]
            else [data]
        )
    except json.JSONDecodeError:
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    # the position only: a line that is no JSON is nothing we may echo
                    raise FormatProblem.at(f"line {number}", f"not JSON ({exc.msg} at column {exc.colno})") from None
    named = []
    for k, item in enumerate(items):
        own = item.get("id") if isinstance(item, Mapping) and isinstance(item.get("id"), str) else None
        named.append((safe_task_id(own) if own else (stem if len(items) == 1 else f"{stem}-{k + 1}"), item))
    return named


def read_openai(task_id: str, data: Any) -> Trajectory:
    if isinstance(data, list):
        data = {"messages": data}
    if not isinstance(data, Mapping) or not isinstance(data.get("messages"), list):
        raise FormatProblem("messages", data.get("messages") if isinstance(data, Mapping) else data, "expected a list")
    history: list[dict] = []
    replies: list[int] = []
    raw_replies: list[Mapping] = []
    for index, item in enumerate(data["messages"]):
        message = _message(item, f"messages[{index}]")
        if message["role"] == "assistant":
            replies.append(len(history))
            raw_replies.append(item)
        history.append(message)
    usages = data.get("usage") if isinstance(data.get("usage"), list) else None
    if usages is not None and len(usages) != len(replies):
        raise FormatProblem("usage", f"{len(usages)} entries", f"expected one per assistant message ({len(replies)})")
    calls = []
    for k, (position, item) in enumerate(zip(replies, raw_replies)):
        usage = usages[k] if usages is not None else item.get("usage")
        where = f"usage[{k}]" if usages is not None else f"messages[{position}].usage"
        prompt, completion, cached = _usage(usage, where)
        calls.append(
            Call(
                prompt=history[:position],
                reply=history[position],
                prompt_tokens=prompt,
                completion_tokens=completion,
                cached_tokens=cached,
                model=data.get("model") if isinstance(data.get("model"), str) else None,
            )
        )
    trajectory = Trajectory(
        task_id=task_id,
        source_format="openai",
        history=history,
        calls=calls,
        prefix_length=protected_prefix_length(history),
        action_format=None,
        model_name=data.get("model") if isinstance(data.get("model"), str) else None,
    )
    return _finish(trajectory)


def read_trajectories(name: str, text: str, fmt: str = AUTO) -> list[Trajectory]:
    """Every trajectory of one file's text (one, or one per conversation of a chat log).

    Raises ``FormatProblem`` (the file is not JSON, is nested too deeply to read, or does not fit ``fmt``)."""
    try:
        return _read_trajectories(name, text, fmt)
    except RecursionError:
        raise FormatProblem.at(
            "(file)", "nested too deeply to read (JSON arrays or objects within each other)"
        ) from None


def _read_trajectories(name: str, text: str, fmt: str) -> list[Trajectory]:
    if fmt != AUTO and fmt not in TABLE:
        raise FormatProblem("--format", fmt, f"known: {AUTO}, {', '.join(names())}")
    row = TABLE.get(fmt) or next((r for r in TABLE.values() if r.suffixes and name.endswith(r.suffixes)), None)
    if row is not None and row.parses_itself:
        return row.read(name, text, None)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # the position only: text that is no JSON is nothing we may echo (a link to /etc/shadow)
        raise FormatProblem.at("(file)", f"not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    row = TABLE[detect_format(name, data)] if row is None else row
    return row.read(name, text, data)


# ---------------------------------------------------------------- the formats


@dataclass(frozen=True)
class Format:
    """One import format: its ``--format`` name, whether a parsed file is one of its (``detect``,
    tried in table order), how to read a file into trajectories (``read(name, text, data)``), and
    what it claims besides: file suffixes it reads whatever their content (``suffixes``), the
    extra patterns a folder is searched for when it is named (``patterns``), and whether it
    parses the text itself (then it is read without parsing it first when named or claimed by
    suffix; ``read`` always gets the text, and the parsed JSON where it was parsed)."""

    name: str
    detect: Callable[[str, Any], bool]
    read: Callable[[str, str, Any], list[Trajectory]]
    doc: str
    suffixes: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    parses_itself: bool = False


TABLE: dict[str, Format] = {}


def register(row: Format) -> Format:
    if row.name in TABLE or row.name == AUTO:
        raise ValueError(f"import format {row.name!r} is registered already")
    TABLE[row.name] = row
    return row


def names() -> tuple[str, ...]:
    """The ``--format`` names, ``auto`` aside, in detection order."""
    return tuple(TABLE)


def _read_openai_file(name: str, text: str, data: Any) -> list[Trajectory]:
    return [read_openai(task_id, item) for task_id, item in conversations_of(name, text)]


register(
    Format(
        "mini-swe-agent",
        _is_mini_swe_agent,
        lambda name, text, data: [read_mini_swe_agent(name, data)],
        "mini-swe-agent 1.x and 2.x trajectories (*.traj.json)",
    )
)
register(
    Format(
        "swe-agent",
        _is_swe_agent,
        lambda name, text, data: [read_swe_agent(name, data)],
        "SWE-agent trajectories (*.traj)",
    )
)
register(
    Format(
        "openai",
        _is_openai,
        _read_openai_file,
        "OpenAI chat logs: a conversation per file or per line (*.jsonl, *.json)",
        suffixes=(".jsonl",),
        patterns=("*.json",),
        parses_itself=True,
    )
)
