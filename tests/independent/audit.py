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

import functools
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
    reacq_of_lost: int  # read-backs of a path or command the step lost (neither kept nor summarised)
    constraints_at_risk: int  # rules in the messages the step changed or removed
    constraints_retained: int  # ... restated after it (kept), or by the summary it wrote (preserved)
    anchors_at_risk: int  # the anchors of the messages the step changed or removed
    anchors_kept: int  # ... still stated after it outside its new summaries
    anchors_summarised: int  # ... stated only by a summary it wrote


def text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


@functools.lru_cache(maxsize=65536)
def paths(value: str) -> frozenset[str]:
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
    return frozenset(out)


def key(command: str) -> str:
    """A command compared blanks aside (backslashes as ``/``)."""
    return " ".join(command.replace("\\", "/").split())


@functools.lru_cache(maxsize=65536)
def blanks(value: str) -> str:
    """The form anchors are compared in: backslashes as ``/``, runs of spaces and tabs as one."""
    return re.sub(r"[ \t]+", " ", value.replace("\\", "/"))


def mentions(value: str, haystack: str) -> bool:
    """``haystack`` states ``value`` verbatim, as a whole word at an end that is a word character."""
    word = re.compile(r"\w")
    at = haystack.find(value)
    while at >= 0:
        end = at + len(value)
        starts_clear = not word.match(value[0]) or at == 0 or not word.match(haystack[at - 1])
        ends_clear = not word.match(value[-1]) or end == len(haystack) or not word.match(haystack[end])
        if starts_clear and ends_clear:
            return True
        at = haystack.find(value, at + 1)
    return False


# The anchor kinds of docs/analysis.md's table, each pattern transcribed from its row (the
# partition into kept / summarised / lost and the rates are what is counted here).
DEFINED = re.compile(r"\b(?:def|class|function|func|fn|struct|enum|trait|interface|impl)\s+([A-Za-z_]\w*)")
DOTTED = re.compile(r"(?<![\w./\\-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/\\-])")
EXCEPTION_TYPE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Warning|Interrupt|Exit))\b")
ERROR_WORDS = re.compile(
    r"\b[A-Z]\w*(?:Error|Exception)\b|\berror\b|\bfatal\b|\bFAILED\b|\bTraceback\b|\bpanicked\b|\bSegmentation fault\b",
    re.IGNORECASE,
)
TEST_ID = re.compile(r"(?<![\w./\\-])((?:[\w./\\-]+::)?(?:[A-Za-z_]\w*::)*test_\w+(?:\[[^\]\s]*\])?)(?!\w|\.\w)")
COUNT_LINE = re.compile(r"\b(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")
NODE_STATUS = re.compile(r"((?:[\w./-]+::)+\w+(?:\[[^\]\s]*\])?) (PASSED|FAILED|ERROR|SKIPPED)\b")
LINE_NO = re.compile(r"\b(?:line|lines|ln|L)\s*(\d+)\b|(?<=[\w)])[:](\d+)(?::\d+)?\b", re.IGNORECASE)
ID_NO = re.compile(r"(?:#|\bid[=: ]\s*|\bpid[=: ]\s*|\bissue\s+#?)(\d{2,})\b", re.IGNORECASE)
HEX = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)([0-9a-f]{7,40})\b")


@functools.lru_cache(maxsize=65536)
def text_anchors(value: str) -> frozenset[tuple[str, str]]:
    """The (kind, value) anchors of one message's text (commands aside)."""
    found = {("path", p) for p in paths(value)}
    no_urls = re.sub(r"(?i)\b[a-z][a-z0-9+.-]*://\S+", " ", value)
    found |= {("symbol", n) for n in DEFINED.findall(no_urls)}
    for name in DOTTED.findall(no_urls):
        parts = name.split(".")
        if parts[-1].lower() not in EXTENSIONS and min(map(len, parts)) > 1:
            found.add(("symbol", name))
    for line in re.sub(r"(?m)^```[\w-]*\s*$", "", value).splitlines():
        if ERROR_WORDS.search(line):
            line = blanks(line).strip()
            if len(line) >= 4:
                found.add(("error", line[:200]))
    found |= {("exception", e) for e in EXCEPTION_TYPE.findall(value)}
    found |= {("test", blanks(t)) for t in TEST_ID.findall(value)}
    found |= {("test_result", f"{n} {w}") for n, w in COUNT_LINE.findall(value)}
    found |= {("test_result", f"{blanks(n)} {st}") for n, st in NODE_STATUS.findall(value)}
    numbers = {a or b for a, b in LINE_NO.findall(value)} | set(ID_NO.findall(value))
    numbers |= {h.lower() for h in HEX.findall(value)}
    found |= {("number", n) for n in numbers if n}
    return frozenset(found)


def anchors(message: dict, fmt: str) -> set[tuple[str, str]]:
    found = set(text_anchors(text(message)))
    found |= {("command", blanks(c).strip()) for c in shell.commands(message, fmt)}
    return found


RULE_WORDS = re.compile(r"\b(?:must|mustn't|never|do not|don't|always|shall not|may not)\b", re.IGNORECASE)


def rules(message: dict) -> list[str]:
    """A message's constraints (docs/analysis.md): none in the agent's own messages; else each
    sentence (split after . ! ? and at line breaks, code blocks left out, blanks squeezed) of at
    least three words and at most 400 characters that holds a rule word or begins with "Only"."""
    if message.get("role") == "assistant":
        return []
    return _rules(text(message))


@functools.lru_cache(maxsize=65536)
def _rules(value: str) -> list[str]:
    body = re.sub(r"```.*?(?:```|\Z)", "\n", value, flags=re.DOTALL)
    found = []
    for part in re.split(r"(?<=[.!?])\s+|\n+", body):
        sentence = " ".join(part.split())
        if not sentence or len(sentence.split()) < 3 or len(sentence) > 400:
            continue
        if RULE_WORDS.search(sentence) or re.match(r"(?:[-*\u2022]\s*)?only\b", sentence, re.IGNORECASE):
            found.append(sentence)
    return found


def squeezed(value: str) -> str:
    return " ".join(value.split()).lower()


def constraint_counts(
    before_ids: list[str], after_ids: list[str], store: dict, texts: tuple[str, str]
) -> tuple[int, int]:
    """(rules at risk, rules retained) of one step: a rule of a changed or removed message (each
    once) is retained when a message after the step that is not a new summary restates it word
    for word (case and blanks aside), or, when the step wrote a summary, the summary does (the
    lexical judge); with no summary it is lost."""
    after = set(after_ids)
    at_risk = list(dict.fromkeys(r for m in before_ids if m not in after for r in rules(store[m])))
    kept, summary = (squeezed(t) for t in texts)
    retained = sum(squeezed(r) in kept or (bool(summary) and squeezed(r) in summary) for r in at_risk)
    return len(at_risk), retained


def _texts(after_ids: list[str], earlier: set[str], store: dict, fmt: str) -> tuple[str, str]:
    """The blank-normalised text after a step outside its new summaries, and of them."""
    kept, summary = [], []
    for mid in after_ids:
        message = store[mid]
        new_summary = mid not in earlier and text(message).startswith(MARKERS[0])
        parts = [blanks(text(message))]
        if message.get("tool_calls"):
            call = {"role": "assistant", "tool_calls": message["tool_calls"]}
            parts += [blanks(c) for c in shell.commands(call, fmt)]
        (summary if new_summary else kept).extend(parts)
    return "\n".join(kept), "\n".join(summary)


def partition(
    before_ids: list[str], after_ids: list[str], store: dict, fmt: str, texts: tuple[str, str]
) -> tuple[set, set, set]:
    """(at risk, kept, summarised) anchors of one step: those of the messages it changed or
    removed; of them, those a message after it that is not a new summary states (kept), and of
    the rest those its new summaries state (summarised). The others are lost."""
    after = set(after_ids)
    at_risk = {a for m in before_ids if m not in after for a in anchors(store[m], fmt)}
    kept_text, summary_text = texts
    kept = {a for a in at_risk if mentions(a[1], kept_text)}
    summarised = {a for a in at_risk - kept if mentions(a[1], summary_text)}
    return at_risk, kept, summarised


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
        texts = _texts(after_ids, set(before_ids), store, fmt)
        at_risk, kept_anchors, summarised = partition(before_ids, after_ids, store, fmt, texts)
        lost = at_risk - kept_anchors - summarised
        lost_paths = {v for k, v in lost if k == "path"}
        lost_commands = {v for k, v in lost if k == "command"}
        at_risk_rules, retained_rules = constraint_counts(before_ids, after_ids, store, texts)
        lost_keys = {key(c) for c in lost_commands}
        total = reads = back = of_lost = 0
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
                    of_lost += key(command) in lost_keys or any(
                        same_path(p, q) for p in paths(command) for q in lost_paths
                    )
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
                reacq_of_lost=of_lost,
                constraints_at_risk=at_risk_rules,
                constraints_retained=retained_rules,
                anchors_at_risk=len(at_risk),
                anchors_kept=len(kept_anchors),
                anchors_summarised=len(summarised),
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
