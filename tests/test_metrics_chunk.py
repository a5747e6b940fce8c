"""A chunk of runs counted at once (``metrics.chunk``) gives every run the row and call columns
it gets when read alone, whatever the chunk mixes: replays and their sources, a replay whose
source has other calls, runs without message sequences or without agent calls, a cost method
counted run by run, a run that fails only once counted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from ctxpolicy import rundir
from ctxpolicy.metrics import chunk, cost_methods, records
from ctxpolicy.metrics.cost import estimated_cached, exact_cached_flat, prefix_codes
from ctxpolicy.metrics.cost_methods.base import CostMethod, Counts, RunCalls, Sequences
from ctxpolicy.metrics.segments import run_sums
from ctxpolicy.metrics.records import find_run_dirs, read_run, read_runs
from ctxpolicy.policies import parse_spec
from ctxpolicy.replay import read_source_run, replay_source
from ctxpolicy.replay.output import write_replay
from ctxpolicy.replay.placeholder import PlaceholderSummarizer
from ctxpolicy.testing.runs import make_runs
from ctxpolicy.testing.transcripts import write_fc_run


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> list[Path]:
    """Synthetic runs of several policies (summary calls, OTRC events), replays of an FC run (a
    store chain, a source profile), a run whose source has fewer calls than it, one whose calls
    name no messages and one without calls."""
    root = tmp_path_factory.mktemp("chunk")
    make_runs(root / "runs", tasks=2, attempts=2, calls_per_run=14, policies=("FC", "SU/Th/0.5", "OTRC/St", "TRC/Th"))
    make_runs(root / "short", tasks=1, attempts=1, calls_per_run=5, policies=("FC",))
    source_dir = write_fc_run(root / "runs" / "synthetic" / "m" / "FC" / "t__a1", seed=5, task_id="t", steps=12)
    source = read_source_run(source_dir)
    final = source.agent_calls[-1]["est_tokens_after"]
    for policy in ("FC", "TR/Th/0.5", "OTRC/St"):
        replayed = replay_source(source, parse_spec(policy), threshold=final // 2, summarizer=PlaceholderSummarizer())
        write_replay(replayed, root / "replay", setting="fixed", summarizer=None, real_summaries=False)
    runs = find_run_dirs([root / "runs"])
    other_source = find_run_dirs([root / "short"])[0]
    mismatched = runs[0]
    record = rundir.read_run_json(mismatched)
    record[rundir.MESSAGE_BASE] = {"run": os.path.relpath(other_source, mismatched), "sha256": "0" * 64}
    rundir.write_run_json(mismatched, record)
    no_ids = runs[1]
    lines = [json.loads(line) for line in (no_ids / rundir.CALLS_JSONL).read_text().splitlines()]
    (no_ids / rundir.CALLS_JSONL).write_text("".join(json.dumps({**c, "message_ids": None}) + "\n" for c in lines))
    empty = root / "runs" / "empty" / "m" / "FC" / "e__a1"
    shutil.copytree(runs[2], empty)
    (empty / rundir.CALLS_JSONL).write_text("")
    record = rundir.read_run_json(empty)
    record["totals"].update(agent_calls=0, summary_calls=0)
    rundir.write_run_json(empty, record)
    dirs = find_run_dirs([root / "runs", root / "replay"])
    assert len(dirs) >= 20 and empty in dirs
    return dirs


def _same(one, alone) -> None:
    rows, lengths, columns, problems, read = one
    assert problems == [] and read == list(range(len(alone)))
    assert rows == [r.row for r in alone]
    assert lengths.tolist() == [len(r.calls["index"]) for r in alone]
    for name, column in columns.items():
        expected = np.concatenate([r.calls[name] for r in alone])
        assert column.dtype == expected.dtype, name
        np.testing.assert_array_equal(column, expected, err_msg=name)


def test_a_chunk_of_runs_reads_as_each_run_alone(mixed, monkeypatch):
    alone = [read_run(d) for d in mixed]
    rows = {r.row["run_dir"]: r.row for r in alone}
    assert any(row["billed_profile"] is None for row in rows.values())  # the mismatched source: no profile
    assert any(row["billed_profile"] is not None for row in rows.values())
    assert any("replay" in row["run_dir"] for row in rows.values())
    assert any(row["billed_exact"] is None for row in rows.values())  # no message sequences
    assert any(row["agent_calls"] == 0 for row in rows.values())
    assert any(row["summary_calls"] > 0 for row in rows.values())
    _same(read_runs(mixed, 16, 0.1), alone)
    monkeypatch.setattr(records, "BATCH_POSITIONS", 300)  # a batch of a few runs at a time
    _same(read_runs(mixed, 16, 0.1), alone)
    monkeypatch.undo()
    with_ids = [d for d, r in zip(mixed, alone) if r.row["billed_exact"] is not None]  # every method at once
    _same(read_runs(with_ids, 16, 0.1), [r for r in alone if r.row["billed_exact"] is not None])


def _half(calls, block):
    cached = calls.prompts // 2
    cached[:1] = 0
    return Counts(cached)


def test_a_method_without_a_count_of_many_runs_is_counted_run_by_run(mixed):
    with cost_methods.registered(CostMethod(name="half-cache", key="half", label="h", description="h", count=_half)):
        alone = [read_run(d) for d in mixed]
        _same(read_runs(mixed, 16, 0.1), alone)
        assert all(r.calls["cached_half"][r.calls["kind"] == 0][:1].tolist() in ([], [0]) for r in alone)


def test_a_run_that_fails_unexpectedly_in_a_chunk_is_the_only_one_left_out(mixed, monkeypatch):
    alone = [read_run(d) for d in mixed]
    walls = [r.row["wall_s"] for r in alone]
    bad = next(i for i, wall in enumerate(walls) if i > 0 and walls.count(wall) == 1)
    wall = walls[bad]
    real = chunk.agent_time

    def failing(timing):
        if timing.get("wall_s") == wall:
            raise ZeroDivisionError("a bug")
        return real(timing)

    monkeypatch.setattr(chunk, "agent_time", failing)
    rows, lengths, columns, problems, read = read_runs(mixed, 16, 0.1)
    assert [(at, e.path, e.reason) for at, e in problems] == [
        (bad, mixed[bad], "unreadable (ZeroDivisionError: a bug)")
    ]
    kept = [r for i, r in enumerate(alone) if i != bad]
    _same((rows, lengths, columns, [], list(range(len(kept)))), kept)
    assert read == [i for i in range(len(mixed)) if i != bad]


def test_runs_laid_end_to_end_share_no_prefix_and_keep_their_own_estimate():
    rng = np.random.default_rng(3)
    runs = np.array([4, 0, 3, 5])
    lengths = np.concatenate([np.arange(1, k + 1) * 2 for k in runs])  # each run's prompts grow by two
    codes = np.concatenate([np.arange(k) for k in lengths])  # every run sends the same messages
    tokens = rng.integers(10, 400, len(codes))
    prompts = rng.integers(100, 5000, len(lengths))
    numbers = prefix_codes(codes, lengths, runs)
    run_of = np.repeat(np.repeat(np.arange(len(runs)), runs), lengths)
    assert all(not set(numbers[run_of == a]) & set(numbers[run_of == b]) for a in range(4) for b in range(a))
    ends = np.cumsum(runs)
    got = exact_cached_flat(codes, tokens, lengths, prompts, 16, prefixes=numbers)
    seq_ends = np.concatenate(([0], np.cumsum(lengths)))
    for end, k in zip(ends, runs):
        at = slice(seq_ends[end - k], seq_ends[end])
        alone = exact_cached_flat(codes[at], tokens[at], lengths[end - k : end], prompts[end - k : end], 16)
        assert got[end - k : end].tolist() == alone.tolist()
        assert k == 0 or got[end - k] == 0  # a run's first call finds nothing, however alike the runs
    otrc = rng.random(len(prompts)) < 0.3
    u, t, a = (rng.integers(-1, 3000, len(prompts)) for _ in range(3))
    cached, rule = estimated_cached(prompts, otrc, 16, unchanged_tokens=u, tokens_before=t, tokens_after=a, runs=runs)
    for end, k in zip(ends, runs):
        at = slice(end - k, end)
        one = estimated_cached(
            prompts[at], otrc[at], 16, unchanged_tokens=u[at], tokens_before=t[at], tokens_after=a[at]
        )
        assert cached[at].tolist() == one[0].tolist() and rule[at].tolist() == one[1].tolist()
    calls = RunCalls(prompts, sequences=Sequences(codes, tokens, lengths), runs=runs)
    assert cost_methods.method("exact").count_runs(calls, 16).cached.tolist() == got.tolist()
    assert run_sums(np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]), runs).tolist() == [10, 0, 18, 50]


def test_the_anthropic_cache_of_runs_laid_end_to_end_walks_only_the_runs_that_need_it():
    # three runs of one growing conversation each: the first and third with calls minutes apart
    # (entries expire, the calls are walked in order), the second within the cache's lifetime
    runs = np.array([5, 4, 6])
    lengths = np.concatenate([np.arange(1, k + 1) * 2 for k in runs])
    codes = np.concatenate([np.arange(k) for k in lengths])
    tokens = np.full(len(codes), 700)
    prompts = lengths * 700
    gaps = np.concatenate([[0, 400, 10, 500, 20], [0, 5, 5, 5], [0, 350, 10, 10, 700, 10]])
    starts = np.concatenate([np.cumsum(gaps[e - k : e]) for e, k in zip(np.cumsum(runs), runs)]).astype(float)
    anthropic = cost_methods.method("anthropic")
    sequences = Sequences(codes, tokens, lengths)
    together = anthropic.count_runs(RunCalls(prompts, start=starts, sequences=sequences, runs=runs), 16)
    seq_ends = np.concatenate(([0], np.cumsum(lengths)))
    alone_cached, alone_written = [], []
    for end, k in zip(np.cumsum(runs), runs):
        at = slice(seq_ends[end - k], seq_ends[end])
        one = Sequences(codes[at], tokens[at], lengths[end - k : end])
        counts = anthropic.counts(RunCalls(prompts[end - k : end], start=starts[end - k : end], sequences=one), 16)
        alone_cached += counts.cached.tolist()
        alone_written += counts.written.tolist()
    assert together.cached.tolist() == alone_cached and together.written.tolist() == alone_written
    assert 0 in alone_cached[1:5] and 0 not in alone_cached[6:9]  # the first run's entries expired, not the second's
