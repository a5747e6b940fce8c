"""Summary prompt templates and the requests built from them.

Templates are plain text files named ``{name}.txt``. They are looked up in
``$CTXPOLICY_PROMPTS_DIR``, then in the repository checkout's ``config/prompts/``, then in the
copies shipped inside the package, so that a user can drop the exact published templates into
``config/prompts/``. A template may use two placeholders, ``{words}`` and ``{transcript}``;
any other brace is left as written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ctxpolicy.policies.history import (
    Message,
    commands_of,
    is_generated_block,
    is_placeholder,
    text_of,
    uses_tool_calls,
)

PROMPT_FOR_STAGE = {"SU": "summarize_free", "SU-p": "summarize_free",
                    "S": "summarize_structured", "S-p": "summarize_structured"}
WORDS_PER_TOKEN = 0.75
MIN_ALLOWANCE_TOKENS = 50

_PACKAGE_DIR = Path(__file__).with_name("templates")
_CHECKOUT_DIR = Path(__file__).resolve().parents[3] / "config" / "prompts"


def prompt_dirs() -> list[Path]:
    dirs = [Path(d) for d in [os.environ.get("CTXPOLICY_PROMPTS_DIR")] if d]
    return [*dirs, _CHECKOUT_DIR, _PACKAGE_DIR]


def load_prompt(name: str) -> str:
    """The template ``{name}.txt`` from the first prompt directory that has it."""
    for directory in prompt_dirs():
        path = directory / f"{name}.txt"
        if path.is_file():
            return path.read_text(encoding="utf-8")
    searched = ", ".join(str(d) for d in prompt_dirs())
    raise FileNotFoundError(f"prompt template {name!r} not found in {searched}")


def render_prompt(template: str, *, words: int, transcript: str) -> str:
    return template.replace("{words}", str(words)).replace("{transcript}", transcript)


def requested_words(allowance_tokens: int) -> int:
    return round(WORDS_PER_TOKEN * max(MIN_ALLOWANCE_TOKENS, allowance_tokens))


def _tag(message: Message, tool_mode: bool) -> str:
    role = message.get("role")
    if is_generated_block(message):
        return "earlier summary"
    if is_placeholder(message):
        return "cleared tool result"
    if role == "tool" or (role == "user" and not tool_mode):
        return "tool result"
    return str(role)


def transcript(window: Sequence[Message]) -> str:
    """The window as role-tagged text: ``### assistant``, ``### tool call``, ``### tool result``..."""
    tool_mode = uses_tool_calls(window)
    blocks = []
    for message in window:
        text = text_of(message).strip()
        if text:
            blocks.append(f"### {_tag(message, tool_mode)}\n{text}")
        if message.get("tool_calls"):
            blocks.extend(f"### tool call\n{command}" for command in commands_of({"tool_calls": message["tool_calls"]}))
    return "\n\n".join(blocks)


def summary_request(stage: str, window: Sequence[Message], allowance_tokens: int) -> list[dict]:
    template = load_prompt(PROMPT_FOR_STAGE[stage])
    content = render_prompt(template, words=requested_words(allowance_tokens), transcript=transcript(window))
    return [{"role": "user", "content": content}]
