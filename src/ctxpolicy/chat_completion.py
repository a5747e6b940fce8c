"""The OpenAI chat-completion answer as we accept it: one definition, checked before any value is used.

A server that answers ``prompt_tokens: "lots"``, ``cached_tokens: "abc"`` or ``choices: []`` gives a
:class:`MalformedCompletion` naming the field and the value, instead of a number that breaks the
run's totals later. Unknown fields are kept (servers add their own). Cached prompt tokens sit in
``usage.prompt_tokens_details.cached_tokens`` on vLLM and OpenAI, and in ``timings.cache_n`` on older
llama.cpp builds. A leaf (pydantic only): every room may import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxpolicy.errors import CtxpolicyError

TokenCount = Annotated[int, Field(ge=0)]


class MalformedCompletion(CtxpolicyError, ValueError):
    """The answer is not a chat completion we can use; the message names the field and value."""


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class Message(_Strict):
    content: str | None = None
    tool_calls: list[dict] | None = None


class Choice(_Strict):
    message: Message
    finish_reason: str | None = None


class PromptTokensDetails(_Strict):
    cached_tokens: TokenCount | None = None


class Usage(_Strict):
    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = None
    prompt_tokens_details: PromptTokensDetails | None = None


class Timings(_Strict):
    cache_n: TokenCount | None = None


class TokenReport(_Strict):
    """What an answer says about tokens: ``usage`` (OpenAI, vLLM, llama.cpp) and ``timings`` (llama.cpp)."""

    usage: Usage | None = None
    timings: Timings | None = None

    @property
    def cached_tokens(self) -> int | None:
        """Server-reported cached prompt tokens, or None where the server does not report them."""
        details = self.usage.prompt_tokens_details if self.usage else None
        if details is not None and details.cached_tokens is not None:
            return details.cached_tokens
        return self.timings.cache_n if self.timings else None


class ChatCompletion(TokenReport):
    choices: list[Choice] = Field(min_length=1)
    model: str | None = None


def parse_completion(payload: Any) -> ChatCompletion:
    """The validated answer; raises MalformedCompletion naming the first bad field and its value."""
    return _validate(ChatCompletion, payload)


def parse_token_report(payload: Any) -> TokenReport:
    """Only the token counts of an answer, validated like ``parse_completion``."""
    return _validate(TokenReport, payload)


def _validate(model: type[BaseModel], payload: Any) -> Any:
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(answer)"
        value = repr(first.get("input"))
        if len(value) > 80:
            value = value[:77] + "..."
        raise MalformedCompletion(f"malformed chat completion: {where}: {value}: {first['msg']}") from None


@dataclass(frozen=True)
class ChatResponse:
    content: str | None
    tool_calls: list[dict]
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    model: str | None
    start: float
    end: float
    latency_s: float
    attempts: int
    raw: dict = field(repr=False)

    def assistant_message(self) -> dict:
        """The assistant message to append to the history, in the OpenAI chat schema."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message


def chat_response(payload: Any, *, start: float, end: float, latency_s: float, attempts: int) -> ChatResponse:
    """The answer of one call as the clients hand it on; raises MalformedCompletion naming the bad field."""
    completion = parse_completion(payload)
    choice = completion.choices[0]
    usage = completion.usage
    return ChatResponse(
        content=choice.message.content,
        tool_calls=list(choice.message.tool_calls or []),
        finish_reason=choice.finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        cached_tokens=completion.cached_tokens,
        model=completion.model,
        start=start,
        end=end,
        latency_s=latency_s,
        attempts=attempts,
        raw=payload,
    )
