"""The agent's commands read a second time, for the independent counts: the commands of an
assistant message in the run's recorded action format, and whether a command line reads state
back (retrieval) or changes or runs something (execution).

Written from the definitions (docs/metrics.md and docs/analysis.md, "Reacquisition"; the study's
004 decomposition of tool calls), not from ``ctxpolicy.policies.actions`` or
``ctxpolicy.metrics.commands``: fences are found by scanning, not by their regular expression.
"""

from __future__ import annotations

import json
import re

DEFAULT_FORMAT = "mswea_bash_command"  # a run.json without settings.action_format
FENCE = "```"
LABELS = {  # the fence labels of each action format (tool_calls runs still read our own fences)
    "mswea_bash_command": {"mswea_bash_command"},
    "bash": {"bash", "sh", ""},
    "tool_calls": {"mswea_bash_command"},
}
READS = set(
    "cat head tail grep egrep fgrep rg ag find ls tree wc less more nl file stat du awk diff cmp which "
    "type readlink realpath basename dirname sort uniq cut od xxd hexdump strings locate whereis env "
    "printenv pwd column".split()
)
GIT_READS = set("show diff log status grep blame ls-files branch rev-parse".split())
GLUE = set("cd echo true printf export set sleep clear".split())  # neither read nor execution alone
OPERATORS = ("&&", "||", ";", "|", "\n")


def fenced(text: str, labels: set[str]) -> list[str]:
    """The bodies of the fenced blocks of ``text`` whose label (the rest of the opening fence's
    line) is one of ``labels``, in order; a block ends at the next fence."""
    out, at = [], 0
    while (start := text.find(FENCE, at)) >= 0:
        line_end = text.find("\n", start + len(FENCE))
        if line_end < 0:
            break
        label = text[start + len(FENCE) : line_end]
        if FENCE[0] in label:  # a backtick in the label: no opening fence here
            at = start + 1
            continue
        close = text.find(FENCE, line_end + 1)
        if close < 0:
            break
        if label.strip().lower() in labels:
            out.append(text[line_end + 1 : close].strip("\n"))
        at = close + len(FENCE)
    return out


def commands(message: dict, action_format: str) -> list[str]:
    """The shell commands of one message: none unless it is the assistant's; its fences in the
    format's labels, then the ``command`` argument of each tool call; blank ones dropped."""
    if message.get("role") != "assistant":
        return []
    content = message.get("content")
    found = fenced(content, LABELS[action_format]) if isinstance(content, str) else []
    for call in message.get("tool_calls") or []:
        arguments = (call.get("function") or {}).get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                continue
        if isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
            found.append(arguments["command"])
    return [c.strip() for c in found if c.strip()]


def writes_a_file(command: str) -> bool:
    """Output redirected into a file: a ``>`` that follows no digit or ``&`` (the redirect of
    another stream) and is not followed by /dev/null (so ``>>`` always writes: its first ``>`` is
    followed by the second); ``tee`` as a word; a here-document (``<<``)."""
    if "<<" in command or re.search(r"\btee\b", command):
        return True
    for i, char in enumerate(command):
        if char == ">" and not (i and command[i - 1] in "0123456789&"):
            if not command[i + 1 :].lstrip().startswith("/dev/null"):
                return True
    return False


def simple_commands(command: str) -> list[str]:
    parts = [command]
    for operator in OPERATORS:
        parts = [piece for part in parts for piece in part.split(operator)]
    return [p for p in parts if p.strip()]


def kind(simple: str) -> str:
    """``read``, ``exec`` or ``glue`` for one simple command (program and flags only)."""
    words = simple.split()
    while words and "=" in words[0] and not words[0].startswith("-"):
        words.pop(0)  # VAR=value before the program
    if not words:
        return "glue"
    program = words[0].split("/")[-1]
    if program in GLUE:
        return "glue"
    if program == "sed":
        in_place = any(w.startswith("-i") or w == "--in-place" for w in words)
        return "read" if "-n" in words and not in_place else "exec"
    if program == "git":
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        return "read" if sub in GIT_READS else "exec"
    if program == "find" and any(w in ("-delete", "-exec", "-execdir") for w in words):
        return "exec"
    return "read" if program in READS else "exec"


def is_read(command: str) -> bool:
    """Retrieval: nothing written to a file, and every simple command that is not glue reads
    (at least one does)."""
    if writes_a_file(command):
        return False
    kinds = [k for k in map(kind, simple_commands(command)) if k != "glue"]
    return bool(kinds) and set(kinds) == {"read"}
