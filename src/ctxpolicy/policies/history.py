"""The anatomy of an agent history: protected prefix, window, observations, markers, units.

Both kinds of agent history are understood:

* text mode: the assistant's command sits in a fenced block of its content, in the run's action
  format (``ctxpolicy.policies.actions``: ``mswea_bash_command`` or ``bash`` fences), and every
  observation is a ``user`` message after the task message;
* tool-calling mode: the assistant carries ``tool_calls`` and each observation is a ``tool``
  message with the matching ``tool_call_id``.

The protected prefix is the system message and the task message; where demonstrations come
before the task (SWE-agent), a run records a longer prefix and the policies take it as given.

Messages the policies write start with a marker, so that later events recognise them:
``[ctxpolicy:summary]`` (summaries and digests), ``[ctxpolicy:cleared]`` (cleared tool
results) and ``[ctxpolicy:compacted]`` (a CC block).
"""

from __future__ import annotations

import json

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from ctxpolicy.policies import actions
from ctxpolicy.tokens import count_message

SUMMARY_MARKER = "[ctxpolicy:summary]"
CLEARED_MARKER = "[ctxpolicy:cleared]"
COMPACTED_MARKER = "[ctxpolicy:compacted]"
MARKERS = (SUMMARY_MARKER, CLEARED_MARKER, COMPACTED_MARKER)
MARKER_STEM = "[ctxpolicy:"
PLACEHOLDER = f"{CLEARED_MARKER} Old tool result cleared to save context."
MESSAGE_PLACEHOLDER = f"{CLEARED_MARKER} Old message cleared to save context."  # what OTRC puts over a non-result

Message = Mapping[str, Any]


def protected_prefix_length(messages: Sequence[Message], recorded: int | None = None) -> int:
    """Length of the system message plus the first user (task) message; all of it if no task.

    ``recorded`` is a run's own prefix length (``run.json`` ``settings.protected_prefix``: through
    the real task when demonstrations come first); it is taken as given, up to the history's length."""
    if recorded is not None:
        if isinstance(recorded, bool) or not isinstance(recorded, int) or recorded < 0:
            raise ValueError(f"protected prefix: expected a non-negative integer, got {recorded!r}")
        return min(recorded, len(messages))
    for index, message in enumerate(messages):
        if message.get("role") == "user":
            return index + 1
    return len(messages)


def text_of(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def marker_of(message: Message) -> str | None:
    text = text_of(message)
    if not text.startswith(MARKER_STEM):
        return None
    return next((m for m in MARKERS if text.startswith(m)), None)


def is_placeholder(message: Message) -> bool:
    return marker_of(message) == CLEARED_MARKER


def placeholder_for(message: Message, tool_mode: bool) -> str:
    """The placeholder that replaces ``message``: ``PLACEHOLDER`` for a tool result, else
    ``MESSAGE_PLACEHOLDER`` (an assistant message or a summary), so it never claims a tool result."""
    return PLACEHOLDER if is_observation(message, tool_mode) else MESSAGE_PLACEHOLDER


def is_generated_block(message: Message) -> bool:
    """A summary, digest or compacted block written by a policy."""
    return marker_of(message) in (SUMMARY_MARKER, COMPACTED_MARKER)


def uses_tool_calls(messages: Sequence[Message]) -> bool:
    return any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def is_observation(message: Message, tool_mode: bool) -> bool:
    """A tool result: a ``tool`` message, or in text mode a ``user`` message after the task."""
    role = message.get("role")
    if role == "tool":
        return True
    return not tool_mode and role == "user" and not is_generated_block(message)


def tool_call_ids(message: Message) -> set[str]:
    return {call.get("id") for call in message.get("tool_calls") or () if isinstance(call, Mapping)}


def units(window: Sequence[Message]) -> list[tuple[int, int]]:
    """Split a window into the smallest pieces that can be dropped without breaking the API.

    In tool-calling mode an assistant message with ``tool_calls`` and the ``tool`` messages
    answering it form one unit: the chat API rejects a request in which either half dangles.
    Every other message is a unit of its own (so text mode is plain message granularity).
    """
    spans = []
    start, n = 0, len(window)
    while start < n:
        end = start + 1
        ids = tool_call_ids(window[start]) if window[start].get("role") == "assistant" else set()
        while ids and end < n and window[end].get("role") == "tool" and window[end].get("tool_call_id") in ids:
            end += 1
        spans.append((start, end))
        start = end
    return spans


def tool_call_key(message: Message) -> tuple[tuple[str, str], ...]:
    """The (name, arguments) of each tool call: a hashable key for per-message caches."""
    key = []
    for call in message.get("tool_calls") or ():
        function = (call.get("function") if isinstance(call, Mapping) else None) or {}
        key.append((str(function.get("name", "?")), str(function.get("arguments") or "{}")))
    return tuple(key)


@lru_cache(maxsize=1 << 16)
def _commands(text: str, calls: tuple[tuple[str, str], ...], action_format: str | None) -> tuple[str, ...]:
    commands = [c.strip() for c in actions.fenced_commands(text, action_format)] if "```" in text else []
    for name, raw in calls:
        try:
            arguments = json.loads(raw)
        except ValueError:
            arguments = raw
        if isinstance(arguments, dict) and "command" in arguments:
            commands.append(str(arguments["command"]))
        else:
            commands.append(f"{name}({arguments})")
    return tuple(commands)


def commands_of(message: Message, action_format: str | None = None) -> tuple[str, ...]:
    """The shell commands an assistant message asked for: its fenced blocks in the run's action
    format (None: ``mswea_bash_command``), and its tool calls."""
    return _commands(text_of(message), tool_call_key(message), action_format)


def with_content(message: Message, content: str) -> dict:
    """A copy of ``message`` with new content; every other key (``extra`` included) untouched."""
    return {**message, "content": content}


def token_list(messages: Sequence[Message]) -> list[int]:
    return [count_message(m) for m in messages]


def first_difference(before: Sequence[Message], after: Sequence[Message]) -> int | None:
    """Index of the first message of ``before`` that ``after`` does not keep as is (None if equal)."""
    for index, (old, new) in enumerate(zip(before, after)):
        if old is not new and old != new:
            return index
    if len(before) == len(after):
        return None
    return min(len(before), len(after))
