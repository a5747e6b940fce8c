"""Retrieval versus execution: what kind of work each agent command does.

Retrieval reads state back (cat, head, grep, ls, ``sed -n``, ``git diff`` ...): after a
compression the agent often has to do it again, which is the hidden reacquisition cost.
Execution changes or runs something (editing, running, installing, testing). A command line
is retrieval only when every simple command in it is a read and nothing is redirected into a
file; anything else is execution. ``cd``, ``echo`` and similar glue count as neither on their
own, so ``cd src && ls`` is retrieval.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import lru_cache

from ctxpolicy.policies import actions

SEPARATOR = "\x00"  # joins message texts so one regex pass finds every block, none across messages
SPLIT = re.compile(r"&&|\|\||;|\||\n")
WRITE_REDIRECT = re.compile(r"(?<![0-9&])>{1,2}(?!\s*/dev/null)|\btee\b")

READERS = {
    "cat",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "find",
    "ls",
    "tree",
    "wc",
    "less",
    "more",
    "nl",
    "file",
    "stat",
    "du",
    "awk",
    "diff",
    "cmp",
    "which",
    "type",
    "readlink",
    "realpath",
    "basename",
    "dirname",
    "sort",
    "uniq",
    "cut",
    "od",
    "xxd",
    "hexdump",
    "strings",
    "locate",
    "whereis",
    "env",
    "printenv",
    "pwd",
    "column",
}
GIT_READERS = {"show", "diff", "log", "status", "grep", "blame", "ls-files", "branch", "rev-parse"}
NEUTRAL = {"cd", "echo", "true", "printf", "export", "set", "sleep", "clear"}


def commands_of(message: dict, action_format: str | None = None) -> list[str]:
    """The shell commands in one assistant message: its fenced blocks in the run's action format
    (``policies.actions``; None: ``mswea_bash_command``) and its tool-call arguments."""
    content = message.get("content")
    found = actions.fenced_commands(content, action_format) if isinstance(content, str) else []
    for call in message.get("tool_calls") or []:
        arguments = (call.get("function") or {}).get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                continue
        if isinstance(arguments, dict) and isinstance(arguments.get("command"), str):
            found.append(arguments["command"])
    return [c.strip() for c in found if c.strip()]


@lru_cache(maxsize=65536)
def is_retrieval(command: str) -> bool:
    if WRITE_REDIRECT.search(command) or "<<" in command:
        return False
    kinds = [_kind(part) for part in SPLIT.split(command) if part.strip()]
    kinds = [k for k in kinds if k != "neutral"]
    return bool(kinds) and all(k == "read" for k in kinds)


def _kind(simple: str) -> str:
    words = simple.split()  # only the program and its flags matter, so quoting can be ignored
    while words and "=" in words[0] and not words[0].startswith("-"):
        words = words[1:]  # leading VAR=value assignments
    if not words:
        return "neutral"
    head = words[0].rsplit("/", 1)[-1]
    if head in NEUTRAL:
        return "neutral"
    if head == "sed":
        return "read" if "-n" in words and not any(w.startswith("-i") or w == "--in-place" for w in words) else "exec"
    if head == "git":
        sub = next((w for w in words[1:] if not w.startswith("-")), "")
        return "read" if sub in GIT_READERS else "exec"
    if head == "find":
        return "exec" if any(w in ("-delete", "-exec", "-execdir") for w in words) else "read"
    return "read" if head in READERS else "exec"


def count_commands(messages: list[dict], action_format: str | None = None) -> tuple[int, int]:
    """(retrieval, execution) command counts over assistant messages, in the run's action format."""
    assistant = [m for m in messages if m.get("role") == "assistant"]
    texts = SEPARATOR.join(m["content"] for m in assistant if isinstance(m.get("content"), str))
    labels = actions.labels_of(action_format)  # actions.fenced_commands, without a match object per block
    commands = [body.strip() for label, body in actions.FENCED_BLOCK.findall(texts) if label.strip().lower() in labels]
    commands += [c for m in assistant if m.get("tool_calls") for c in commands_of({"tool_calls": m["tool_calls"]})]
    commands = [c for c in commands if c]
    retrieval = sum(map(is_retrieval, commands))
    return retrieval, len(commands) - retrieval


def reply_times(longest_prompt: list[str], reply_ids: list[str | None]) -> dict[str, int]:
    """How many times each message was an agent call's reply, for those given more than once.

    The message store holds one line per distinct content, so a reply repeated word for word is
    stored once: the calls tell how often it was given. Where a call names its reply
    (``reply_id``, the proxy) that is exact; else a message's count within the run's longest
    agent prompt (all of a full-context run's replies but the last; a lower bound where a
    policy removed earlier copies)."""
    times = Counter(longest_prompt)
    named = Counter(reply_ids)
    named.pop(None, None)
    for mid, n in named.items():
        times[mid] = max(times[mid], n)
    return {mid: n for mid, n in times.items() if n > 1}


def count_repeats(
    assistant: dict[str, dict], times: dict[str, int], action_format: str | None = None
) -> tuple[int, int]:
    """(retrieval, execution) commands of the replies given more than once (``reply_times``),
    each time after the first: what ``count_commands`` over the distinct messages leaves out."""
    retrieval = execution = 0
    for mid, n in times.items():
        message = assistant.get(mid)
        if message is None:
            continue
        for command in commands_of(message, action_format):
            if is_retrieval(command):
                retrieval += n - 1
            else:
                execution += n - 1
    return retrieval, execution
