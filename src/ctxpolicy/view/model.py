"""What a trajectory page shows, computed from a loaded run (pure: no files, no HTML).

A page embeds each distinct message once (``messages``: role, text, local tokens) and every call's
prompt as a list of codes into it. What a compression step changed is read from the prompts
themselves: the working context before step k's policy ran is the previous agent prompt plus the
messages added since (docs/architecture.md, ``PolicySession``), so a sequence diff of the two
agent prompts names the messages removed, the ones cleared (each paired with its placeholder)
and the span each summary replaced; the recorded events give the counts, the first changed index
and the unchanged prefix. The diff is our own linear alignment (``align``), not ``difflib``:
policies only drop or replace messages, never reorder them, and difflib's quadratic matcher took
seconds on a 250-step run with events on every step.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxpolicy.metrics.commands import commands_of
from ctxpolicy.metrics.cost import DEFAULT_BLOCK
from ctxpolicy.metrics.records import agent_time
from ctxpolicy.policies.digest import RETURNCODE_RE
from ctxpolicy.policies.history import CLEARED_MARKER, COMPACTED_MARKER, SUMMARY_MARKER, marker_of, text_of
from ctxpolicy.tokens import count_message
from ctxpolicy.view.costs import call_cached
from ctxpolicy.view.source import LoadedRun, ViewInputError

PREVIEW_CHARS = 160  # a command or text shown inline in the page's HTML, the rest on click


class MessageTable:
    """Each distinct message once, with a small integer code; equal messages share a code.

    The run-record reader hands the same object for a message every prompt repeats, so most
    look-ups are by object; a distinct object is compared by its canonical JSON once."""

    def __init__(self) -> None:
        self._by_object: dict[int, int] = {}
        self._by_json: dict[str, int] = {}
        self._keep: list[dict] = []  # the objects behind _by_object stay alive, so ids are not reused
        self.rows: list[dict] = []
        self.messages: list[dict] = []  # the message behind each row (its commands: tool calls included)

    def code(self, message: dict) -> int:
        known = self._by_object.get(id(message))
        if known is not None:
            return known
        key = json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        code = self._by_json.get(key)
        if code is None:
            code = len(self.rows)
            self._by_json[key] = code
            self.rows.append(_message_row(message))
            self.messages.append(message)
        self._by_object[id(message)] = code
        self._keep.append(message)
        return code

    def tokens(self) -> list[int]:
        return [row["tokens"] for row in self.rows]


def _message_row(message: dict) -> dict:
    text = text_of(message)
    calls = message.get("tool_calls")
    if calls:
        text += ("\n" if text else "") + json.dumps(calls, ensure_ascii=False, indent=1, default=str)
    return {
        "role": str(message.get("role", "?")),
        "text": text,
        "tokens": count_message(message),
        "marker": marker_of(message),
    }


@dataclass
class StepChanges:
    """What one step's policy changed in the working context, as codes into the message table."""

    removed: list[int] = field(default_factory=list)
    cleared: list[tuple[int, int]] = field(default_factory=list)  # (original, placeholder)
    summaries: list[tuple[int, list[int]]] = field(default_factory=list)  # (summary, the span it replaced)

    def as_dict(self) -> dict:
        return {
            "removed": self.removed,
            "cleared": [list(pair) for pair in self.cleared],
            "summaries": [{"summary": s, "replaced": span} for s, span in self.summaries],
        }


def step_changes(before: Sequence[int], after: Sequence[int], table: MessageTable) -> StepChanges:
    """The difference between the context before a step's policy ran (its head: the previous
    agent prompt) and what it sent; messages appended since then are no change."""
    changes = StepChanges()
    for op, i1, i2, j1, j2 in align(before, after):
        if op == "delete":
            changes.removed += before[i1:i2]
        elif op == "replace":
            old, new = list(before[i1:i2]), list(after[j1:j2])
            markers = [table.rows[c]["marker"] for c in new]
            if all(m == CLEARED_MARKER for m in markers) and len(old) == len(new):
                changes.cleared += list(zip(old, new))
            elif any(m in (SUMMARY_MARKER, COMPACTED_MARKER) for m in markers):
                blocks = [c for c, m in zip(new, markers) if m in (SUMMARY_MARKER, COMPACTED_MARKER)]
                changes.summaries.append((blocks[0], old))
                changes.summaries += [(c, []) for c in blocks[1:]]
            else:
                changes.removed += old
    return changes


def align(before: Sequence[int], after: Sequence[int]) -> list[tuple[str, int, int, int, int]]:
    """Opcodes (``equal``, ``delete``, ``replace``, ``insert``; as difflib's) from ``before`` to
    ``after`` when ``after`` keeps the messages it keeps in their order: a message of ``after``
    found later in ``before`` ends a deletion there, one not found starts a replacement that runs
    to the next message found. Linear in the lengths (a position index of ``before``)."""
    positions: dict[int, list[int]] = {}
    for k, code in enumerate(before):
        positions.setdefault(code, []).append(k)

    def next_in_before(code: int, start: int) -> int | None:
        found = positions.get(code)
        if not found:
            return None
        k = bisect.bisect_left(found, start)
        return found[k] if k < len(found) else None

    ops, i, j = [], 0, 0
    while i < len(before) and j < len(after):
        if before[i] == after[j]:
            start_i, start_j = i, j
            while i < len(before) and j < len(after) and before[i] == after[j]:
                i, j = i + 1, j + 1
            ops.append(("equal", start_i, i, start_j, j))
            continue
        k = next_in_before(after[j], i)
        if k is not None:
            ops.append(("delete", i, k, j, j))
            i = k
            continue
        j2 = j + 1
        while j2 < len(after) and next_in_before(after[j2], i) is None:
            j2 += 1
        k = len(before) if j2 == len(after) else next_in_before(after[j2], i)
        if k == i:
            ops.append(("insert", i, i, j, j2))
        else:
            ops.append(("replace", i, k, j, j2))
        i, j = k, j2
    if i < len(before):
        ops.append(("delete", i, len(before), j, j))
    if j < len(after):
        ops.append(("insert", i, i, j, len(after)))
    return ops


def _returncode(message: dict | None) -> int | None:
    if message is None:
        return None
    match = RETURNCODE_RE.search(message["text"])
    return int(match[1]) if match else None


def _actions(
    agent_codes: list[list[int]],
    table: MessageTable,
    named: list[int | None],
    ok: list[bool],
    history: list[int] | None,
) -> list[tuple[int | None, int | None]]:
    """Each agent call's answer and the observation that followed, walked call by call (a reply
    repeated word for word, which the message store and the table hold once, is each call's own).

    The answer is, in order of preference: the one the call's line names (``named``, proxy
    records); the i-th assistant message of the agent's whole history when it holds one per
    answered call (``history``, harness runs); else the first assistant message the next prompt
    appends (by position when it extends this prompt, else its trailing messages that no policy
    wrote). The observation is the user or tool message after the answer."""
    out: list[tuple[int | None, int | None]] = []
    answers = [n for n, c in enumerate(history or []) if table.rows[c]["role"] == "assistant"]
    by_history = history is not None and len(answers) == sum(ok)
    answered = 0
    for k, codes in enumerate(agent_codes):
        reply = observation = None
        following: list[int] = []
        if k + 1 < len(agent_codes):
            following = _appended(codes, agent_codes[k + 1], table)
        if by_history and ok[k]:
            at = answers[answered]
            reply = history[at]
            observation = next((c for c in history[at + 1 :] if table.rows[c]["role"] in ("user", "tool")), None)
        elif named[k] is not None:
            reply = named[k]
            if following and following[0] == reply:
                following = following[1:]
            observation = next((c for c in following if table.rows[c]["role"] in ("user", "tool")), None)
        else:
            for n, c in enumerate(following):
                if table.rows[c]["role"] == "assistant":
                    reply = c
                    observation = next(
                        (o for o in following[n + 1 :] if table.rows[o]["role"] in ("user", "tool")), None
                    )
                    break
        answered += ok[k]
        out.append((reply, observation))
    return out


def _appended(previous: list[int], prompt: list[int], table: MessageTable) -> list[int]:
    """What the agent added between two prompts: everything after ``previous`` when ``prompt``
    extends it (by position, so repeats count), else the trailing messages no policy wrote that
    ``previous`` does not end with."""
    if prompt[: len(previous)] == previous:
        return prompt[len(previous) :]
    known = set(previous)
    tail: list[int] = []
    for c in reversed(prompt):
        if table.rows[c]["marker"] is not None or (c in known and tail and table.rows[c]["role"] != "assistant"):
            break
        tail.append(c)
        if c in known and table.rows[c]["role"] == "assistant":
            break
    return tail[::-1]


def _clean(text: str | None, limit: int = PREVIEW_CHARS) -> str:
    """A short, printable preview (control characters shown as U+FFFD; escaping is the template's)."""
    if text is None:
        return ""
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "\ufffd", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def build_run(loaded: LoadedRun, method: str, block: int = DEFAULT_BLOCK, *, price: str | None = None) -> dict:
    """Everything the run page shows: ``page`` for the template, ``data`` for the embedded JSON."""
    record, calls = loaded.record, loaded.calls
    identity = record["identity"]
    table = MessageTable()
    codes = [[table.code(m) for m in prompt] for prompt in loaded.prompts]
    try:
        cached = call_cached(calls, codes, table.tokens(), method, block)
    except ValueError as exc:  # a malformed event field, named by metrics.cost
        raise ViewInputError(f"{loaded.run_dir / 'calls.jsonl'}: {exc}") from None
    agent_index = [i for i, c in enumerate(calls) if c.get("kind") == "agent"]
    named = [
        table.code(loaded.replies[i]) if loaded.replies is not None and loaded.replies[i] is not None else None
        for i in agent_index
    ]
    ok = [calls[i].get("status") == "ok" for i in agent_index]
    history = [table.code(m) for m in loaded.history] if loaded.history else None
    actions = dict(zip(agent_index, _actions([codes[i] for i in agent_index], table, named, ok, history)))
    last = agent_index[-1] if agent_index else None
    if last is not None and actions[last][0] is None and loaded.history and calls[last].get("status") == "ok":
        answers = [m for m in loaded.history if m.get("role") == "assistant"]
        if answers:  # the last call's answer is in no prompt; the trajectory has it
            actions[last] = (table.code(answers[-1]), None)

    rows, steps, previous_agent = [], [], None
    peak = max([c.get("prompt_tokens") or 0 for c in calls] + [1])
    for i, call in enumerate(calls):
        agent = call.get("kind") == "agent"
        prompt = call.get("prompt_tokens")
        row = {
            "index": i,
            "kind": call.get("kind"),
            "step": call.get("step"),
            "status": call.get("status"),
            "error": _clean(call.get("error"), 400),
            "prompt": prompt,
            "cached": cached[i],
            "fresh": None if prompt is None or cached[i] is None else prompt - cached[i],
            "completion": call.get("completion_tokens"),
            "latency": call.get("latency_s"),
            "bar": round(100 * (prompt or 0) / peak, 1),
            "bar_cached": round(100 * (cached[i] or 0) / peak, 1),
            "n_messages": len(codes[i]),
            "events": [],
            "command": "",
            "returncode": None,
            "reply": None,
            "observation": None,
            "changes": None,
        }
        if agent:
            reply, observation = actions[i]
            commands = commands_of(table.messages[reply]) if reply is not None else []
            row.update(
                command=_clean("; ".join(commands)),
                full_command="\n".join(commands),
                returncode=_returncode(table.rows[observation] if observation is not None else None),
                reply=reply,
                observation=observation,
            )
            events = call.get("events") or []
            if events:
                before = codes[previous_agent] if previous_agent is not None else []
                row["changes"] = step_changes(before, codes[i], table).as_dict() if before else None
                row["events"] = [_event_row(e) for e in events]
            previous_agent = i
            steps.append(row)
        rows.append(row)

    totals = record.get("totals") or {}
    prompts_sum = sum(c.get("prompt_tokens") or 0 for c in calls if c.get("kind") == "agent")
    cached_known = [cached[i] for i in agent_index]
    cached_sum = None if any(v is None for v in cached_known) else sum(cached_known)
    verdict = loaded.verdict
    timing = record.get("timing") if isinstance(record.get("timing"), dict) else {}
    page = {
        "title": f"{identity.get('task_id')} · {identity.get('policy')} · attempt {identity.get('attempt')}",
        "identity": {k: identity.get(k) for k in sorted(identity)},
        "outcome": record.get("outcome"),
        "open": _open_reason(record),
        "error": _clean(record.get("error"), 2000),
        "resolved": None if verdict is None else verdict.get("resolved"),
        "harness": None if verdict is None else verdict.get("harness"),
        "submission": record.get("submission"),
        "agent_time_s": agent_time(timing),  # the latency the metrics compare (A.5)
        "setup_s": timing.get("setup_s"),  # preparing the workspace, before the agent's start
        "method": method,
        "block": block,
        "rows": rows,
        "n_steps": len(steps),
        "n_events": sum(len(r["events"]) for r in rows),
        "failed_calls": sum(1 for c in calls if c.get("status") != "ok"),
        "prompt_tokens": prompts_sum,
        "cached_tokens": cached_sum,
        "summary_tokens": sum(c.get("prompt_tokens") or 0 for c in calls if c.get("kind") == "summary"),
        "peak": totals.get("peak_prompt_tokens") or peak,
        "run_dir": str(loaded.run_dir),
        "price": price,
        "dollars": None,
    }
    if price is not None and cached_sum is not None:  # metrics.prices: litellm's map, dollars beside tokens
        from ctxpolicy.metrics.prices import price_card

        output = sum(c.get("completion_tokens") or 0 for c in calls)
        fresh = prompts_sum - cached_sum + page["summary_tokens"]
        page["dollars"] = price_card(price).breakdown(fresh, cached_sum, 0, output)
    data = {
        "messages": [[r["role"], r["text"], r["tokens"]] for r in table.rows],
        "prompts": codes,
        "calls": [{"step": r["step"], "kind": r["kind"]} for r in rows],
    }
    return {"page": page, "data": data, "actions": [r.get("full_command", "") for r in steps]}


def _open_reason(record: dict) -> str | None:
    """Why the run is not finished yet, for an open proxy conversation (else None)."""
    from ctxpolicy.metrics.records import OPEN_CONVERSATION

    proxy = record.get("proxy")
    if record.get("complete") is False and isinstance(proxy, dict) and proxy.get("open") is True:
        return OPEN_CONVERSATION
    return None


def _event_row(event: dict) -> dict:
    def get(name):
        return event.get(name) if isinstance(event, dict) else None

    before, unchanged = get("total_tokens_before"), get("unchanged_prefix_tokens")
    return {
        "primitive": _clean(str(get("primitive"))),
        "trigger": get("trigger"),
        "depth": get("depth"),
        "fallback": get("fallback"),
        "removed": get("messages_removed") or 0,
        "cleared": get("messages_cleared") or 0,
        "summary_tokens": get("summary_tokens") or 0,
        "tokens_before": before,
        "tokens_after": get("total_tokens_after"),
        "target": get("target_tokens"),
        "first_changed_index": get("first_changed_index"),
        "unchanged_prefix_tokens": unchanged,
        "broken_tokens": before - unchanged if isinstance(before, int) and isinstance(unchanged, int) else None,
    }


def run_summary(built: dict) -> dict:
    """One line of a cell's index: outcome, steps, tokens, cost, events."""
    page = built["page"]
    identity = page["identity"]
    return {
        "task_id": identity.get("task_id"),
        "attempt": identity.get("attempt"),
        "policy": identity.get("policy"),
        "outcome": page["outcome"],
        "resolved": page["resolved"],
        "steps": page["n_steps"],
        "prompt_tokens": page["prompt_tokens"],
        "cached_tokens": page["cached_tokens"],
        "billed": _billed(page),
        "dollars": (page.get("dollars") or {}).get("total"),
        "events": page["n_events"],
        "failed_calls": page["failed_calls"],
    }


def _billed(page: dict, discount: float | None = None) -> float | None:
    from ctxpolicy.metrics.cost import DEFAULT_DISCOUNT

    if page["cached_tokens"] is None:
        return None
    discount = DEFAULT_DISCOUNT if discount is None else discount
    fresh = page["prompt_tokens"] - page["cached_tokens"]
    return round(fresh + discount * page["cached_tokens"] + page["summary_tokens"], 1)


def build_against(left: dict, right: dict) -> dict:
    """Two runs of one task aligned by step: each step's actions, the first step they differ, and
    what each run's policy had removed, cleared or summarised by then."""
    a, b = left["page"], right["page"]
    for name in ("benchmark", "task_id"):
        if a["identity"].get(name) != b["identity"].get(name):
            raise ViewInputError(
                f"--against: {b['run_dir']} is {name} {b['identity'].get(name)!r}, "
                f"{a['run_dir']} is {a['identity'].get(name)!r}: runs of different tasks are not compared"
            )
    steps_a = [r for r in a["rows"] if r["kind"] == "agent"]
    steps_b = [r for r in b["rows"] if r["kind"] == "agent"]
    acts_a, acts_b = left["actions"], right["actions"]
    n = max(len(steps_a), len(steps_b))
    first = next(  # an action one side does not know (blank) is no difference
        (
            k
            for k in range(n)
            if k >= len(acts_a) or k >= len(acts_b) or (acts_a[k] and acts_b[k] and acts_a[k] != acts_b[k])
        ),
        None,
    )
    rows = []
    for k in range(n):
        ra = steps_a[k] if k < len(steps_a) else None
        rb = steps_b[k] if k < len(steps_b) else None
        rows.append({"step": k + 1, "a": ra, "b": rb, "differs": first is not None and k >= first})
    upto = n if first is None else first + 1
    return {
        "a": a,
        "b": b,
        "rows": rows,
        "first_diff": None if first is None else first + 1,
        "removed_a": _removed_by(steps_a[:upto]),
        "removed_b": _removed_by(steps_b[:upto]),
    }


def _removed_by(steps: list[dict]) -> dict:
    """The messages a run's policy had taken out of its context by the end of ``steps``."""
    removed, cleared, summarised = [], [], []
    for row in steps:
        changes = row.get("changes")
        if not changes:
            continue
        removed += changes["removed"]
        cleared += [pair[0] for pair in changes["cleared"]]
        for s in changes["summaries"]:
            summarised += s["replaced"]
    return {"removed": removed, "cleared": cleared, "summarised": summarised}
