"""Synthetic run directories follow the run-record contract and carry policy effects."""

from __future__ import annotations

import hashlib
import json

from ctxpolicy.metrics.aggregate import aggregate
from ctxpolicy.metrics.compare import compare_to_baseline
from ctxpolicy.testing.runs import make_runs

POLICIES = ["FC", "TR/Th/0.5", "TRC/Th", "SU/Th/0.5"]


def test_layout_and_contract_fields(tmp_path):
    runs = make_runs(
        tmp_path, policies=POLICIES, settings=["tight", "primary"], tasks=3, attempts=2, calls_per_run=12, seed=5
    )
    # FC once, each other policy per setting: (1 + 3 * 2) cells * 3 tasks * 2 attempts
    assert len(runs) == 42 and len(set(runs)) == 42
    assert runs[0] == tmp_path / "local" / "qwen05b" / "FC" / "task-0000__a1"
    assert (tmp_path / "local" / "qwen05b" / "TR_Th_0.5__tight" / "task-0002__a2").is_dir()
    for run_dir in runs:
        record = json.loads((run_dir / "run.json").read_text())
        assert record["complete"] is True and record["identity"]["cell"] == run_dir.parent.name
        store = {}
        for line in (run_dir / "messages.jsonl").read_text().splitlines():
            entry = json.loads(line)
            canonical = json.dumps(entry["message"], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            assert entry["id"] == hashlib.sha256(canonical.encode()).hexdigest()[:16]
            store[entry["id"]] = entry["tokens"]
        calls = [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines()]
        assert [c["index"] for c in calls] == list(range(len(calls)))
        assert all(set(c["message_ids"]) <= set(store) for c in calls)
        for c in calls:
            if c["kind"] == "summary":  # a summary call precedes the agent call of its step
                following = calls[c["index"] + 1]
                assert following["kind"] == "agent" and following["step"] == c["step"] and following["events"]
            for event in c["events"]:  # one stage per policy here: the call's head is the unchanged prefix
                head = c["message_ids"][: event["first_changed_index"]]
                assert event["unchanged_prefix_tokens"] == sum(store[m] for m in head)


def test_same_seed_same_files(tmp_path):
    a = make_runs(tmp_path / "a", policies=POLICIES, tasks=2, attempts=1, calls_per_run=8, seed=9)
    b = make_runs(tmp_path / "b", policies=POLICIES, tasks=2, attempts=1, calls_per_run=8, seed=9, processes=2)
    for x, y in zip(a, b):
        for name in ("run.json", "calls.jsonl", "messages.jsonl"):
            assert (x / name).read_text() == (y / name).read_text()


def test_policies_have_visible_effects(tmp_path):
    make_runs(tmp_path, policies=POLICIES, tasks=20, attempts=2, calls_per_run=20, seed=1)
    tables = aggregate([tmp_path], processes=1)
    assert tables.problems == []
    runs = tables.runs
    by_policy = runs.groupby("policy", observed=True)
    assert by_policy["compression_events"].sum()["FC"] == 0
    assert (by_policy["compression_events"].sum().drop("FC") > 0).all()
    assert by_policy["summary_calls"].sum()["SU/Th/0.5"] > 0
    peaks = by_policy["peak_prompt_tokens"].mean()
    assert (peaks.drop("FC") < peaks["FC"]).all()
    assert set(runs["outcome_class"]) >= {"success", "submitted_unsuccessful", "time_limited"}
    table = compare_to_baseline(runs, model="qwen05b", benchmark="local", n_boot=200)
    assert len(table) == 3 and (table["tokens_ratio_est"] < 1).all()
