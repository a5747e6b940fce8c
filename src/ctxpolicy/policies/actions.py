"""How an agent writes its actions: the one owner of the action formats.

A run records its format in ``run.json`` ``settings.action_format``; every room that finds or
writes commands (CC, CT, DIGEST, the retrieval/execution split, the audit, the harness's parser)
takes it from there through this module:

* ``mswea_bash_command``: a fenced block labelled ``mswea_bash_command`` (mini-swe-agent 2.x text
  mode, our own harness);
* ``bash``: a fenced block labelled ``bash`` or ``sh``, or not labelled at all (mini-swe-agent 1.x,
  SWE-agent's text mode);
* ``tool_calls``: the assistant's ``tool_calls`` (mini-swe-agent 2.x tool calling, SWE-agent's
  function calling, OpenAI chat logs).

A record without the field is one of ours from before it existed: ``mswea_bash_command``
(``DEFAULT``). Where the format is not given (``None``), ``detect`` reads it from the messages.
In ``tool_calls`` runs the fences are still read, so text written by a policy is never missed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ctxpolicy.errors import CtxpolicyError

MSWEA = "mswea_bash_command"
BASH = "bash"
TOOL_CALLS = "tool_calls"
ACTION_FORMATS = (MSWEA, BASH, TOOL_CALLS)
DEFAULT = MSWEA
"""The format of a run record that does not name one (every run before the field existed)."""

# A fenced block: the opening fence with its label, the body, the closing fence. Blocks are matched
# in order, so a closing fence is never taken for the opening of the next block; ``\x00`` (which
# joins message texts for one pass over many) is never crossed. The body is the shortest text up
# to the first three backticks (as ``([^\x00]*?)```"`` finds it), matched a run of other
# characters at a time rather than trying the fence after every character: a fifth of the
# aggregate's command counting.
FENCED_BLOCK = re.compile(r"```([^\n`\x00]*)\n((?:[^`\x00]++|`(?!``))*+)```")
LABELS = {MSWEA: ("mswea_bash_command",), BASH: ("bash", "sh", "")}
"""The fence labels each text format's commands are written under (``tool_calls`` and None read
``mswea_bash_command``: what our own policies write)."""


class ActionFormatError(CtxpolicyError, ValueError):
    """An action format that is none of ``ACTION_FORMATS``."""


def check_format(action_format: str | None, where: str = "action_format") -> str | None:
    """``action_format`` itself when it is a known format or None; else an error naming it."""
    if action_format is not None and action_format not in ACTION_FORMATS:
        raise ActionFormatError(f"{where}: {action_format!r} is no action format; known: {', '.join(ACTION_FORMATS)}")
    return action_format


def labels_of(action_format: str | None) -> tuple[str, ...]:
    check_format(action_format)
    return LABELS[MSWEA if action_format in (None, TOOL_CALLS) else action_format]


def fenced_actions(text: str, action_format: str | None) -> list[tuple[str, str, re.Match]]:
    """The fenced blocks of ``text`` in the format's fences, in order: (label as written, command
    with its surrounding newlines removed, the match)."""
    labels = labels_of(action_format)
    found = []
    for match in FENCED_BLOCK.finditer(text):
        label = match.group(1)
        if label.strip().lower() in labels:
            found.append((label.strip(), match.group(2).strip("\n"), match))
    return found


def fenced_commands(text: str, action_format: str | None) -> list[str]:
    """The commands of the fenced blocks of ``text`` in the format's fence, in order."""
    return [command for _, command, _ in fenced_actions(text, action_format)]


def without_actions(text: str, action_format: str | None) -> str:
    """``text`` with its action blocks removed (the thought around them kept)."""
    pieces, position = [], 0
    for _, _, match in fenced_actions(text, action_format):
        pieces.append(text[position : match.start()])
        position = match.end()
    return "".join(pieces) + text[position:]


def fence(command: str, label: str = MSWEA) -> str:
    """A command written as a fenced block with ``label`` (the run's own fence)."""
    return f"```{label}\n{command}\n```"


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def detect(messages: Iterable[Mapping[str, Any]]) -> str | None:
    """The action format the assistant messages use; None when no action is recognised.

    Tool calls win over fences; a ``mswea_bash_command`` fence over a ``bash`` one (an agent that
    writes the first may show the second in its thoughts, never the other way round)."""
    found: set[str] = set()
    for message in messages:
        if message.get("role") != "assistant":
            continue
        if message.get("tool_calls"):
            return TOOL_CALLS
        text = _text(message)
        if "```" not in text:
            continue
        for name in (MSWEA, BASH):
            if fenced_actions(text, name):
                found.add(name)
                break
    return MSWEA if MSWEA in found else BASH if BASH in found else None


def of_record(record: Mapping[str, Any]) -> str:
    """The format a ``run.json`` records (``DEFAULT`` when it names none)."""
    settings = record.get("settings") if isinstance(record, Mapping) else None
    value = settings.get("action_format") if isinstance(settings, Mapping) else None
    return check_format(value, "run.json settings.action_format") or DEFAULT


def no_action_warning(where: object, calls: int, action_format: str | None) -> str:
    """The one wording of the warning that a run's commands were not found (never a silent zero)."""
    return (
        f"warning: {where}: no action recognised in {calls} agent call(s) (action format "
        f"{action_format or 'as recorded'}); its command counts and reacquisition are not measured"
    )


def of_mode(mode: str) -> str:
    """The action format our own harness writes in a mode (``RunSettings.mode``: text or tool)."""
    return TOOL_CALLS if mode == "tool" else MSWEA
