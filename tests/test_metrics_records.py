"""Reading run directories into the runs and calls tables (hand-built records)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from ctxpolicy.metrics import cli_aggregate
from ctxpolicy.metrics.aggregate import Tables, aggregate, write_tables
from ctxpolicy.metrics.outcomes import outcome_class

RUNS_COLUMNS = [
    "run_dir",
    "cell",
    "track",
    "benchmark",
    "cohort",
    "model",
    "policy",
    "primitive",
    "trigger",
    "depth",
    "setting",
    "threshold_tokens",
    "summarizer",
    "task_id",
    "stratum",
    "attempt",
    "seed",
    "outcome",
    "resolved",
    "has_verdict",
    "outcome_class",
    "wall_s",
    "steps",
    "agent_calls",
    "summary_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "peak_prompt_tokens",
    "n_prompt_counts",
    "compression_events",
    "compression_freq",
    "format_errors",
    "billed_exact",
    "fresh_exact",
    "cached_exact",
    "billed_est",
    "fresh_est",
    "cached_est",
    "billed_measured",
    "cached_measured",
    "summary_input",
    "retrieval_cmds",
    "execution_cmds",
]
CALLS_COLUMNS = [
    "run_dir",
    "cell",
    "benchmark",
    "model",
    "policy",
    "setting",
    "task_id",
    "attempt",
    "index",
    "kind",
    "step",
    "start",
    "end",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "est_tokens_before",
    "est_tokens_after",
    "n_events",
    "cached_exact",
    "cached_est",
]


def message(role, content, tokens):
    canonical = json.dumps(
        {"role": role, "content": content}, sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    mid = hashlib.sha256(canonical.encode()).hexdigest()[:16]
    return mid, {"id": mid, "tokens": tokens, "message": {"role": role, "content": content}}


SYS = message("system", "You are an agent.", 100)
TASK = message("user", "Fix the bug.", 50)
A1 = message("assistant", "THOUGHT: read\n\n```mswea_bash_command\ncat a.py\n```", 30)
O1 = message("user", "print(1)", 20)
A2 = message("assistant", "THOUGHT: test\n\n```mswea_bash_command\npython -m pytest\n```", 40)
O2 = message("user", "1 passed", 24)
SUMMARY_SYS = message("system", "Summarize.", 10)
SUMMARY = message("user", "Summary: read a.py", 16)
EVENT = {"primitive": "SU", "trigger": "Th", "depth": 0.5, "first_changed_index": 2, "messages_removed": 2}


def write_run(
    run_dir: Path,
    *,
    outcome="submitted",
    resolved=True,
    verdict=True,
    policy="SU/Th/0.5",
    task_id="t1",
    attempt=1,
    complete=True,
    cached=(0, 144, 96),
    event=EVENT,
) -> Path:
    run_dir.mkdir(parents=True)
    messages = [SYS, TASK, A1, O1, A2, O2, SUMMARY_SYS, SUMMARY]
    (run_dir / "messages.jsonl").write_text("".join(json.dumps(m[1]) + "\n" for m in messages))
    calls = [
        {
            "index": 0,
            "kind": "agent",
            "step": 1,
            "start": 0.0,
            "end": 2.0,
            "latency_s": 2.0,
            "prompt_tokens": 160,
            "completion_tokens": 30,
            "cached_tokens": cached[0],
            "message_ids": [SYS[0], TASK[0]],
            "events": [],
        },
        {
            "index": 1,
            "kind": "agent",
            "step": 2,
            "start": 3.0,
            "end": 5.0,
            "latency_s": 2.0,
            "prompt_tokens": 212,
            "completion_tokens": 40,
            "cached_tokens": cached[1],
            "message_ids": [SYS[0], TASK[0], A1[0], O1[0]],
            "events": [],
        },
        {
            "index": 2,
            "kind": "summary",
            "step": 3,
            "start": 6.0,
            "end": 7.0,
            "latency_s": 1.0,
            "prompt_tokens": 65,
            "completion_tokens": 16,
            "cached_tokens": None,
            "message_ids": [SUMMARY_SYS[0], A1[0], O1[0]],
            "events": [],
        },
        {
            "index": 3,
            "kind": "agent",
            "step": 3,
            "start": 7.0,
            "end": 9.0,
            "latency_s": 2.0,
            "prompt_tokens": 240,
            "completion_tokens": 10,
            "cached_tokens": cached[2],
            "message_ids": [SYS[0], TASK[0], SUMMARY[0], A2[0], O2[0]],
            "events": [event],
        },
    ]
    (run_dir / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    if verdict:
        (run_dir / "verdict.json").write_text(
            json.dumps({"resolved": resolved, "harness": "h", "report": {}, "log": ""})
        )
    record = {
        "schema_version": 1,
        "complete": complete,
        "identity": {
            "benchmark": "local",
            "cohort": "main",
            "task_id": task_id,
            "stratum": "s",
            "model": "m",
            "policy": policy,
            "primitive": "SU",
            "trigger": "Th",
            "threshold_setting": "primary",
            "threshold_tokens": 200,
            "depth": 0.5,
            "summarizer": None,
            "attempt": attempt,
            "seed": 7,
            "cell": run_dir.parent.name,
            "track": "full",
        },
        "outcome": outcome,
        "error": None,
        "timing": {"start": 0.0, "end": 12.5, "wall_s": 12.5},
        "totals": {"steps": 3, "format_errors": 1},
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


def test_one_run_row_worked_by_hand(tmp_path):
    write_run(tmp_path / "cell" / "t1__a1")
    tables = aggregate([tmp_path], processes=1)
    assert tables.problems == []
    row = tables.runs.iloc[0]
    assert (row.agent_calls, row.summary_calls, row.steps) == (3, 1, 3)
    assert row.prompt_tokens == 160 + 212 + 65 + 240
    assert row.completion_tokens == 30 + 40 + 16 + 10
    assert row.total_tokens == 677 + 96
    assert row.peak_prompt_tokens == 240  # agent calls only; the summary request is not the context
    assert row.n_prompt_counts == 3
    assert row.compression_events == 1 and row.compression_freq == pytest.approx(1 / 3)
    assert row.summary_input == 65
    # exact: call 1 shares SYS+TASK (150 -> 144); call 3 shares SYS+TASK with both (144); the summary
    # request is not an agent call. N_cached = 288; N_fresh = 612 - 288 = 324; C = 324 + 28.8 + 65
    assert (row.cached_exact, row.fresh_exact) == (288, 324)
    assert row.billed_exact == pytest.approx(417.8)
    # estimate: call 1 grows from 160 (caches 160); call 3 grows 212 -> 240 after an SU event, which
    # gets no position rule (only OTRC does): floor16(212) = 208
    assert (row.cached_est, row.fresh_est) == (368, 244)
    assert row.billed_est == pytest.approx(244 + 36.8 + 65)
    # measured: server said 0 + 144 + 96 = 240
    assert row.cached_measured == 240 and row.billed_measured == pytest.approx(372 + 24 + 65)
    assert (row.retrieval_cmds, row.execution_cmds) == (1, 1)
    assert (row.resolved, row.has_verdict, row.outcome_class) == (True, True, "success")
    assert row.wall_s == 12.5 and row.format_errors == 1
    calls = tables.calls
    assert calls["kind"].tolist() == ["agent", "agent", "summary", "agent"]
    assert calls["cached_exact"].tolist() == [0, 144, 0, 144]
    assert calls["cached_est"].tolist() == [0, 160, 0, 208]
    assert calls["n_events"].tolist() == [0, 0, 0, 1]
    assert set(calls["run_dir"].astype(str)) == {row.run_dir}


def test_estimate_places_the_change_where_the_event_says(tmp_path):
    # an OTRC event changed the history from index 2 on: of the 264 local tokens before it (SYS..O2),
    # the 150 of SYS+TASK stayed. Call 3 reuses 150/264 of the previous prompt 212: 31800 // 264 = 120,
    # floor16 -> 112 (an SU event at the same place gets no position rule: growth, 208).
    event = {**EVENT, "primitive": "OTRC", "total_tokens_before": 264, "unchanged_prefix_tokens": 150}
    write_run(tmp_path / "cell" / "t1__a1", event=event)
    tables = aggregate([tmp_path], processes=1)
    assert tables.calls["cached_est"].tolist() == [0, 160, 0, 112]
    row = tables.runs.iloc[0]
    assert (row.cached_est, row.fresh_est) == (272, 340)
    assert row.billed_est == pytest.approx(340 + 27.2 + 65)


def test_a_malformed_event_field_is_reported_and_left_out(tmp_path):
    event = {**EVENT, "total_tokens_before": 264, "unchanged_prefix_tokens": "many"}
    run_dir = write_run(tmp_path / "cell" / "t1__a1", event=event)
    tables = aggregate([tmp_path], processes=1)
    assert tables.runs.empty
    (problem,) = tables.problems
    assert problem.path == run_dir / "calls.jsonl"
    assert "call 3" in problem.reason and "unchanged_prefix_tokens" in problem.reason


def test_measured_cost_is_unknown_when_the_server_did_not_report(tmp_path):
    write_run(tmp_path / "cell" / "t1__a1", cached=(0, None, 96))
    row = aggregate([tmp_path], processes=1).runs.iloc[0]
    assert pd.isna(row.billed_measured) and pd.isna(row.cached_measured)
    assert row.billed_exact == pytest.approx(417.8)


def test_bad_records_are_reported_by_path_and_left_out(tmp_path):
    cell = tmp_path / "cell"
    write_run(cell / "good__a1")
    write_run(cell / "incomplete__a1", complete=False)
    partial = write_run(cell / "partial__a1")
    (partial / "calls.jsonl").write_bytes((partial / "calls.jsonl").read_bytes()[:-30])
    unknown = write_run(cell / "unknown__a1")
    (unknown / "messages.jsonl").write_text((unknown / "messages.jsonl").read_text().split("\n", 1)[1])
    no_record = cell / "running__a1"
    no_record.mkdir()
    (no_record / "calls.jsonl").write_text("")
    corrupt = write_run(cell / "corrupt__a1")
    (corrupt / "run.json").write_text("{not json")
    bad_verdict = write_run(cell / "verdict__a1")
    (bad_verdict / "verdict.json").write_text(json.dumps({"resolved": "yes"}))

    tables = aggregate([tmp_path], processes=1)
    assert tables.runs["run_dir"].tolist() == [str(cell / "good__a1")]
    reasons = {p.path.parent.name if p.path.suffix else p.path.name: p.reason for p in tables.problems}
    assert set(reasons) == {"incomplete__a1", "partial__a1", "unknown__a1", "running__a1", "corrupt__a1", "verdict__a1"}
    assert "complete" in reasons["incomplete__a1"]
    assert "partial" in reasons["partial__a1"]
    assert SYS[0] in reasons["unknown__a1"]
    assert reasons["running__a1"] == "missing"
    assert "corrupt" in reasons["corrupt__a1"]
    assert "resolved" in reasons["verdict__a1"]


@pytest.mark.parametrize(
    "outcome, resolved, expected",
    [
        ("submitted", True, "success"),
        ("time_limit", True, "success"),  # a verdict of success wins over the limit
        ("time_limit", False, "time_limited"),
        ("step_limit", False, "step_limited"),
        ("submitted", False, "submitted_unsuccessful"),
        ("error", False, "other"),
        ("format_error_limit", False, "other"),
        (None, False, "other"),
    ],
)
def test_outcome_classes_in_priority_order(outcome, resolved, expected):
    assert outcome_class(outcome, resolved) == expected


def test_missing_verdict_is_unresolved(tmp_path):
    write_run(tmp_path / "cell" / "t1__a1", verdict=False)
    row = aggregate([tmp_path], processes=1).runs.iloc[0]
    assert (row.resolved, row.has_verdict, row.outcome_class) == (False, False, "submitted_unsuccessful")


def test_tables_have_the_documented_columns_and_are_written(tmp_path):
    write_run(tmp_path / "runs" / "cell" / "t1__a1")
    write_run(tmp_path / "runs" / "cell" / "t2__a1", task_id="t2", resolved=False)
    tables = aggregate([tmp_path / "runs"], processes=2)
    runs_path, calls_path = write_tables(tables, tmp_path / "tables")
    runs, calls = pd.read_parquet(runs_path), pd.read_parquet(calls_path)
    assert [c for c in RUNS_COLUMNS if c not in runs.columns] == []
    assert [c for c in CALLS_COLUMNS if c not in calls.columns] == []
    assert len(runs) == 2 and len(calls) == 8
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == ["calls.parquet", "runs.parquet"]


def test_a_table_that_cannot_be_written_leaves_both_tables_as_they_were(tmp_path):
    write_run(tmp_path / "runs" / "cell" / "t1__a1")
    tables = aggregate([tmp_path / "runs"], processes=1)
    out = tmp_path / "tables"
    runs_path, calls_path = write_tables(tables, out)
    before = runs_path.read_bytes(), calls_path.read_bytes()
    unwritable = tables.calls.assign(step=[object()] * len(tables.calls))  # no parquet type for it
    with pytest.raises(ValueError, match="Conversion failed for column step"):  # pyarrow's ArrowInvalid
        write_tables(Tables(tables.runs.iloc[:0], unwritable, []), out)
    assert (runs_path.read_bytes(), calls_path.read_bytes()) == before  # the runs table written, not renamed
    assert sorted(p.name for p in out.iterdir()) == ["calls.parquet", "runs.parquet"]  # no temporary file left


def test_aggregate_cli_reports_left_out_runs(tmp_path, capsys):
    write_run(tmp_path / "runs" / "cell" / "t1__a1")
    write_run(tmp_path / "runs" / "cell" / "t2__a1", complete=False)
    args = SimpleNamespace(
        runs=[tmp_path / "runs"], out=tmp_path / "tables", block=16, discount=0.1, processes=1, strict=False
    )
    assert cli_aggregate.main(args) == 0
    err = capsys.readouterr().err
    assert f"left out: {tmp_path / 'runs' / 'cell' / 't2__a1' / 'run.json'}" in err
    assert cli_aggregate.main(SimpleNamespace(**{**vars(args), "strict": True})) == 1
    with pytest.raises(cli_aggregate.AggregateError) as refused:
        cli_aggregate.main(SimpleNamespace(**{**vars(args), "runs": [tmp_path / "nowhere"]}))
    assert refused.value.exit_code == 2


def test_row_keys_match_the_documented_order(tmp_path):
    from ctxpolicy.metrics.records import RUN_COLUMNS

    write_run(tmp_path / "cell" / "t1__a1")
    assert tuple(aggregate([tmp_path], processes=1).runs.columns) == RUN_COLUMNS


def test_no_readable_runs_gives_empty_tables_with_columns(tmp_path):
    write_run(tmp_path / "cell" / "t1__a1", complete=False)
    tables = aggregate([tmp_path], processes=1)
    assert len(tables.problems) == 1 and tables.runs.empty and tables.calls.empty
    assert "billed_exact" in tables.runs.columns and "cached_exact" in tables.calls.columns
    write_tables(tables, tmp_path / "tables")
    assert pd.read_parquet(tmp_path / "tables" / "runs.parquet").empty


def test_find_run_dirs_skips_runs_moved_aside_as_stale(tmp_path):
    from ctxpolicy.metrics.records import find_run_dirs

    cell = tmp_path / "local" / "m" / "TR_Th_0.5__primary"
    for run in (cell / "t-1__a1", cell / "stale" / "t-1__a1"):
        run.mkdir(parents=True)
        (run / "run.json").write_text("{}")
    assert find_run_dirs([tmp_path]) == [cell / "t-1__a1"]


@pytest.mark.parametrize(
    "mode, expected",
    # a verifier timeout (test_timeout) stopped the tests, not the agent: not time-limited
    [
        ("agent_timeout", "time_limited"),
        ("test_timeout", "submitted_unsuccessful"),
        ("parse_error", "submitted_unsuccessful"),
    ],
)
def test_a_harness_timeout_in_the_verdict_makes_an_unresolved_run_time_limited(tmp_path, mode, expected):
    run_dir = write_run(tmp_path / "cell" / "t1__a1", resolved=False)
    (run_dir / "verdict.json").write_text(
        json.dumps({"resolved": False, "harness": "terminal-bench", "report": {"failure_mode": mode}, "log": ""})
    )
    row = aggregate([tmp_path], processes=1).runs.iloc[0]
    assert (row.outcome, row.outcome_class) == ("submitted", expected)


def test_an_id_arrays_ids_split_in_one_call_as_piece_by_piece():
    import itertools
    import re

    from ctxpolicy.metrics.records import _ids_of

    def piece_by_piece(segment: bytes) -> list[str]:
        return [piece.strip().strip(b'"').decode() for piece in segment.split(b",") if piece.strip()]

    alphabet = [b'"', b",", b"a", b" ", b"\\", b"\xc3"]
    segments = [b"".join(p) for n in range(6) for p in itertools.product(alphabet, repeat=n)]
    segments += [b'"0123456789abcdef","fedcba9876543210"', b'"\xc3\xa9","b"', b'"a", "b"']
    for segment in segments:
        try:
            expected = piece_by_piece(segment)
        except UnicodeDecodeError as exc:
            with pytest.raises(UnicodeDecodeError, match=re.escape(str(exc))):
                _ids_of(segment)
        else:
            assert _ids_of(segment) == expected, segment


@pytest.mark.parametrize("spread", [True, False])
def test_key_positions_find_each_code_as_a_search_of_the_keys_does(spread):
    import numpy as np

    from ctxpolicy.metrics.call_ids import key_positions

    rng = np.random.default_rng(7)
    for n in (1, 2, 9, 240, 1500):
        if spread:  # as fixed_width_keys makes them
            keys = np.unique(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True))
        else:  # every key in the same slot of the table: each found by the search
            keys = np.uint64(0xABC) << np.uint64(52) | np.arange(n, dtype=np.uint64)
        rng.shuffle(keys)
        picked = rng.integers(0, len(keys), 5000)
        assert key_positions(keys, keys[picked]).tolist() == picked.tolist()
        for unknown in (keys[0] ^ np.uint64(1 << 40), keys[0] ^ np.uint64(1), np.uint64(2**64 - 1)):
            if unknown not in keys:
                assert key_positions(keys, np.append(keys[picked], unknown)) is None
    assert key_positions(np.zeros(0, np.uint64), np.zeros(0, np.uint64)).tolist() == []
    assert key_positions(np.zeros(0, np.uint64), np.ones(1, np.uint64)) is None


def test_parser_workers_that_keep_freed_memory_read_as_the_main_process(tmp_path):
    import platform
    from concurrent.futures import ProcessPoolExecutor

    from ctxpolicy.metrics.aggregate import keep_freed_memory

    for number in range(4):
        write_run(tmp_path / "runs" / "cell" / f"t{number}__a1", task_id=f"t{number}", resolved=number % 2 == 0)
    if platform.libc_ver()[0] == "glibc":  # the settings are taken (in a process of its own, as a worker's)
        with ProcessPoolExecutor(1) as pool:
            assert pool.submit(keep_freed_memory).result() is True
    serial, pooled = (aggregate([tmp_path / "runs"], processes=n) for n in (1, 2))
    pd.testing.assert_frame_equal(serial.runs, pooled.runs)
    pd.testing.assert_frame_equal(serial.calls, pooled.calls)
