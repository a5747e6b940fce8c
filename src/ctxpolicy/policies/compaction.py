"""CC, the CliffCompaction recipe: mechanical compaction of older turns, no model call.

Older turns (all but the most recent K) become one compacted block: tool results longer than
500 characters are deleted (short ones kept), tool calls are collapsed to a signature (inlined
file bodies such as heredocs dropped), and assistant thoughts are cut to 300 characters. Nothing
is rewritten by a model. At the next event the previous block is discarded, never compacted again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache

from ctxpolicy.policies import actions
from ctxpolicy.policies.history import (
    COMPACTED_MARKER,
    Message,
    marker_of,
    text_of,
    tool_call_key,
)
from ctxpolicy.policies.rewrite import Rewrite
from ctxpolicy.tokens import count_message

KEEP_RECENT_TURNS = 4
MAX_RESULT_CHARS = 500
MAX_THOUGHT_CHARS = 300
MAX_SIGNATURE_CHARS = 160
ESSENTIAL_ARGUMENTS = ("path", "file", "file_path", "filename", "pattern", "query", "url")
HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n.*?\n\2(?=\s|$)", re.DOTALL)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def command_signature(command: str) -> str:
    """A one-line signature of a shell command, with inlined file bodies dropped."""
    without_bodies = HEREDOC_RE.sub(lambda m: f"<<{m[2]}{m[3]} [body dropped]", command)
    lines = [line.strip() for line in without_bodies.strip().splitlines() if line.strip()]
    head = lines[0] if lines else ""
    return _cut(head + (f" … (+{len(lines) - 1} lines)" if len(lines) > 1 else ""), MAX_SIGNATURE_CHARS)


def call_signature(name: str, raw_arguments: str) -> str:
    try:
        arguments = json.loads(raw_arguments)
    except ValueError:
        return _cut(f"{name}(…)", MAX_SIGNATURE_CHARS)
    if isinstance(arguments, dict) and "command" in arguments:
        return f"{name}: {command_signature(str(arguments['command']))}"
    essential = {k: v for k, v in arguments.items() if k in ESSENTIAL_ARGUMENTS} if isinstance(arguments, dict) else {}
    shown = ", ".join(f"{k}={_cut(str(v), 80)}" for k, v in essential.items())
    return _cut(f"{name}({shown})", MAX_SIGNATURE_CHARS)


def _compact_message(message: Message, action_format: str | None) -> tuple[str, ...]:
    return _compact(message.get("role") == "assistant", text_of(message), tool_call_key(message), action_format)


@lru_cache(maxsize=1 << 16)
def _compact(
    is_assistant: bool, text: str, calls: tuple[tuple[str, str], ...], action_format: str | None
) -> tuple[str, ...]:
    if is_assistant:
        thought = actions.without_actions(text, action_format).strip()
        lines = [f"assistant: {_cut(' '.join(thought.split()), MAX_THOUGHT_CHARS)}"] if thought else []
        lines += [f"  ran: {command_signature(c)}" for c in actions.fenced_commands(text, action_format)]
        lines += [f"  ran: {call_signature(name, arguments)}" for name, arguments in calls]
        return tuple(lines)
    if len(text) > MAX_RESULT_CHARS:
        return (f"  result: ({len(text)} characters deleted)",)
    return (f"  result: {text.strip()}",)


def _turn_starts(window: Sequence[Message]) -> list[int]:
    return [i for i, m in enumerate(window) if m.get("role") == "assistant"]


def compact(window: Sequence[Message], action_format: str | None = None) -> Rewrite | None:
    starts = _turn_starts(window)
    if len(starts) <= KEEP_RECENT_TURNS:
        return None
    recent_start = starts[-KEEP_RECENT_TURNS]
    older = [m for m in window[:recent_start] if marker_of(m) != COMPACTED_MARKER]
    if not older:
        return None
    lines = [line for message in older for line in _compact_message(message, action_format)]
    block = {"role": "user", "content": f"{COMPACTED_MARKER} Compacted record of earlier turns:\n" + "\n".join(lines)}
    return Rewrite([block, *window[recent_start:]], removed=recent_start, summary_tokens=count_message(block))
