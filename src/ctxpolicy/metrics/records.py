"""Reading one run directory into a run row and its call columns.

A run directory counts only when its ``run.json`` says ``complete: true`` and its
``calls.jsonl`` and ``messages.jsonl`` parse and agree (every message id a call sent is in the
store). Anything else raises ``RecordError`` naming the path and what is wrong, so that the
aggregate can report it and leave the run out.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from ctxpolicy.metrics.commands import count_commands
from ctxpolicy.metrics.cost import (DEFAULT_BLOCK, DEFAULT_DISCOUNT, billed, estimated_cached, exact_cached_flat,
                                   has_otrc, unchanged_prefix)
from ctxpolicy.metrics.outcomes import outcome_class

RUN_FILES = ("run.json", "calls.jsonl", "messages.jsonl")
IDENTITY_FIELDS = ("benchmark", "model", "policy", "task_id", "attempt")
CALL_FIELDS = ("index", "kind")
CALL_KINDS = ("agent", "summary")
RUN_COLUMNS = (  # the runs table, in order (docs/schema.md)
    "run_dir", "cell", "track", "benchmark", "cohort", "model", "policy", "primitive", "trigger", "depth",
    "setting", "threshold_tokens", "summarizer", "task_id", "stratum", "attempt", "seed", "outcome", "error",
    "resolved", "has_verdict", "outcome_class", "wall_s", "steps", "agent_calls", "summary_calls",
    "prompt_tokens", "completion_tokens", "total_tokens", "peak_prompt_tokens", "n_prompt_counts",
    "compression_events", "compression_freq", "format_errors", "billed_exact", "fresh_exact",
    "cached_exact", "billed_est", "fresh_est", "cached_est", "billed_measured", "cached_measured",
    "summary_input", "retrieval_cmds", "execution_cmds")


class RecordError(Exception):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


@dataclass
class RunRecord:
    row: dict
    calls: dict[str, np.ndarray]


SKIPPED_DIRS = frozenset({"workspace", "stale"})  # docs/architecture.md: not run directories


def find_run_dirs(roots: list[Path]) -> list[Path]:
    """Every directory under the roots that holds any run file (complete or not).

    A run directory's subdirectories (its workspace) are not searched, nor are the ``stale/``
    folders where ``run-cell --redo-stale`` keeps runs made under an outdated threshold."""
    found: list[Path] = []
    for root in map(Path, roots):
        if not root.is_dir():
            raise RecordError(root, "no such directory")
        for directory, subdirs, files in os.walk(root):
            if any(name in files for name in RUN_FILES):
                found.append(Path(directory))
                subdirs.clear()
            else:
                subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS]
    return sorted(set(found))


def _load_json(path: Path):
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise RecordError(path, "missing") from None
    except orjson.JSONDecodeError as exc:
        raise RecordError(path, f"corrupt JSON ({exc})") from None


def _field(record: dict, key: str, path: Path, where: str):
    if key not in record or record[key] is None:
        raise RecordError(path, f"field {where}{key} is missing")
    return record[key]


def read_run(run_dir: Path, block: int = DEFAULT_BLOCK, discount: float = DEFAULT_DISCOUNT) -> RunRecord:
    run_dir = Path(run_dir)
    run_path = run_dir / "run.json"
    run = _load_json(run_path)
    if not isinstance(run, dict) or run.get("complete") is not True:
        value = run.get("complete") if isinstance(run, dict) else run
        raise RecordError(run_path, f"field complete is {value!r}, not true")
    identity = run.get("identity")
    if not isinstance(identity, dict):
        raise RecordError(run_path, "field identity is missing")
    for key in IDENTITY_FIELDS:
        _field(identity, key, run_path, "identity.")

    verdict_path = run_dir / "verdict.json"
    verdict = _load_json(verdict_path) if verdict_path.exists() else None
    if verdict is not None and not (isinstance(verdict, dict) and isinstance(verdict.get("resolved"), bool)):
        value = verdict.get("resolved") if isinstance(verdict, dict) else verdict
        raise RecordError(verdict_path, f"field resolved is {value!r}, not a bool")

    store, assistant = _read_store(run_dir / "messages.jsonl")
    calls, id_segments = _read_calls(run_dir / "calls.jsonl")
    columns = _call_columns(calls, id_segments, store, run_dir / "calls.jsonl", block)
    row = _run_row(run_dir, run, identity, verdict, columns, discount)
    row["retrieval_cmds"], row["execution_cmds"] = count_commands(assistant)
    return RunRecord(row, columns)


def _read_store(path: Path) -> tuple[dict[str, int], list[dict]]:
    """Message id -> tokens, and the assistant messages (for the command counts)."""
    entries = _load_jsonl(path)
    try:
        store = {entry["id"]: int(entry["tokens"]) for entry in entries}
        assistant = [entry["message"] for entry in entries
                     if isinstance(entry.get("message"), dict) and entry["message"].get("role") == "assistant"]
    except (KeyError, TypeError, ValueError, AttributeError):
        for number, entry in enumerate(entries, 1):
            for key in ("id", "tokens"):
                _field(entry if isinstance(entry, dict) else {}, key, path, f"line {number}: ")
        raise RecordError(path, "field tokens is not an integer") from None
    return store, assistant


def _load_jsonl(path: Path) -> list:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RecordError(path, "missing") from None
    return _parse_lines(data, path)


def _parse_lines(data: bytes, path: Path) -> list:
    """JSON lines -> values, in one parser call (JSON text never holds a raw newline)."""
    if data and not data.endswith(b"\n"):
        raise RecordError(path, "partial: last line has no newline")
    body = data.rstrip(b"\n")
    if b"\n\n" in body or body.startswith(b"\n"):
        body = b"\n".join(line for line in body.split(b"\n") if line.strip())
    try:
        return orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:
        pass
    for number, line in enumerate(data.splitlines(), 1):  # find the line to blame
        try:
            orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError as exc:
            raise RecordError(path, f"corrupt line {number} ({exc})") from None
    raise RecordError(path, "corrupt JSON lines")


IDS_ARRAY = re.compile(rb'"message_ids"\s*:\s*\[([^\]]*)\]')


def _read_calls(path: Path) -> tuple[list[dict], list[bytes | None]]:
    """Calls in index order, each with its raw message_ids array text kept apart.

    The id arrays are most of a calls.jsonl; cutting them out before JSON parsing and decoding
    them in bulk (``_fixed_width_ids``) is what keeps aggregation of 35,000 runs within a minute.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise RecordError(path, "missing") from None
    parts = IDS_ARRAY.split(data)
    if len(parts) // 2 == data.count(b"\n") and b"\n\n" not in data:  # one id array per line
        calls = _parse_lines(b'"message_ids":null'.join(parts[0::2]), path)
        segments = parts[1::2]
    else:
        calls = _parse_lines(data, path)
        segments = [orjson.dumps(c["message_ids"])[1:-1] if isinstance(c, dict) and isinstance(
            c.get("message_ids"), list) else None for c in calls]
    if not all(isinstance(c, dict) and c.get("index") is not None and c.get("kind") in CALL_KINDS
               for c in calls):
        _blame_call(calls, path)
    indexes = [c["index"] for c in calls]
    if indexes != sorted(indexes):
        order = sorted(range(len(calls)), key=indexes.__getitem__)
        calls, segments = [calls[i] for i in order], [segments[i] for i in order]
    return calls, segments


def _blame_call(calls: list, path: Path) -> None:
    for number, call in enumerate(calls, 1):
        if not isinstance(call, dict):
            raise RecordError(path, f"line {number}: not an object")
        for key in CALL_FIELDS:
            _field(call, key, path, f"line {number}: ")
        if call["kind"] not in CALL_KINDS:
            raise RecordError(path, f"line {number}: field kind is {call['kind']!r}")


_SEPARATORS = b'", \t\r\n'
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _fixed_width_ids(segments: list[bytes]) -> tuple[np.ndarray, np.ndarray] | None:
    """The ids of several id arrays as 64-bit keys, and the number of ids per array, for ids of
    exactly 16 characters (the contract's hex digests); None when the arrays are not of that shape.
    A key mixes the id's two 8-byte halves, so equal ids give equal keys."""
    lengths = np.fromiter((s.count(b'"') for s in segments), dtype=np.int64, count=len(segments)) // 2
    chars = b"".join(segments).translate(None, _SEPARATORS)
    if len(chars) != 16 * int(lengths.sum()):
        return None
    halves = np.frombuffer(chars, dtype=np.uint64).reshape(-1, 2)
    return halves[:, 0] * _MIX ^ halves[:, 1], lengths


def _sequences(segments: list[bytes], store: dict[str, int], path: Path,
               indexes: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, tokens, lengths) of the agent calls' message sequences laid end to end."""
    fast = _fixed_width_ids(segments)
    keys = _fixed_width_ids([b'"' + '","'.join(store).encode() + b'"']) if store else None
    if fast is not None and keys is not None:
        codes, lengths = fast
        order = np.argsort(keys[0])
        sorted_keys = keys[0][order]
        sorted_tokens = np.fromiter(store.values(), np.int64, len(store))[order]
        where = np.minimum(np.searchsorted(sorted_keys, codes), len(sorted_keys) - 1)
        if (sorted_keys[where] == codes).all():
            return codes, sorted_tokens[where], lengths
    return _sequences_by_name(segments, store, path, indexes)  # also names any unknown id


def _sequences_by_name(segments: list[bytes], store: dict[str, int], path: Path,
                       indexes: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ids = [orjson.loads(b"[" + s + b"]") for s in segments]
    known: dict[str, int] = {}
    for call, sequence in zip(indexes, ids):
        for mid in sequence:
            if mid not in store:
                raise RecordError(path, f"call {call}: message id {mid} is not in messages.jsonl")
            known.setdefault(mid, len(known))
    flat = [mid for sequence in ids for mid in sequence]
    return (np.array([known[m] for m in flat], dtype=np.int64), np.array([store[m] for m in flat], dtype=np.int64),
            np.array([len(s) for s in ids], dtype=np.int64))


def _call_columns(calls: list[dict], segments: list[bytes | None], store: dict[str, int], path: Path,
                  block: int) -> dict[str, np.ndarray]:
    n = len(calls)
    agent = np.array([c["kind"] == "agent" for c in calls], dtype=bool)
    counted = np.array([c.get("prompt_tokens") is not None for c in calls], dtype=bool)
    prompts = np.array([c.get("prompt_tokens") or 0 for c in calls], dtype=np.int64)
    events, unchanged, before = _event_columns(calls, path)

    agent_segments = [segments[i] for i in np.flatnonzero(agent)]
    cached_exact = np.zeros(n, dtype=np.float64)
    if all(s is not None for s in agent_segments):
        codes, tokens, lengths = _sequences(agent_segments, store, path,
                                            [calls[i]["index"] for i in np.flatnonzero(agent)])
        cached_exact[agent] = exact_cached_flat(codes, tokens, lengths, prompts[agent], block)
    else:
        cached_exact[agent] = np.nan  # without message sequences the exact count is unknown
    cached_est = np.zeros(n, dtype=np.float64)
    otrc = np.array([has_otrc(c.get("events")) for c in calls], dtype=bool)
    cached_est[agent], _ = estimated_cached(prompts[agent], otrc[agent], block,
                                            unchanged_tokens=unchanged[agent], tokens_before=before[agent])

    def column(key: str) -> np.ndarray:
        return np.array([np.nan if c.get(key) is None else c[key] for c in calls], dtype=np.float64)

    return {
        "index": np.array([c["index"] for c in calls], dtype=np.int64),
        "kind": np.where(agent, 0, 1).astype(np.int8),  # codes into CALL_KINDS
        "step": column("step"), "start": column("start"), "end": column("end"),
        "latency_s": column("latency_s"),
        "prompt_tokens": prompts, "prompt_counted": counted,
        "completion_tokens": np.array([c.get("completion_tokens") or 0 for c in calls], dtype=np.int64),
        "cached_tokens": column("cached_tokens"),
        "est_tokens_before": column("est_tokens_before"), "est_tokens_after": column("est_tokens_after"),
        "n_events": events, "cached_exact": cached_exact, "cached_est": cached_est,
    }


def _event_columns(calls: list[dict], path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per call: the number of compression events, and the step's (U, T) from ``unchanged_prefix``
    (-1 where there are no events or they do not say where the change was)."""
    n = len(calls)
    counts = np.zeros(n, dtype=np.int64)
    unchanged, before = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    for i in [i for i, call in enumerate(calls) if call.get("events")]:  # most calls have none
        call, events = calls[i], calls[i]["events"]
        if not isinstance(events, list):
            raise RecordError(path, f"call {call['index']}: field events is {events!r}, not a list")
        counts[i] = len(events)
        try:
            where = unchanged_prefix(events)
        except ValueError as exc:
            raise RecordError(path, f"call {call['index']}: {exc}") from None
        if where is not None:
            unchanged[i], before[i] = where
    return counts, unchanged, before


def _run_row(run_dir: Path, run: dict, identity: dict, verdict: dict | None,
             calls: dict[str, np.ndarray], discount: float) -> dict:
    agent = calls["kind"] == 0
    prompts = calls["prompt_tokens"][agent]
    summary_input = int(calls["prompt_tokens"][~agent].sum())
    totals = run.get("totals") or {}
    timing = run.get("timing") or {}
    n_agent = int(agent.sum())
    n_counted = int((agent & calls["prompt_counted"]).sum())
    n_events = int(calls["n_events"].sum())
    exact_known = not np.isnan(calls["cached_exact"][agent]).any()
    exact = billed(prompts, calls["cached_exact"][agent].astype(np.int64), summary_input, discount) if exact_known else None
    est = billed(prompts, calls["cached_est"][agent].astype(np.int64), summary_input, discount)
    measured_cached = calls["cached_tokens"][agent]
    measured = (billed(prompts, measured_cached.astype(np.int64), summary_input, discount)
                if n_agent and not np.isnan(measured_cached).any() else None)
    resolved = bool(verdict and verdict["resolved"])
    outcome = run.get("outcome")
    prompt_total = int(calls["prompt_tokens"].sum())
    completion_total = int(calls["completion_tokens"].sum())
    return {
        "run_dir": str(run_dir),
        "cell": identity.get("cell") or run_dir.parent.name,
        "track": identity.get("track"),
        "benchmark": identity["benchmark"], "cohort": identity.get("cohort"),
        "model": identity["model"], "policy": identity["policy"],
        "primitive": identity.get("primitive"), "trigger": identity.get("trigger"),
        "depth": identity.get("depth"), "setting": identity.get("threshold_setting"),
        "threshold_tokens": identity.get("threshold_tokens"), "summarizer": identity.get("summarizer"),
        "task_id": str(identity["task_id"]), "stratum": identity.get("stratum"),
        "attempt": int(identity["attempt"]), "seed": identity.get("seed"),
        "outcome": outcome, "error": run.get("error"),
        "resolved": resolved, "has_verdict": verdict is not None,
        "outcome_class": outcome_class(outcome, resolved),
        "wall_s": timing.get("wall_s"),
        "steps": totals.get("steps", n_agent),
        "agent_calls": n_agent, "summary_calls": int((~agent).sum()),
        "prompt_tokens": prompt_total, "completion_tokens": completion_total,
        "total_tokens": prompt_total + completion_total,
        "peak_prompt_tokens": int(prompts.max()) if n_counted else None,
        "n_prompt_counts": n_counted,
        "compression_events": n_events,
        "compression_freq": n_events / n_agent if n_agent else None,
        "format_errors": totals.get("format_errors"),
        "billed_exact": exact.billed_input if exact else None,
        "fresh_exact": exact.fresh if exact else None,
        "cached_exact": exact.cached if exact else None,
        "billed_est": est.billed_input, "fresh_est": est.fresh, "cached_est": est.cached,
        "billed_measured": measured.billed_input if measured else None,
        "cached_measured": measured.cached if measured else None,
        "summary_input": summary_input,
    }
