"""DIGEST: an extractive digest of observed facts in place of an LLM summary (zero extra calls).

The digest lists the commands run with their return codes, error and test-result lines from
their output, and the file paths seen; when it does not fit the allowance, the most recent
facts win. It is written in the summary slot and carries the summary marker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ctxpolicy.policies.history import (
    Message,
    commands_of,
    is_generated_block,
    is_observation,
    text_of,
    uses_tool_calls,
)
from ctxpolicy.policies.prompts import MIN_ALLOWANCE_TOKENS
from ctxpolicy.policies.rewrite import Rewrite, StageContext
from ctxpolicy.policies.summarizing import summary_message
from ctxpolicy.tokens import count_message, count_text

RETURNCODE_RE = re.compile(r"<returncode>(-?\d+)</returncode>")
ERROR_RE = re.compile(r"(Traceback|Error|Exception|FAILED|FAIL:|error:|No such file|not found)")
TEST_RE = re.compile(r"(\b\d+ (passed|failed|errors?|skipped)\b|^OK\b|^Ran \d+ tests?)")
PATH_RE = re.compile(
    r"(?<![\w/.-])(?:\.{0,2}/)?(?:[\w.-]+/)*[\w-]+\.(?:py|pyi|txt|md|rst|json|ya?ml|toml|cfg|ini|"
    r"c|h|cc|cpp|hpp|js|ts|go|rs|java|sh|html|css|csv)\b"
)
MAX_LINE_CHARS = 200
MAX_LINES_PER_OUTPUT = 3


def _clip(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"


@lru_cache(maxsize=1 << 16)
def _observation_facts(text: str) -> tuple[str, ...]:
    facts = []
    if match := RETURNCODE_RE.search(text):
        facts.append(f"  returncode {match[1]}")
    lines = text.splitlines()
    errors = [line for line in lines if ERROR_RE.search(line)][:MAX_LINES_PER_OUTPUT]
    tests = [line for line in lines if TEST_RE.search(line.strip())][:MAX_LINES_PER_OUTPUT]
    facts += [f"  error: {_clip(line)}" for line in errors]
    facts += [f"  tests: {_clip(line)}" for line in tests if line not in errors]
    return tuple(facts)


@lru_cache(maxsize=1 << 16)
def _paths(text: str) -> tuple[str, ...]:
    return tuple(PATH_RE.findall(text))


def facts(window: Sequence[Message], action_format: str | None = None) -> tuple[list[str], list[str]]:
    """(chronological fact lines, file paths in order of first mention)."""
    tool_mode = uses_tool_calls(window)
    lines: list[str] = []
    paths: dict[str, None] = {}
    for message in window:
        text = text_of(message)
        paths.update(dict.fromkeys(_paths(text)))
        if is_generated_block(message):
            lines.append(f"earlier: {_clip(text.split(chr(10), 2)[-1])}")
        elif message.get("role") == "assistant":
            for command in commands_of(message, action_format):
                paths.update(dict.fromkeys(_paths(command)))
                lines.append(f"$ {_clip(command.splitlines()[0] if command else '')}")
        elif is_observation(message, tool_mode):
            lines.extend(_observation_facts(text))
    return lines, list(paths)


def digest_text(window: Sequence[Message], allowance: int, action_format: str | None = None) -> str:
    lines, paths = facts(window, action_format)
    budget = max(MIN_ALLOWANCE_TOKENS, allowance)
    header = "Extractive digest of earlier steps (commands, return codes, errors, test results):"
    files = f"Files seen: {', '.join(paths)}" if paths else ""
    used = count_text(header) + count_text(files)
    if used > budget:
        files, used = "", count_text(header)
    chosen: list[str] = []
    for line in reversed(lines):
        cost = count_text(line) + 1
        if used + cost > budget:
            break
        chosen.append(line)
        used += cost
    return "\n".join(part for part in (header, files, *reversed(chosen)) if part)


def digest_window(window: Sequence[Message], target: int, context: StageContext) -> Rewrite:
    message = summary_message(digest_text(window, target, context.action_format), context.dump_path)
    tokens = count_message(message)
    return Rewrite([message], removed=len(window), summary_tokens=tokens, fallback="TR" if tokens > target else None)
