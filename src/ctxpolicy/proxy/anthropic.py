"""Anthropic Messages requests <-> our OpenAI-format messages (the policies' format).

Supported content blocks: ``text`` (user and assistant), ``tool_use`` (assistant -> a tool
call), ``tool_result`` (user -> a ``tool`` message; its content a string or text blocks, its
``is_error`` kept). ``cache_control`` marks are dropped. Any other block type (images,
documents, thinking) is refused with a clear error rather than silently lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ctxpolicy.errors import CtxpolicyError


class ConversionError(CtxpolicyError, ValueError):
    """The request holds something the proxy cannot carry through a policy."""


def _text_of_blocks(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise ConversionError(f"{where}: expected a string or a list of blocks, got {type(content).__name__}")
    texts = []
    for n, block in enumerate(content):
        if not isinstance(block, Mapping) or block.get("type") != "text":
            kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
            raise ConversionError(f"{where}[{n}]: block type {kind!r} is not supported (only text)")
        texts.append(str(block.get("text", "")))
    return "\n".join(texts)


def _blocks(content: Any, where: str) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ConversionError(f"{where}: expected a string or a list of blocks, got {type(content).__name__}")
    for n, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise ConversionError(f"{where}[{n}]: expected a content block with a type")
    return list(content)


def _text_content(texts: list[str]) -> str | list[dict]:
    if len(texts) == 1:
        return texts[0]
    return [{"type": "text", "text": t} for t in texts]


def to_openai(body: Mapping) -> list[dict]:
    """The request's system prompt and messages as OpenAI-format chat messages."""
    messages: list[dict] = []
    if body.get("system"):
        messages.append({"role": "system", "content": _text_of_blocks(body["system"], "system")})
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ConversionError("messages: expected a non-empty list")
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, Mapping) or message.get("role") not in ("user", "assistant"):
            raise ConversionError(f"{where}: expected an object with role 'user' or 'assistant'")
        blocks = _blocks(message.get("content"), f"{where}.content")
        if message["role"] == "assistant":
            messages.append(_assistant(blocks, where))
        else:
            messages.extend(_user(blocks, where))
    return messages


def _assistant(blocks: list[dict], where: str) -> dict:
    texts, calls = [], []
    for n, block in enumerate(blocks):
        if block["type"] == "text":
            texts.append(str(block.get("text", "")))
        elif block["type"] == "tool_use":
            calls.append(
                {
                    "id": block.get("id"),
                    "type": "function",
                    "function": {
                        "name": block.get("name"),
                        "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
                    },
                }
            )
        else:
            raise ConversionError(
                f"{where}.content[{n}]: block type {block['type']!r} is not supported (text, tool_use)"
            )
    message: dict = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user(blocks: list[dict], where: str) -> list[dict]:
    out, texts = [], []
    for n, block in enumerate(blocks):
        if block["type"] == "tool_result":
            tool = {
                "role": "tool",
                "tool_call_id": block.get("tool_use_id"),
                "content": _text_of_blocks(block.get("content"), f"{where}.content[{n}].content"),
            }
            if block.get("is_error"):
                tool["is_error"] = True
            out.append(tool)
        elif block["type"] == "text":
            texts.append(str(block.get("text", "")))
        else:
            raise ConversionError(
                f"{where}.content[{n}]: block type {block['type']!r} is not supported (text, tool_result)"
            )
    if texts:
        out.append({"role": "user", "content": _text_content(texts)})
    return out


def from_openai(messages: list[dict]) -> tuple[str | None, list[dict]]:
    """(system, messages) for an Anthropic request; consecutive same-role turns are merged."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    out: list[dict] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        blocks = _anthropic_blocks(message)
        if not blocks:
            continue
        turn = "assistant" if role == "assistant" else "user"
        if out and out[-1]["role"] == turn:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": turn, "content": blocks})
    return ("\n".join(system) if system else None), out


def _anthropic_blocks(message: Mapping) -> list[dict]:
    content = message.get("content")
    if message.get("role") == "tool":
        block = {"type": "tool_result", "tool_use_id": message.get("tool_call_id"), "content": _plain(content)}
        if message.get("is_error"):
            block["is_error"] = True
        return [block]
    blocks = [{"type": "text", "text": text} for text in _texts(content) if text]
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"arguments": function.get("arguments")}
        blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments})
    return blocks


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(p.get("text", "")) for p in content if isinstance(p, Mapping)]
    return []


def _plain(content: Any) -> str:
    return "\n".join(_texts(content))
