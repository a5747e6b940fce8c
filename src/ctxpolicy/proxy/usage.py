"""What an upstream answer says about itself: token usage, finish reason, model, and the answer.

Both dialects (OpenAI chat completions, Anthropic messages), whole answers and server-sent
event streams. A stream is passed to the client event by event, unchanged, while ``StreamTally``
reads each event on the way. Both also say whether the client can use the answer at all
(``answer_problem``, ``StreamTally.problem`` / ``StreamTally.unfinished``): bad JSON, no
choices, an error event, a stream cut before its end. The answer itself (``Usage.reply``) is the
model's message in the OpenAI form the records keep, a streamed one put together from its deltas
(``Reply``): the proxy records it so the last step's answer, which no later prompt holds, is kept.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import orjson


@dataclass
class Usage:
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    model: str | None = None
    reply: dict | None = None

    @property
    def reported(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class Reply:
    """A streamed answer put together from its events (either dialect), as an OpenAI message."""

    texts: list[str] = field(default_factory=list)
    calls: dict[int, dict] = field(default_factory=dict)  # OpenAI tool calls by their index
    _anthropic_blocks: dict[int, dict] = field(default_factory=dict)

    def read_openai(self, payload: dict) -> None:
        for choice in payload.get("choices") or ():
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict) or choice.get("index", 0) != 0:
                continue
            if isinstance(delta.get("content"), str):
                self.texts.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                slot = self.calls.setdefault(_int(call.get("index")) or 0, {"id": None, "name": "", "arguments": ""})
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") if isinstance(call.get("function"), dict) else {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""

    def read_anthropic(self, payload: dict) -> None:
        kind, index = payload.get("type"), _int(payload.get("index")) or 0
        if kind == "content_block_start" and isinstance(payload.get("content_block"), dict):
            block = payload["content_block"]
            if block.get("type") == "tool_use":
                self.calls[index] = {"id": block.get("id"), "name": block.get("name") or "", "arguments": ""}
            elif block.get("type") == "text" and block.get("text"):
                self.texts.append(str(block["text"]))
        elif kind == "content_block_delta" and isinstance(payload.get("delta"), dict):
            delta = payload["delta"]
            if delta.get("type") == "text_delta":
                self.texts.append(str(delta.get("text") or ""))
            elif delta.get("type") == "input_json_delta" and index in self.calls:
                self.calls[index]["arguments"] += str(delta.get("partial_json") or "")

    def message(self) -> dict:
        message: dict = {"role": "assistant", "content": "".join(self.texts) or None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"] or "{}"},
                }
                for _, c in sorted(self.calls.items())
            ]
        elif message["content"] is None:
            message["content"] = ""
        return message


def _openai_reply(payload: dict) -> dict | None:
    choices = payload.get("choices")
    message = (
        choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
    )
    if not isinstance(message, dict):
        return None
    reply: dict = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        reply["tool_calls"] = message["tool_calls"]
    elif reply["content"] is None:
        reply["content"] = ""
    return reply


def _anthropic_reply(payload: dict) -> dict | None:
    content = payload.get("content")
    if not isinstance(content, list):
        return None
    reply = Reply()
    for n, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            reply.texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            reply.calls[n] = {"id": block.get("id"), "name": block.get("name") or "", "arguments": arguments}
    return reply.message()


def read_openai(payload: dict, usage: Usage) -> None:
    if not isinstance(payload, dict):
        return
    usage.model = payload.get("model") or usage.model
    for choice in payload.get("choices") or ():
        if isinstance(choice, dict) and choice.get("finish_reason"):
            usage.finish_reason = choice["finish_reason"]
    reported = payload.get("usage")
    if isinstance(reported, dict):
        usage.prompt_tokens = _int(reported.get("prompt_tokens"))
        usage.completion_tokens = _int(reported.get("completion_tokens"))
        details = reported.get("prompt_tokens_details") or {}
        usage.cached_tokens = _int(details.get("cached_tokens")) if isinstance(details, dict) else None


def read_anthropic(payload: dict, usage: Usage) -> None:
    """A whole message, or one stream event (message_start, message_delta)."""
    if not isinstance(payload, dict):
        return
    message = payload.get("message") if payload.get("type") == "message_start" else payload
    if not isinstance(message, dict):
        return
    usage.model = message.get("model") or usage.model
    stop = message.get("stop_reason") or (payload.get("delta") or {}).get("stop_reason")
    usage.finish_reason = stop or usage.finish_reason
    reported = message.get("usage") or payload.get("usage")
    if not isinstance(reported, dict):
        return
    fresh = _int(reported.get("input_tokens"))
    read = _int(reported.get("cache_read_input_tokens"))
    written = _int(reported.get("cache_creation_input_tokens"))
    if fresh is not None:  # Anthropic's input_tokens leaves out what was read from or written to the cache
        usage.prompt_tokens = fresh + (read or 0) + (written or 0)
        usage.cached_tokens = read
    if _int(reported.get("output_tokens")) is not None:
        usage.completion_tokens = reported["output_tokens"]


def answer_problem(dialect: str, data: bytes, usage: Usage) -> str | None:
    """Why a whole (non-streamed) 200 answer is of no use to the client, or None; reads its usage."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return f"the answer is not JSON ({exc})"
    if not isinstance(payload, dict):
        return f"the answer is a JSON {type(payload).__name__}, not an object"
    if payload.get("error"):
        return f"the answer is an error: {str(payload['error'])[:500]}"
    if dialect == "openai":
        read_openai(payload, usage)
        usage.reply = _openai_reply(payload)
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices:
            return "the answer has no choices"
        if not all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices):
            return "a choice of the answer has no message object"
        return None
    read_anthropic(payload, usage)
    usage.reply = _anthropic_reply(payload)
    if not isinstance(payload.get("content"), list):
        return "the answer has no content list"
    return None


class StreamTally:
    """Splits a server-sent-event byte stream into whole events and reads each one's usage.

    ``drop_usage_only`` removes the usage-only chunk (no choices) an OpenAI stream ends with when
    the proxy asked for usage on the client's behalf.
    """

    def __init__(self, dialect: str, drop_usage_only: bool = False):
        self.usage = Usage()
        self.reply = Reply()
        self._dialect = dialect
        self._read = read_openai if dialect == "openai" else read_anthropic
        self._drop_usage_only = drop_usage_only
        self._buffer = b""
        self.problem: str | None = None  # the first event the client cannot use
        self.done = False  # the stream's own end was seen ([DONE], or message_stop)
        self.error_passed = False  # the problem is the upstream's own error event, passed on as it is

    @property
    def unfinished(self) -> str | None:
        """Why the stream, now that the upstream closed it, is not a whole answer (or None)."""
        if self.problem:
            return self.problem
        if self._buffer.strip():
            return "the stream was cut in the middle of an event"
        if not self.done:
            return "the stream ended before its end marker"
        return None

    def feed(self, chunk: bytes) -> bytes:
        """The whole events completed by ``chunk``, to pass on (possibly empty). From the first
        event the client cannot use on (``problem``), nothing more is passed on."""
        if self.problem:
            return b""
        self._buffer += chunk
        if b"\n\n" not in self._buffer and b"\r\n\r\n" not in self._buffer:
            return b""
        normalized = self._buffer.replace(b"\r\n", b"\n")
        *events, self._buffer = normalized.split(b"\n\n")
        out = []
        for event in events:
            if self._keep(event):
                out.append(event + b"\n\n")
            if self.problem:
                self._buffer = b""
                break
        return b"".join(out)

    def _keep(self, event: bytes) -> bool:
        for line in event.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                self.done = True
                continue
            if not data:
                continue
            try:
                payload = orjson.loads(data)
            except orjson.JSONDecodeError:
                self.problem = f"a stream event is not JSON: {data[:200].decode('utf-8', 'replace')!r}"
                return False
            if not isinstance(payload, dict):
                self.problem = f"a stream event is a JSON {type(payload).__name__}, not an object"
                return False
            if payload.get("error") or payload.get("type") == "error":
                self.problem = f"the stream carries an error: {str(payload.get('error'))[:500]}"
                self.error_passed = True
                return True  # the client's SDK reads it as the error it is
            if payload.get("type") == "message_stop":
                self.done = True
            self._read(payload, self.usage)
            (self.reply.read_openai if self._dialect == "openai" else self.reply.read_anthropic)(payload)
            if (
                self._drop_usage_only
                and isinstance(payload, dict)
                and payload.get("usage")
                and not payload.get("choices")
            ):
                return False
        return True
