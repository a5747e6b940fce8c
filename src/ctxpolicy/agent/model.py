"""A mini-swe-agent model for any OpenAI-compatible endpoint, in text or tool-calling mode.

It follows mini-swe-agent's ``Model`` protocol and reuses its parsers and observation
formatters; the HTTP call is ``ChatClient`` (see ``client.py`` for why not litellm). The call
and the parsing are separate steps (``complete`` then ``parse``) so that the agent can record a
call's telemetry even when its answer turns out to be malformed.
"""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any, Literal

from jinja2 import StrictUndefined, Template
from minisweagent.exceptions import FormatError
from minisweagent.models.utils.actions_text import format_observation_messages
from minisweagent.models.utils.actions_toolcall import (
    BASH_TOOL,
    format_toolcall_observation_messages,
    parse_toolcall_actions,
)
from pydantic import BaseModel, ConfigDict

from ctxpolicy.agent.client import ChatClient, ChatResponse
from ctxpolicy.agent.messages import api_message
from ctxpolicy.policies import actions
from ctxpolicy.policies.messages import message_problem

# A fenced block: opening fence with its info string, body, closing fence (matched in order, so
# a closing fence is never taken for the opening of the next block).
FENCED_BLOCK = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
HARNESS_TAG = actions.MSWEA  # the text mode's action format (ctxpolicy.policies.actions)
SHELL_TAGS = ("bash", "sh", "shell", "console", "")  # what small models write instead of the harness tag
# The stop sequence of ``stop_after_action``: a closing fence and the blank line after it. A bare
# "\n```\n" would also match the opening of an untagged block ("```\n" and the command at once).
FENCE_STOP = "\n```\n\n"


class EndpointModelConfig(BaseModel):
    """How the agent's model is called; the run's values come from ``RunSettings`` (its defaults
    are the only ones) and the mode's prompt templates, so no field here has a default of its own."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model_name: str
    """The served model name sent as ``model``."""
    base_url: str
    """The endpoint's OpenAI-compatible base URL (…/v1); recorded, the HTTP call is ``ChatClient``'s."""
    mode: Literal["text", "tool"]
    """``RunSettings.mode``: fenced bash blocks, or the OpenAI ``bash`` tool."""
    temperature: float
    """``RunSettings.temperature``."""
    max_tokens: int
    """``RunSettings.max_tokens``."""
    stop_after_action: bool = False
    """``RunSettings.stop_after_action``: text mode sends ``FENCE_STOP`` as the call's stop sequence."""
    seed: int | None = None
    """Sampling seed sent with every call; None: none sent."""
    extra_body: dict[str, Any] = {}
    """Further request-body fields, sent as they are."""
    format_error_template: str
    """Jinja template of the message that answers a reply without a command (the mode's templates file)."""
    observation_template: str
    """Jinja template of a command's output as the next message (the mode's templates file)."""


def parse_text_action(content: str) -> str | None:
    """The command of the first fenced block with mini-swe-agent's tag, else of the first shell or
    untagged block; None if there is none."""
    blocks = [(tag.strip().lower(), body.strip()) for tag, body in FENCED_BLOCK.findall(content)]
    for accepted in ((HARNESS_TAG,), SHELL_TAGS):
        for tag, body in blocks:
            if tag in accepted and body:
                return body
    return None


def close_stopped_fence(content: str, finish_reason: str | None) -> str | None:
    """The content with the closing fence put back when the server stopped at ``FENCE_STOP``, else None.

    The server leaves the stop sequence out and says only ``finish_reason`` "stop", as for an
    end-of-turn token; what tells the two apart is the content: a stop at the closing fence leaves
    a command block open (an opening fence without its closing one), a model that ended its turn
    has closed its block. (An end-of-turn token inside an open block would look the same; the
    model's command ends there either way.)"""
    if finish_reason != "stop" or not content:
        return None
    last_open = content.rfind("```")
    if last_open < 0 or content.count("```") % 2 == 0 or "\n" not in content[last_open:]:
        return None
    return content + FENCE_STOP.rstrip("\n")


def format_error(template: str, error: str, finish_reason: str | None, content: str) -> FormatError:
    text = Template(template, undefined=StrictUndefined).render(
        error=error, actions=[], finish_reason=finish_reason, has_tool_calls=False
    )
    return FormatError(
        {"role": "user", "content": text, "extra": {"interrupt_type": "FormatError", "model_response": content}}
    )


class EndpointModel:
    def __init__(self, client: ChatClient, **kwargs):
        self.config = EndpointModelConfig(**kwargs)
        self.client = client

    @property
    def stops_at_fence(self) -> bool:
        return self.config.stop_after_action and self.config.mode == "text"

    def request_body(self, messages: list[dict]) -> dict:
        body: dict[str, Any] = {
            "model": self.config.model_name,
            "messages": [api_message(m) for m in messages],
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            "stream": False,
        }
        if self.stops_at_fence:
            body["stop"] = [FENCE_STOP]
        if self.config.seed is not None:
            body["seed"] = self.config.seed
        if self.config.mode == "tool":
            body["tools"] = [BASH_TOOL]
        return body | self.config.extra_body

    def complete(self, messages: list[dict], *, deadline: float | None = None) -> ChatResponse:
        return self.client.complete(self.request_body(messages), deadline=deadline)

    def parse(self, response: ChatResponse) -> dict:
        """The assistant message with its parsed actions; raises FormatError when there is none."""
        message = response.assistant_message()
        extra: dict[str, Any] = {"response": response.raw, "cost": 0.0, "timestamp": response.end}
        if self.stops_at_fence and (closed := close_stopped_fence(message["content"] or "", response.finish_reason)):
            message["content"] = closed
            extra["fence_restored"] = True  # the raw response (extra.response) has the content as sent
        try:
            problem = message_problem(message, "message")  # the policies' one check (policies.messages)
            if problem is not None:  # a malformed tool call never enters the history: the model is told
                raise format_error(
                    self.config.format_error_template,
                    f"Malformed tool call in the response: {problem[0]}: {problem[1]}",
                    response.finish_reason,
                    response.content or "",
                )
            actions = self._actions(response, message["content"] or "")
        except FormatError as exc:
            exc.messages[0]["extra"].update(extra)
            raise
        return message | {"extra": {"actions": actions, **extra}}

    def _actions(self, response: ChatResponse, content: str) -> list[dict]:
        if self.config.mode == "tool" and response.tool_calls:
            calls = [_namespace(call) for call in response.tool_calls]
            return parse_toolcall_actions(
                calls,
                format_error_template=self.config.format_error_template,
                template_kwargs={"finish_reason": response.finish_reason},
            )
        # Text mode, and tool mode when the model wrote its command as text instead of a tool call.
        command = parse_text_action(content)
        if command is None:
            raise format_error(
                self.config.format_error_template,
                "No bash code block found in the response.",
                response.finish_reason,
                content,
            )
        return [{"command": command}]

    # --- mini-swe-agent Model protocol -------------------------------------------------------

    def query(self, messages: list[dict], **kwargs) -> dict:
        return self.parse(self.complete(messages))

    def format_message(self, **kwargs) -> dict:
        return kwargs

    def format_observation_messages(
        self, message: dict, outputs: list[dict], template_vars: dict | None = None
    ) -> list[dict]:
        actions = message.get("extra", {}).get("actions", [])
        if any("tool_call_id" in action for action in actions):
            return format_toolcall_observation_messages(
                actions=actions,
                outputs=outputs,
                observation_template=self.config.observation_template,
                template_vars=template_vars,
            )
        return format_observation_messages(
            outputs, observation_template=self.config.observation_template, template_vars=template_vars
        )

    def get_template_vars(self, **kwargs) -> dict[str, Any]:
        return self.config.model_dump() | kwargs

    def serialize(self) -> dict:
        return {
            "info": {
                "config": {
                    "model": self.config.model_dump(mode="json"),
                    "model_type": f"{self.__class__.__module__}.{self.__class__.__name__}",
                }
            }
        }


def _namespace(tool_call: dict) -> SimpleNamespace:
    function = tool_call.get("function") or {}
    return SimpleNamespace(
        id=tool_call.get("id"),
        function=SimpleNamespace(name=function.get("name"), arguments=function.get("arguments") or ""),
    )
