"""Reacquisition: retrieval commands after a compression that read back what it removed.

An event *removed an output* when an observation of the history before it is not in the
history after it (dropped, cleared, summarised or cut). The command behind that output is the
command of the assistant message before the observation (in tool-calling mode, the one whose
tool call the observation answers). A later command is a *reacquisition* of that event when
``ctxpolicy.metrics.commands.is_retrieval`` calls it a read and it either is one of those
commands again (blanks aside) or names a path that a removed output or its command named
(``src/app.py`` and ``/repo/src/app.py`` are the same path).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxpolicy.analysis.anchors import normalise, paths
from ctxpolicy.metrics.commands import commands_of, is_retrieval
from ctxpolicy.policies.history import is_observation, marker_of, text_of, uses_tool_calls


@dataclass
class Removed:
    """What an event took away: the commands whose output went, and the paths those named."""

    commands: set[str] = field(default_factory=set)
    paths: set[str] = field(default_factory=set)


def command_key(command: str) -> str:
    return " ".join(normalise(command).split())


def same_path(a: str, b: str) -> bool:
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _producer(
    before: Sequence[Mapping[str, Any]], index: int, tool_mode: bool, action_format: str | None = None
) -> list[str]:
    observation = before[index]
    call_id = observation.get("tool_call_id")
    for message in reversed(before[:index]):
        if message.get("role") != "assistant":
            continue
        if tool_mode and call_id:
            for call in message.get("tool_calls") or []:
                if call.get("id") == call_id:
                    return commands_of({"tool_calls": [call]})
            continue
        return commands_of(dict(message), action_format)
    return []


def removed_outputs(
    before: Sequence[Mapping[str, Any]],
    kept: Iterable[int],
    action_format: str | None = None,
    prefix_length: int | None = None,
) -> Removed:
    """``kept``: positions of ``before`` whose message is still in the history after the event;
    ``action_format`` and ``prefix_length`` the run's recorded ones (None: ``mswea_bash_command``,
    system and task message)."""
    kept = set(kept)
    tool_mode = uses_tool_calls(before)
    removed = Removed()
    for index, message in enumerate(before):
        if index in kept or not is_observation(message, tool_mode) or marker_of(message):
            continue  # still there, not an output, or an output an earlier event already removed
        if not tool_mode and index < (_task_index(before) if prefix_length is None else prefix_length):
            continue
        commands = _producer(before, index, tool_mode, action_format)
        removed.commands |= {command_key(c) for c in commands}
        removed.paths |= paths(text_of(message))
        for command in commands:
            removed.paths |= paths(command)
    return removed


def _task_index(messages: Sequence[Mapping[str, Any]]) -> int:
    """Position just after the first user message (the task), which is never an observation."""
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            return index + 1
    return len(messages)


def reacquires(command: str, removed: Removed) -> bool:
    if not is_retrieval(command):
        return False
    if command_key(command) in removed.commands:
        return True
    return any(same_path(p, q) for p in paths(command) for q in removed.paths)


@dataclass
class Reacquisition:
    commands: int = 0  # reacquisition commands in the window after the event
    of_lost: int = 0  # ... that read back an anchor the event lost (not kept, not summarised)
    retrieval: int = 0  # all retrieval commands in the window
    total: int = 0  # all commands in the window
    first_step: int | None = None  # 1 = the first reply after the event


def count_after(
    replies: Sequence[tuple[int, Mapping[str, Any]]],
    event_step: int,
    until_step: int | None,
    removed: Removed,
    lost_commands: set[str],
    lost_paths: set[str],
    action_format: str | None = None,
) -> Reacquisition:
    """Count over the replies made at steps ``event_step`` .. ``until_step - 1`` (to the end if None)."""
    result = Reacquisition()
    lost = Removed(commands={command_key(c) for c in lost_commands}, paths=set(lost_paths))
    for step, message in replies:
        if step < event_step or (until_step is not None and step >= until_step):
            continue
        for command in commands_of(dict(message), action_format):
            result.total += 1
            result.retrieval += is_retrieval(command)
            if reacquires(command, removed):
                result.commands += 1
                result.of_lost += reacquires(command, lost)
                if result.first_step is None:
                    result.first_step = step - event_step + 1
    return result
