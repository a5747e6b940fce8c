"""Summary prompt templates and the requests built from them.

Each summarizing primitive has a template pair, ``{name}.system.txt`` and ``{name}.user.txt``,
rendered into a system and a user message. The pair is looked up in ``$CTXPOLICY_PROMPTS_DIR``,
then in the repository checkout's ``config/prompts/`` (an override folder, empty of templates
unless someone drops a pair there), then in ``templates/`` inside the package, the one owner of
the prompt files; the first folder holding either file must hold both. A file's text is sent as written
(less the newline ending its last line), with exactly two placeholders replaced, literally and
in one pass: ``{target_words}`` (the requested length) and ``{history_text}`` (the role-tagged
transcript). Any other brace is left as written, so a published template pair can be dropped
in unchanged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.paths import CONFIG_DIR
from ctxpolicy.tokens import join_counted
from ctxpolicy.policies.history import (
    Message,
    commands_of,
    is_generated_block,
    is_placeholder,
    text_of,
    uses_tool_calls,
)

# One pair per framing: SU and S replace the whole window (the agent keeps only the summary),
# SU-p and S-p its older head (the recent messages follow the summary verbatim). A stack asks
# with its final stage's pair (TRC+SU as SU, OTRC+S-p as S-p): what the agent is left with is
# the final stage's; cleared results reach the summarizer tagged as such (``transcript``).
PROMPT_FOR_STAGE = {
    "SU": "summarize_free",
    "SU-p": "summarize_free_partial",
    "S": "summarize_structured",
    "S-p": "summarize_structured_partial",
}
# A folder holding only the whole-window pair serves the partial primitive too: a pair dropped
# in before the partial pairs existed keeps applying to both (``load_prompt``).
PROMPT_FALLBACK = {"summarize_free_partial": "summarize_free", "summarize_structured_partial": "summarize_structured"}
PARTS = ("system", "user")
TARGET_WORDS, HISTORY_TEXT = "{target_words}", "{history_text}"
# S's answer: the block between these two lines is what the summary message keeps.
BLOCK_BEGIN, BLOCK_END = "[CONTEXT SUMMARY]", "[END CONTEXT SUMMARY]"
WORDS_PER_TOKEN = 0.75
MIN_ALLOWANCE_TOKENS = 50

_PLACEHOLDER_RE = re.compile(re.escape(TARGET_WORDS) + "|" + re.escape(HISTORY_TEXT))
_PACKAGE_DIR = Path(__file__).with_name("templates")
_CHECKOUT_DIR = CONFIG_DIR / "prompts"


class PromptError(CtxpolicyError, ValueError):
    """A summary template is missing, incomplete or in the old single-file form."""


@dataclass(frozen=True)
class PromptPair:
    system: str
    user: str


def prompt_dirs() -> list[Path]:
    dirs = [Path(d) for d in [os.environ.get("CTXPOLICY_PROMPTS_DIR")] if d]
    return [*dirs, _CHECKOUT_DIR, _PACKAGE_DIR]


def pair_paths(directory: Path, name: str) -> dict[str, Path]:
    return {part: directory / f"{name}.{part}.txt" for part in PARTS}


def _refuse_old_template(directory: Path, name: str) -> None:
    old = directory / f"{name}.txt"
    if old.is_file():
        new = " and ".join(p.name for p in pair_paths(directory, name).values())
        raise PromptError(
            f"{old}: old single-file summary template ({{words}}/{{transcript}}) is no longer read; "
            f"split it into {new} with the placeholders {TARGET_WORDS} and {HISTORY_TEXT}"
        )


def _read_template(path: Path) -> str:
    """The file's text; the newline that ends its last line is a file convention, not prompt text."""
    return path.read_text(encoding="utf-8").removesuffix("\n")  # read_text already turned \r\n into \n


def load_prompt(name: str) -> PromptPair:
    """The template pair ``{name}.system.txt`` / ``{name}.user.txt`` from the first folder that has
    it, or, for a partial pair, that folder's whole-window pair (``PROMPT_FALLBACK``)."""
    dirs = prompt_dirs()
    names = [name, *([PROMPT_FALLBACK[name]] if name in PROMPT_FALLBACK else [])]
    for directory in dirs:
        for each in names:
            _refuse_old_template(directory, each)
    for directory in dirs:
        for each in names:
            pair = _pair_in(directory, each)
            if pair is not None:
                return pair
    searched = ", ".join(str(d) for d in dirs)
    raise PromptError(f"summary template {name!r} ({name}.system.txt, {name}.user.txt) not found in {searched}")


def _pair_in(directory: Path, name: str) -> PromptPair | None:
    """The pair ``name`` in ``directory``, None when neither file is there."""
    paths = pair_paths(directory, name)
    present = {part: path for part, path in paths.items() if path.is_file()}
    if not present:
        return None
    missing = [str(path) for part, path in paths.items() if part not in present]
    if missing:
        raise PromptError(
            f"{missing[0]}: missing; a summary template needs both "
            f"{' and '.join(p.name for p in paths.values())} in one folder"
        )
    pair = PromptPair(**{part: _read_template(path) for part, path in paths.items()})
    if HISTORY_TEXT not in pair.system + pair.user:
        raise PromptError(
            f"{paths['user']}: no {HISTORY_TEXT} placeholder in {name}'s templates, "
            "so the summarizer would never see the history"
        )
    return pair


def render_prompt(template: str, *, target_words: int, history_text: str) -> str:
    """Replace the two placeholders in one pass, so text substituted in is never rescanned."""
    values = {TARGET_WORDS: str(target_words), HISTORY_TEXT: history_text}
    return _PLACEHOLDER_RE.sub(lambda match: values[match.group(0)], template)


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


def transcript_blocks(window: Sequence[Message]) -> list[str]:
    """The window's role-tagged blocks: ``### assistant``, ``### tool call``, ``### tool result``..."""
    tool_mode = uses_tool_calls(window)
    blocks = []
    for message in window:
        text = text_of(message).strip()
        if text:
            blocks.append(f"### {_tag(message, tool_mode)}\n{text}")
        if message.get("tool_calls"):
            blocks.extend(f"### tool call\n{command}" for command in commands_of({"tool_calls": message["tool_calls"]}))
    return blocks


def transcript(window: Sequence[Message]) -> str:
    """The window as role-tagged text: its ``transcript_blocks`` separated by blank lines."""
    return "\n\n".join(transcript_blocks(window))


def _rendered_pieces(template: str, target_words: int, blocks: list[str]) -> list[str]:
    """``render_prompt(template, ...)`` as pieces whose concatenation it is: the template's text
    between placeholders, the word count, and the transcript block by block (each but the last
    with its blank line), so that the request is counted from the blocks' cached counts."""
    history = [block + "\n\n" for block in blocks[:-1]] + blocks[-1:]
    pieces: list[str] = []
    at = 0
    for match in _PLACEHOLDER_RE.finditer(template):
        pieces.append(template[at : match.start()])
        pieces += history if match.group(0) == HISTORY_TEXT else [str(target_words)]
        at = match.end()
    pieces.append(template[at:])
    return pieces


def summary_request(stage: str, window: Sequence[Message], allowance_tokens: int) -> list[dict]:
    """The system and user messages asking for a summary of ``window`` within ``allowance_tokens``
    (each content as ``render_prompt`` renders it; its token count known from the blocks')."""
    pair = load_prompt(PROMPT_FOR_STAGE[stage])
    words, blocks = requested_words(allowance_tokens), transcript_blocks(window)
    return [
        {"role": part, "content": join_counted(_rendered_pieces(getattr(pair, part), words, blocks))} for part in PARTS
    ]


def summary_block(text: str) -> str:
    """S's answer from its begin marker to its end marker (or to the end when the end is missing)."""
    start = text.find(BLOCK_BEGIN)
    if start < 0:
        return text
    end = text.find(BLOCK_END, start)
    return text[start : end + len(BLOCK_END)] if end >= 0 else text[start:]
