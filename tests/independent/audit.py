"""The compression audit's reacquisition side written a second time, in plain Python over one
run's records (docs/analysis.md, "Reacquisition"; the study's 004 on reacquisition cost), for
the independent counts of the ``retention`` and ``reacquisition`` targets.

Per *compression step* (an agent call whose ``events`` list is not empty): the history before it
(the previous agent prompt and what the agent added since) and after it (the call's prompt);
the outputs it removed (observations of the history before, past the protected prefix, without
a policy marker, that the history after no longer holds), their commands and the paths both
name; and, over the window of replies from the step's own reply up to the next step, the
commands that read back a removed command or path. Only ``ctxpolicy.rundir``'s readers are used.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.rundir import TRAJECTORY_JSON, read_calls, read_json, read_message_store, read_run_json

from independent import shell

MARKERS = ("[ctxpolicy:summary]", "[ctxpolicy:cleared]", "[ctxpolicy:compacted]")  # how a policy's messages begin
EXTENSIONS = set(
    "py pyi js jsx ts tsx c h cc cpp hpp rs go java kt rb php sh bash toml yaml yml json cfg ini txt md rst "
    "html css sql lock xml csv diff patch log mk cmake ipynb r jl lua swift scala".split()
)
NAME = r"[\w.+-]"  # the characters of one path segment


@dataclass(frozen=True)
class StepCount:
    """One compression step's reacquisition numbers (the audit's per-step columns)."""

    task: str
    step: int
    reacq_commands: int
    retrieval_after: int
    commands_after: int
    steps_after: int
    steps_to_reacq: int | None
    removed_outputs: int


def text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def paths(value: str) -> set[str]:
    """The file paths a text names: a run of segment characters with ``/`` between segments (an
    optional leading ``/``, ``~/``, ``./`` or ``../``), or a bare file name with a known
    extension; fence lines and URLs are no text. Trailing ``/`` and ``.`` are cut, leading ``./``
    too; runs of digits and punctuation (dates, versions) are no path."""
    value = re.sub(r"(?m)^```[\w-]*\s*$", " ", value.replace("\\", "/"))
    value = re.sub(r"(?i)\b[a-z][a-z0-9+.-]*://\S+", " ", value)
    found = set()
    for match in re.finditer(rf"(?<![\w.:/-])((?:~/|\.\.?/|/)?(?:{NAME}+/)+{NAME}*[\w+-])", value):
        found.add(match.group(1))
    for match in re.finditer(r"(?<![\w./-])([\w-][\w.-]*\.([A-Za-z]+))(?![\w-])", value):
        if match.group(2).lower() in EXTENSIONS:
            found.add(match.group(1))
    out = set()
    for p in found:
        p = p.rstrip("/.")
        while p.startswith("./"):
            p = p[2:]
        if p and "//" not in p and p.strip("/") and not re.fullmatch(r"[\d/.:-]+", p) and ("/" in p or "." in p):
            out.add(p)
    return out


def key(command: str) -> str:
    """A command compared blanks aside (backslashes as ``/``)."""
    return " ".join(command.replace("\\", "/").split())


def same_path(a: str, b: str) -> bool:
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _appended(previous: list[str], prompt: list[str], store: dict) -> list[str]:
    """What the agent added since the previous prompt (the prompt's new tail, written by no policy)."""
    if prompt[: len(previous)] == previous:
        return prompt[len(previous) :]
    tail = []
    for mid in reversed(prompt):
        if mid in previous or text(store[mid]).startswith(MARKERS):
            break
        tail.append(mid)
    return tail[::-1]


def _producer(before: list[dict], index: int, tool_mode: bool, fmt: str) -> list[str]:
    """The command behind the observation at ``index``: the assistant message before it (in
    tool-calling mode, the tool call whose id it answers)."""
    call_id = before[index].get("tool_call_id")
    for message in reversed(before[:index]):
        if message.get("role") != "assistant":
            continue
        if tool_mode and call_id:
            for call in message.get("tool_calls") or []:
                if call.get("id") == call_id:
                    return shell.commands({"role": "assistant", "tool_calls": [call]}, fmt)
            continue
        return shell.commands(message, fmt)
    return []


def count_run(run_dir: str | Path) -> list[StepCount]:
    """The reacquisition numbers of every compression step of one run."""
    run_dir = Path(run_dir)
    record = read_run_json(run_dir)
    settings = record.get("settings") or {}
    fmt = settings.get("action_format") or shell.DEFAULT_FORMAT
    task = str(record["identity"]["task_id"])
    store = {mid: line["message"] for mid, line in read_message_store(run_dir).items()}
    agent = [c for c in read_calls(run_dir) if c["kind"] == "agent"]

    previous: list[str] = []
    replies: list[tuple[int, dict]] = []  # (the step that wrote it, the reply)
    steps = []  # (step, history before, history after)
    for k, call in enumerate(agent):
        prompt = call["message_ids"]
        added = _appended(previous, prompt, store)
        if k:
            replies += [(agent[k - 1]["step"], store[m]) for m in added if store[m].get("role") == "assistant"]
        if call.get("events"):
            steps.append((call["step"], previous + added, list(prompt)))
        previous = list(prompt)
    ok_steps = [c["step"] for c in agent if c.get("status", "ok") == "ok"]
    trajectory = _trajectory(run_dir)
    if trajectory is not None and len(trajectory) == len(ok_steps):
        replies = list(zip(ok_steps, trajectory))

    counts = []
    for number, (step, before_ids, after_ids) in enumerate(steps):
        until = steps[number + 1][0] if number + 1 < len(steps) else None
        before = [store[m] for m in before_ids]
        kept = set(after_ids)
        tool_mode = any(m.get("role") == "tool" or m.get("tool_calls") for m in before)
        prefix = settings.get("protected_prefix")
        if prefix is None:
            users = [i for i, m in enumerate(before) if m.get("role") == "user"]
            prefix = users[0] + 1 if users else len(before)
        commands, named = set(), set()
        for i, (mid, message) in enumerate(zip(before_ids, before)):
            observation = message.get("role") == "tool" or (not tool_mode and message.get("role") == "user")
            if mid in kept or not observation or text(message).startswith(MARKERS) or (not tool_mode and i < prefix):
                continue
            produced = _producer(before, i, tool_mode, fmt)
            commands |= {key(c) for c in produced}
            named |= paths(text(message))
            for c in produced:
                named |= paths(c)
        window = [(s, m) for s, m in replies if s >= step and (until is None or s < until)]
        total = reads = back = 0
        first = None
        for s, message in window:
            for command in shell.commands(message, fmt):
                total += 1
                if not shell.is_read(command):
                    continue
                reads += 1
                if key(command) in commands or any(same_path(p, q) for p in paths(command) for q in named):
                    back += 1
                    first = s - step + 1 if first is None else first
        counts.append(
            StepCount(
                task=task,
                step=step,
                reacq_commands=back,
                retrieval_after=reads,
                commands_after=total,
                steps_after=sum(1 for c in agent if c["step"] >= step and (until is None or c["step"] < until)),
                steps_to_reacq=first,
                removed_outputs=len(commands) + len(named),
            )
        )
    return counts


def _trajectory(run_dir: Path) -> list[dict] | None:
    """The assistant messages of ``trajectory.json`` (the agent's whole history), if readable."""
    try:
        messages = read_json(run_dir / TRAJECTORY_JSON).get("messages")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(messages, list):
        return None
    return [m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"]
