"""The opt-in for upstreams whose chat templates require user and assistant turns to alternate.

Policies can leave two messages of one role in a row (the study's TR and summaries put a user
message after a user message), which most servers accept. ``merge_same_role`` joins each run
of consecutive plain messages of one role (system, user, or assistant without tool calls) into
one: string contents joined by a blank line, content-part lists concatenated. Tool messages and
assistant messages with tool calls are never merged (each answers or makes its own call). Pure.
"""

from __future__ import annotations

MERGED_ROLES = frozenset({"system", "user", "assistant"})
_PLAIN_KEYS = frozenset({"role", "content"})


def _plain(message: dict) -> bool:
    return message.get("role") in MERGED_ROLES and set(message) <= _PLAIN_KEYS


def _parts(content) -> list:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def _join(first, second):
    if isinstance(first, str | None) and isinstance(second, str | None):
        return "\n\n".join(text for text in (first, second) if text)
    return _parts(first) + _parts(second)


def merge_same_role(messages: list[dict]) -> list[dict]:
    """``messages`` with each run of consecutive plain same-role messages merged into one (new
    dicts; the input is not changed)."""
    out: list[dict] = []
    for message in messages:
        if out and _plain(message) and _plain(out[-1]) and out[-1]["role"] == message["role"]:
            out[-1] = {"role": message["role"], "content": _join(out[-1].get("content"), message.get("content"))}
        else:
            out.append(message)
    return out
