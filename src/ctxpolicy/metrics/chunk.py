"""Many runs' rows and call columns at once: the numbers of a batch of runs, each read and checked
on its own (``records.parse_run``), laid end to end and counted in one pass of array operations.

Counted run by run, the cost methods and the row took a few hundred small numpy calls a run; here
each step runs once a batch (``records.read_runs`` cuts a chunk into batches of about
``BATCH_POSITIONS`` message positions), runs kept apart by their boundaries (``run_sums``; the
prefix numbers are offset per run, ``cost.prefix_codes``). A cost method without ``count_runs``
(one a test registers) is counted run by run, as ``read_run`` always did. The tables are the same
as those of reading each run alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np

from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.cost_methods.base import REPORTED, SEQUENCES, PrefixTrees, RunCalls, Sequences, SourceCalls
from ctxpolicy.metrics.segments import run_sums
from ctxpolicy.metrics.outcomes import harness_timed_out, is_time_limited, outcome_class

_NOT_NUMERIC = ("index", "events")  # the typed call fields that are no number


@dataclass
class ParsedRun:
    """One run's records, read and checked (``records.parse_run``): what its row and call columns
    are made of."""

    run_dir: Path
    run: dict
    verdict: dict | None
    commands: tuple[int, int]  # (retrieval, execution)
    values: dict[str, list]  # the calls' typed fields (``records.CALL_TYPED_FIELDS``), in index order
    agent: list[bool]  # per call: an agent call (else a summary call)
    events: list[tuple[int, int, int, int, bool]]  # per call with events: (call, events, U, T, OTRC)
    sequences: Sequences | PrefixTrees | None  # the agent calls' prompts (None: the calls name none)
    source: SourceCalls | None  # a replay's source calls (None: the run is its own source)


def agent_time(timing: dict) -> float | None:
    """The run's latency as A.5 measures it, from the agent's start to the run's end: ``agent_s``
    (the agent loop; the wall-time limit starts at the same instant), else ``wall_s - setup_s``
    for records that have only those, else ``wall_s`` (a record without a setup time has none
    to leave out); None when the record has no time."""
    agent = timing.get("agent_s")
    if isinstance(agent, (int, float)) and not isinstance(agent, bool):
        return float(agent)
    wall, setup = timing.get("wall_s"), timing.get("setup_s")
    if not isinstance(wall, (int, float)) or isinstance(wall, bool):
        return None
    if isinstance(setup, (int, float)) and not isinstance(setup, bool):
        return max(float(wall) - float(setup), 0.0)
    return float(wall)


def source_of(agent: np.ndarray, prompts: np.ndarray, cached: np.ndarray, after: np.ndarray) -> SourceCalls:
    """Calls as their own source, from their numeric columns (NaN: not reported): a prompt not
    reported counts 0, a local count not reported is the prompt's."""
    prompts = np.where(np.isnan(prompts), 0.0, prompts)[agent]
    local = after[agent]
    return SourceCalls(prompts, cached[agent], np.where(np.isnan(local), prompts, local))


# the message positions to count at once (``records.read_runs`` counts a chunk in batches of about
# as many): the arrays are a few dozen per position, and a batch's runs are held parsed until it is
# counted, so a worker's memory stays near what reading run by run took (500 runs at once took 4 times more)
BATCH_POSITIONS = 1 << 18


def tables(parsed: list[ParsedRun], block: int, discount: float):
    """The runs' rows, their numbers of calls and their call columns laid end to end (``parsed``
    not empty)."""
    sizes = np.fromiter((len(p.agent) for p in parsed), np.int64, len(parsed))
    n = int(sizes.sum())
    agent = np.fromiter(chain.from_iterable(p.agent for p in parsed), bool, n)
    offsets = np.cumsum(sizes) - sizes
    floats = {
        key: np.array(list(chain.from_iterable(p.values[key] for p in parsed)), dtype=np.float64).reshape(n)
        for key in parsed[0].values
        if key not in _NOT_NUMERIC
    }  # null -> NaN: the server or the record did not say
    prompt_column = floats["prompt_tokens"]
    counted = ~np.isnan(prompt_column)
    prompts = np.nan_to_num(prompt_column).astype(np.int64)
    events, unchanged, before, otrc = _event_columns(parsed, offsets, n)
    n_agent = run_sums(agent, sizes)

    after = floats["est_tokens_after"]
    reported = floats["cached_tokens"]
    run_calls = RunCalls(
        prompts[agent],
        reported_cached=reported[agent],
        otrc=otrc[agent],
        unchanged=unchanged[agent],
        before=before[agent],
        after=np.where(np.isnan(after), -1, after)[agent].astype(np.int64),
        start=floats["start"][agent],
        sequences=_sequences(parsed),
        source=_source(parsed, agent, prompt_column, reported, after, n_agent),
        runs=n_agent,
    )
    derived = {}
    for method in cost_methods.methods():
        if not method.calls_columns:
            continue
        cached, written = _counts(method, run_calls, parsed, block)
        for name, part in zip(method.calls_columns, (cached, written)):
            full = np.zeros(n, dtype=np.float64)
            full[agent] = part
            derived[name] = full

    columns = {
        "index": np.fromiter(chain.from_iterable(p.values["index"] for p in parsed), np.int64, n),
        "kind": np.where(agent, 0, 1).astype(np.int8),  # codes into CALL_KINDS
        "step": floats["step"],
        "start": floats["start"],
        "end": floats["end"],
        "latency_s": floats["latency_s"],
        "prompt_tokens": prompts,
        "prompt_counted": counted,
        "completion_tokens": np.nan_to_num(floats["completion_tokens"]).astype(np.int64),
        # clamped to the call's prompt, as the runs table's measured cost clamps it (metrics.cost.billed):
        # a server that reports more cached than prompt tokens is not believed past the prompt
        "cached_tokens": _at_most(reported, prompt_column),
        "est_tokens_before": floats["est_tokens_before"],
        "est_tokens_after": after,
        "n_events": events,
        **derived,
    }
    rows = _rows(parsed, columns, sizes, agent, n_agent, discount)
    return rows, sizes, columns


def _event_columns(parsed: list[ParsedRun], offsets: np.ndarray, n: int):
    """Per call: its number of compression events, the step's (U, T) (-1: unknown) and whether
    one of its events is OTRC."""
    found = [(offset + i, *rest) for p, offset in zip(parsed, offsets.tolist()) for i, *rest in p.events]
    counts = np.zeros(n, dtype=np.int64)
    unchanged, before = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    otrc = np.zeros(n, dtype=bool)
    if found:
        at, number, u, t, is_otrc = map(list, zip(*found))
        counts[at], unchanged[at], before[at], otrc[at] = number, u, t, is_otrc
    return counts, unchanged, before, otrc


def _sequences(parsed: list[ParsedRun]) -> Sequences | PrefixTrees | None:
    """The runs' agent-call sequences laid end to end (None where any run has none): their prefix
    trees where every run has one (a version-2 record's), else their positions."""
    if any(p.sequences is None for p in parsed):
        return None
    if len(parsed) == 1:
        return parsed[0].sequences
    if all(isinstance(p.sequences, PrefixTrees) for p in parsed):
        return PrefixTrees([tree for p in parsed for tree in p.sequences.trees])
    return Sequences(
        np.concatenate([p.sequences.codes for p in parsed]),
        np.concatenate([p.sequences.tokens for p in parsed]),
        np.concatenate([p.sequences.lengths for p in parsed]),
    )


def _source(parsed, agent, prompts, cached, after, n_agent) -> SourceCalls:
    """The source calls of every run laid end to end, aligned with the agent calls: a run's own
    where it is no replay, NaN where a replay's source has another number of calls (no profile)."""
    own = source_of(agent, prompts, cached, after)
    if all(p.source is None for p in parsed):
        return own
    bounds = np.cumsum(n_agent).tolist()
    parts = []
    for p, end, size in zip(parsed, bounds, n_agent.tolist()):
        if p.source is None:
            parts.append(
                (own.prompts[end - size : end], own.reported_cached[end - size : end], own.local[end - size : end])
            )
        elif len(p.source.prompts) == size:
            parts.append((p.source.prompts, p.source.reported_cached, p.source.local))
        else:
            parts.append((np.zeros(size), np.full(size, np.nan), np.zeros(size)))
    return SourceCalls(*(np.concatenate([np.asarray(part[k], dtype=np.float64) for part in parts]) for k in range(3)))


def _counts(method, calls: RunCalls, parsed: list[ParsedRun], block: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A method's cached and written counts of every agent call, NaN for the calls of a run it
    cannot price."""
    runs = calls.runs
    if method.count_runs is None or (SEQUENCES in method.needs and calls.sequences is None):
        return _counts_run_by_run(method, calls, parsed, block)
    counts = method.count_runs(calls, block)
    cached = np.asarray(counts.cached, dtype=np.float64)
    written = counts.written_or_zero().astype(np.float64) if method.writes else None
    unpriced = run_sums(np.isnan(cached), runs) > 0
    if REPORTED in method.needs:
        unpriced |= run_sums(np.isnan(calls.reported_cached), runs) > 0
    if unpriced.any():
        at = np.repeat(unpriced, runs)
        cached = np.where(at, np.nan, cached)
        written = None if written is None else np.where(at, np.nan, written)
    return cached, written


def _counts_run_by_run(method, calls: RunCalls, parsed: list[ParsedRun], block: int):
    cached, written = [], []
    ends = np.cumsum(calls.runs).tolist()
    for p, end, size in zip(parsed, ends, calls.runs.tolist()):
        at = slice(end - size, end)
        own = calls.source
        source = p.source or SourceCalls(own.prompts[at], own.reported_cached[at], own.local[at])
        one = RunCalls(
            calls.prompts[at],
            reported_cached=calls.reported_cached[at],
            otrc=calls.otrc[at],
            unchanged=calls.unchanged[at],
            before=calls.before[at],
            after=calls.after[at],
            start=calls.start[at],
            sequences=p.sequences,
            source=source,
        )
        counts = method.counts(one, block)
        if counts is None:
            cached.append(np.full(size, np.nan))
            written.append(np.full(size, np.nan))
        else:
            cached.append(np.asarray(counts.cached, dtype=np.float64))
            written.append(counts.written_or_zero().astype(np.float64))
    empty = np.zeros(0, dtype=np.float64)
    return (np.concatenate(cached) if cached else empty), (np.concatenate(written) if written else empty)


def _at_most(cached: np.ndarray, prompts: np.ndarray) -> np.ndarray:
    """``cached`` cut to ``prompts`` where both are known (NaN, not reported, stays NaN)."""
    with np.errstate(invalid="ignore"):
        return np.where(cached > prompts, prompts, cached)


def _bills(columns: dict, agent: np.ndarray, n_agent: np.ndarray, summary_input: np.ndarray, discount: float):
    """Each cost method's runs-table columns for every run, as lists (None where the method
    cannot price a run: a per-call count is NaN, or the run has no agent call and the method
    needs the server's), C as ``metrics.cost.billed`` counts it."""
    prompts = columns["prompt_tokens"][agent]
    prompt_sums = run_sums(prompts, n_agent)
    out = {}
    for method in cost_methods.methods():
        cached = columns[method.call_column or method.cached_column][agent]
        unknown = np.isnan(cached)
        known = run_sums(unknown, n_agent) == 0
        if method.call_column is not None:
            known &= n_agent > 0
        whole = np.minimum(np.where(unknown, 0, cached).astype(np.int64), prompts)
        n_cached = run_sums(whole, n_agent)
        n_fresh = prompt_sums - n_cached
        n_written = np.zeros(len(n_agent), dtype=np.int64)
        if method.writes:
            written = columns[method.written_column][agent]
            written = np.where(np.isnan(written), 0, written).astype(np.int64)
            n_written = run_sums(np.minimum(written, prompts - whole), n_agent)
        cost = (
            n_fresh.astype(np.float64)
            + discount * n_cached.astype(np.float64)
            + method.write_premium * n_written.astype(np.float64)
            + summary_input.astype(np.float64)
        )
        parts = [cost.tolist(), n_fresh.tolist(), n_cached.tolist(), *((n_written.tolist(),) if method.writes else ())]
        is_known = known.tolist()
        for name, values in zip(method.run_columns, parts):
            out[name] = [v if k else None for v, k in zip(values, is_known)]
    return out


def _rows(parsed: list[ParsedRun], columns: dict, sizes: np.ndarray, agent: np.ndarray, n_agent, discount: float):
    prompts = columns["prompt_tokens"]
    summary_input = run_sums(np.where(agent, 0, prompts), sizes)
    prompt_totals = run_sums(prompts, sizes)
    completion_totals = run_sums(columns["completion_tokens"], sizes)
    n_counted = run_sums(agent & columns["prompt_counted"], sizes)
    n_events = run_sums(columns["n_events"], sizes)
    compressions = run_sums(columns["n_events"] > 0, sizes)
    agent_prompts = prompts[agent]
    peaks = np.zeros(len(parsed), dtype=np.int64)
    has_agent = n_agent > 0
    if has_agent.any():
        peaks[has_agent] = np.maximum.reduceat(agent_prompts, (np.cumsum(n_agent) - n_agent)[has_agent])
    latency = columns["latency_s"]
    bills = _bills(columns, agent, n_agent, summary_input, discount)
    rows = []
    ends = np.cumsum(sizes).tolist()
    for r, (p, end, size) in enumerate(zip(parsed, ends, sizes.tolist())):
        run, identity, verdict = p.run, p.run["identity"], p.verdict
        run_dir = p.run_dir
        is_agent = agent[end - size : end]
        own_latency = latency[end - size : end]
        totals = run.get("totals") or {}
        timing = run["timing"]
        agents = int(n_agent[r])
        counted = int(n_counted[r])
        events = int(n_events[r])
        resolved = bool(verdict and verdict["resolved"])
        outcome = run.get("outcome")
        prompt_total = int(prompt_totals[r])
        completion_total = int(completion_totals[r])
        rows.append(
            {
                "run_dir": str(run_dir),
                "cell": identity.get("cell") or run_dir.parent.name,
                "track": identity.get("track"),
                "benchmark": identity["benchmark"],
                "cohort": identity.get("cohort"),
                "model": identity["model"],
                "policy": identity["policy"],
                "primitive": identity.get("primitive"),
                "trigger": identity.get("trigger"),
                "depth": identity.get("depth"),
                "setting": identity.get("threshold_setting"),
                "threshold_tokens": identity.get("threshold_tokens"),
                "summarizer": identity.get("summarizer"),
                "task_id": str(identity["task_id"]),
                "stratum": identity.get("stratum"),
                "attempt": int(identity["attempt"]),
                "seed": identity.get("seed"),
                "outcome": outcome,
                "error": run.get("error"),
                "resolved": resolved,
                "has_verdict": verdict is not None,
                "outcome_class": outcome_class(outcome, resolved, harness_timed_out(verdict)),
                "time_limited": is_time_limited(outcome, harness_timed_out(verdict)),
                "wall_s": timing.get("wall_s"),
                "agent_time_s": agent_time(timing),
                "setup_s": timing.get("setup_s"),
                "steps": agents if totals.get("steps") is None else totals["steps"],
                "agent_calls": agents,
                "summary_calls": size - agents,
                "prompt_tokens": prompt_total,
                "completion_tokens": completion_total,
                "total_tokens": prompt_total + completion_total,
                "peak_prompt_tokens": int(peaks[r]) if counted else None,
                "n_prompt_counts": counted,
                "compression_events": events,
                "compression_freq": events / agents if agents else None,
                "format_errors": totals.get("format_errors"),
                **{name: values[r] for name, values in bills.items()},
                "summary_input": int(summary_input[r]),
                "agent_latency_s": float(np.nansum(own_latency[is_agent])) if agents else None,
                "summary_latency_s": float(np.nansum(own_latency[~is_agent])),
                "compressions": int(compressions[r]),
                "retrieval_cmds": p.commands[0],
                "execution_cmds": p.commands[1],
            }
        )
    return rows
