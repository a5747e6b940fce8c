"""calls.jsonl schema version 2 (docs/schema.md, "Version 2: prompt encoding"): the encoder, the
one reader in ``ctxpolicy.rundir``, every reader on both versions, and replays that store only
what they add."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctxpolicy import rundir
from ctxpolicy.agent.record import rebuild_prompts
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.analysis.windows import read_transcript
from ctxpolicy.metrics import cli_cost
from ctxpolicy.metrics.aggregate import aggregate, write_tables
from ctxpolicy.metrics.records import RecordError, read_run
from ctxpolicy.policies import parse_spec
from ctxpolicy.replay import read_source_run, replay_source
from ctxpolicy.replay.output import write_replay
from ctxpolicy.replay.placeholder import PlaceholderSummarizer
from ctxpolicy.rundir import CALLS_JSONL, MESSAGES_JSONL, RUN_JSON, PromptEncoder, RunRecordError, resolve_prompts
from ctxpolicy.testing.runs import make_runs
from ctxpolicy.testing.transcripts import write_fc_run

# runs.parquet and calls.parquet of these version-1 runs, written by the code before version 2
# existed (make_runs(Path("runs"), tasks=3, attempts=2, calls_per_run=12), aggregated from the
# folder holding "runs", one process)
V1_TABLES = {
    "runs.parquet": "2c57aae82e024f6b8a24a302fe824ff01b6ff2a2369f4fa9814b68553e4a578a",
    "calls.parquet": "fe5d00fc6d015dd1ce73bba220e571a2cfdc4b3cde7a6475826ae8c458723063",
}
# runs.parquet gains columns by design (docs/schema.md): the old code's columns, as CSV, are pinned
# too (sha256 of ``pd.read_parquet(runs.parquet).to_csv(index=False)`` from that code)
# Two changes since, both on purpose, so both CSV pins below are of today's code: the estimate's
# OTRC rule (issue 28: the cleared message placed in its own prompt; the *_est columns) and the
# synthetic runs' wall_s, which now includes their setup time (issue 29: latency from the agent's
# start, ``testing.runs``); the tables differ from the old code's in those columns only
V1_RUN_COLUMNS_CSV = "73ab2438a5980c3b0b4b8d4f1ab7f79b0f3abd88a1769f5ba9ecac02336107e8"
V1_RUN_COLUMNS = (
    "run_dir", "cell", "track", "benchmark", "cohort", "model", "policy", "primitive", "trigger", "depth", "setting",
    "threshold_tokens", "summarizer", "task_id", "stratum", "attempt", "seed", "outcome", "error", "resolved",
    "has_verdict", "outcome_class", "wall_s", "steps", "agent_calls", "summary_calls", "prompt_tokens",
    "completion_tokens", "total_tokens", "peak_prompt_tokens", "n_prompt_counts", "compression_events",
    "compression_freq", "format_errors", "billed_exact", "fresh_exact", "cached_exact", "billed_est", "fresh_est",
    "cached_est", "billed_measured", "cached_measured", "summary_input", "retrieval_cmds", "execution_cmds",
)  # fmt: skip
# calls.parquet gains a column per cost method (metrics.cost_methods): the old columns, as CSV
V1_CALL_COLUMNS_CSV = "b0c4c9272feb6e382c128eb5550c9b9e105521a458e99a13c274d4a31aff51e3"
V1_CALL_COLUMNS = (
    "run_dir", "cell", "benchmark", "model", "policy", "setting", "task_id", "attempt", "index", "kind", "step",
    "start", "end", "latency_s", "prompt_tokens", "completion_tokens", "cached_tokens", "est_tokens_before",
    "est_tokens_after", "n_events", "cached_exact", "cached_est",
)  # fmt: skip
V1_EVENTS = "8bb6d6cd6087a081d8bb8fc6b418ed3ddad9e8c62450fba98b766baddaf29699"  # ctxpolicy audit, same runs


def to_version_2(run_dir: Path) -> None:
    """Rewrite a version-1 calls.jsonl in version 2 (the same calls, prompts encoded)."""
    encoder = PromptEncoder()
    lines = rundir.read_call_lines(run_dir)
    text = "".join(json.dumps(encoder.encode_line(line), ensure_ascii=False) + "\n" for line in lines)
    (run_dir / CALLS_JSONL).write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def v1_runs(tmp_path_factory) -> Path:
    """The version-1 fixture runs (as written before version 2), under ``{root}/runs``."""
    root = tmp_path_factory.mktemp("v1")
    make_runs(root / "runs", tasks=3, attempts=2, calls_per_run=12)
    return root


@pytest.fixture(scope="module")
def v2_runs(v1_runs, tmp_path_factory) -> Path:
    """The same runs with every calls.jsonl re-encoded in version 2."""
    root = tmp_path_factory.mktemp("v2")
    shutil.copytree(v1_runs / "runs", root / "runs")
    for run_dir in rundir.find_run_dirs(root / "runs"):
        to_version_2(run_dir)
    return root


def _tables(root: Path, monkeypatch) -> dict[str, str]:
    monkeypatch.chdir(root)
    out = root / "tables"
    paths = write_tables(aggregate([Path("runs")], processes=1), out)
    hashes = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    runs = pd.read_parquet(out / "runs.parquet")
    if list(runs.columns) != list(V1_RUN_COLUMNS):  # columns added since: compare the old ones
        old = runs[list(V1_RUN_COLUMNS)].to_csv(index=False).encode()
        hashes["runs.parquet"] = (
            V1_TABLES["runs.parquet"] if hashlib.sha256(old).hexdigest() == V1_RUN_COLUMNS_CSV else "differs"
        )
    calls = pd.read_parquet(out / "calls.parquet")
    if list(calls.columns) != list(V1_CALL_COLUMNS):
        old = calls[list(V1_CALL_COLUMNS)].to_csv(index=False).encode()
        hashes["calls.parquet"] = (
            V1_TABLES["calls.parquet"] if hashlib.sha256(old).hexdigest() == V1_CALL_COLUMNS_CSV else "differs"
        )
    return hashes


def test_version_1_tables_are_byte_identical_to_the_old_codes_and_version_2_gives_the_same(
    v1_runs, v2_runs, monkeypatch
):
    v1 = _tables(v1_runs, monkeypatch)
    assert v1 == V1_TABLES
    assert _tables(v2_runs, monkeypatch) == v1
    assert (v1_runs / "tables" / "runs.parquet").read_bytes() == (v2_runs / "tables" / "runs.parquet").read_bytes()


def test_the_audit_of_version_1_runs_is_byte_identical_to_the_old_codes_serial_or_parallel(
    v1_runs, v2_runs, monkeypatch, capsys
):
    from ctxpolicy import cli

    for root, processes in ((v1_runs, "1"), (v2_runs, "2")):
        monkeypatch.chdir(root)
        out = root / f"events-{processes}.parquet"
        assert (
            cli.main(["audit", "--runs", "runs", "--out", str(out), "--resamples", "10", "--processes", processes]) == 0
        )
        assert hashlib.sha256(out.read_bytes()).hexdigest() == V1_EVENTS
    capsys.readouterr()


def test_the_encoding_is_linear_under_fc_and_resolves_to_the_whole_prompts(v1_runs, v2_runs):
    for v1 in rundir.find_run_dirs(v1_runs / "runs"):
        v2 = v2_runs / v1.relative_to(v1_runs)
        lines = rundir.read_call_lines(v2)
        assert all("message_ids" not in line and "prompt" in line for line in lines)
        assert rundir.read_calls(v2) == rundir.read_calls(v1) == list(rundir.read_jsonl(v1 / CALLS_JSONL))
        if "/FC/" in str(v1):  # each agent prompt is the previous one plus the round's two messages
            agent = [line["prompt"] for line in lines if line["kind"] == "agent"]
            assert all(p["base"] is not None and len(p["add"]) == 2 for p in agent[1:])
        listed = sum(len(line["prompt"]["add"]) for line in lines)
        assert listed < sum(len(call["message_ids"]) for call in rundir.read_calls(v1))


def test_every_reader_reads_both_versions_alike(v1_runs, v2_runs):
    for v1 in rundir.find_run_dirs(v1_runs / "runs"):
        v2 = v2_runs / v1.relative_to(v1_runs)
        # make_runs' run.json is a reading view's, not the whole contract: only the lines must conform
        problems = [
            [p.replace(str(root), "") for p in run_dir_problems(run)] for root, run in ((v1_runs, v1), (v2_runs, v2))
        ]
        assert problems[0] == problems[1] and not [p for p in problems[1] if RUN_JSON not in p]
        assert rebuild_prompts(v2) == rebuild_prompts(v1)
        assert read_transcript(v2) == read_transcript(v1)
        old, new = read_run(v1), read_run(v2)
        assert {k: v for k, v in old.row.items() if k != "run_dir"} == {
            k: v for k, v in new.row.items() if k != "run_dir"
        }
        for name, column in old.calls.items():
            np.testing.assert_array_equal(column, new.calls[name])
        priced = []
        for run in (v1, v2):
            lines = (run / CALLS_JSONL).read_text().splitlines()
            calls = cli_cost.read_calls(lines, str(run), need_tokens=False)
            priced.append(cli_cost.price(cli_cost.with_message_tokens(calls, run), 16, 0.1))
        assert priced[0] == priced[1] and priced[0]["exact"] is not None
    fc = next(d for d in rundir.find_run_dirs(v1_runs / "runs") if d.parent.name == "FC")
    old, new = read_source_run(fc), read_source_run(v2_runs / fc.relative_to(v1_runs))
    assert (old.agent_calls, old.reply_tokens, old.tokens) == (new.agent_calls, new.reply_tokens, new.tokens)


def test_cost_reads_version_1_and_2_lines_from_a_file(v1_runs, v2_runs, capsys):
    from argparse import Namespace

    fc = next(d for d in rundir.find_run_dirs(v1_runs / "runs") if d.parent.name == "FC")
    outputs = []
    for run in (fc, v2_runs / fc.relative_to(v1_runs)):
        assert cli_cost.main(Namespace(block=16, discount=0.1, input=run / CALLS_JSONL, json=True)) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] and outputs[0]["exact"] is not None


def _line(index: int, kind: str, prompt: dict) -> dict:
    return {"index": index, "kind": kind, "prompt": prompt}


def test_encoder_picks_the_longest_shared_prefix_of_the_last_line_of_each_kind():
    from ctxpolicy.rundir import CallRecord

    def call(index, kind, ids):
        return CallRecord(
            index=index, kind=kind, step=1, start=0.0, end=0.0, latency_s=0.0, status="ok", error=None,
            prompt_tokens=1, completion_tokens=1, cached_tokens=None, est_tokens_before=1, est_tokens_after=1,
            message_ids=ids, events=[],
        )  # fmt: skip

    a, b, c, d, s = (f"{n:016x}" for n in range(5))
    encoder = PromptEncoder()
    calls = [
        call(0, "agent", [a, b]),
        call(1, "summary", [s, b]),
        call(2, "agent", [a, b, c]),
        call(3, "agent", [a, d]),  # a truncation: one kept, one new
        call(4, "summary", [s, b, c]),
    ]
    lines = [encoder.encode(x) for x in calls]
    assert [line["prompt"] for line in lines] == [
        {"base": None, "keep": 0, "add": [a, b]},
        {"base": None, "keep": 0, "add": [s, b]},
        {"base": 0, "keep": 2, "add": [c]},
        {"base": 2, "keep": 1, "add": [d]},
        {"base": 1, "keep": 2, "add": [c]},
    ]
    omitted = {f.name for f in dataclasses.fields(CallRecord) if f.metadata.get("omitted_when_null")}
    assert omitted >= {"usage_source", "provider_cost_usd", "reply_id"}
    assert list(lines[0]) == [("prompt" if f == "message_ids" else f) for f in rundir.CALL_FIELDS if f not in omitted]
    assert resolve_prompts(lines) == [x.message_ids for x in calls]


@pytest.mark.parametrize(
    "lines, field",
    [
        ([_line(0, "agent", {"base": 3, "keep": 0, "add": []})], "prompt.base is 3: no earlier call line"),
        ([_line(0, "agent", {"base": [], "keep": 0, "add": []})], "prompt.base is []: no earlier call line"),
        ([_line(0, "agent", {"base": None, "keep": 1, "add": []})], "prompt.keep is 1: not 0 without a base"),
        (
            [
                _line(0, "agent", {"base": None, "keep": 0, "add": ["x"]}),
                _line(1, "agent", {"base": 0, "keep": 2, "add": []}),
            ],
            "prompt.keep is 2: more than base's 1 ids",
        ),
        ([_line(0, "agent", {"base": None, "keep": 0, "add": "x"})], "prompt.add is 'x'"),
        ([_line(0, "agent", [])], "field prompt is []: not an object"),
        ([{"index": 0, "kind": "agent", "message_ids": "x"}], "field message_ids is 'x': not an array"),
    ],
)
def test_a_prompt_that_cannot_be_resolved_is_one_error_naming_the_line_and_field(lines, field):
    with pytest.raises(RunRecordError) as caught:
        resolve_prompts(lines, "run/calls.jsonl")
    assert str(caught.value).startswith("run/calls.jsonl: line ") and field in str(caught.value)


# ---------------------------------------------------------------- replays


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """One synthetic FC run under results/runs, replayed into results/replay (version 2) and the
    same replays written the version-1 way (whole prompts, whole store) for comparison."""
    results = tmp_path_factory.mktemp("results")
    source_dir = write_fc_run(results / "runs" / "synthetic" / "m" / "FC" / "t__a1", seed=5, task_id="t", steps=16)
    source = read_source_run(source_dir)
    final = source.agent_calls[-1]["est_tokens_after"]
    pairs = []
    for policy in ("FC", "TR/Th/0.5", "TRC/Th", "S/Th/0.5", "OTRC/St", "CC/Th"):
        spec = parse_spec(policy)
        replayed = replay_source(source, spec, threshold=final // 2, summarizer=PlaceholderSummarizer())
        v2 = write_replay(replayed, results / "replay", setting="fixed", summarizer=None, real_summaries=False)
        v1 = results / "replay-v1" / v2.relative_to(results / "replay")
        shutil.copytree(v2, v1)
        (v1 / MESSAGES_JSONL).write_text("".join(json.dumps(m, ensure_ascii=False) + "\n" for m in replayed.messages))
        (v1 / CALLS_JSONL).write_text("".join(c.line() for c in replayed.calls))
        record = rundir.read_run_json(v1)
        del record[rundir.MESSAGE_BASE]
        rundir.write_run_json(v1, record)
        pairs.append((policy, replayed, v1, v2))
    return results, source, pairs


def test_a_replay_stores_only_what_its_policy_wrote_and_names_its_source(replays):
    results, source, pairs = replays
    for policy, replayed, _, v2 in pairs:
        for name in (MESSAGES_JSONL, CALLS_JSONL):  # compressed, read as plain by every reader
            assert (v2 / name).read_bytes()[:2] == rundir.GZIP_MAGIC
        own = [line["id"] for line in rundir.read_jsonl(v2 / MESSAGES_JSONL)]
        assert not set(own) & set(source.store)
        assert set(own) == {m["id"] for m in replayed.messages} - set(source.store)
        base = rundir.read_run_json(v2)[rundir.MESSAGE_BASE]
        assert not Path(base["run"]).is_absolute() and rundir.message_base(v2) == source.run_dir
        assert base["sha256"] == hashlib.sha256((source.run_dir / MESSAGES_JSONL).read_bytes()).hexdigest()
        if policy == "FC":
            assert own == []
    moved = results.parent / (results.name + "-moved")  # relative references survive a move
    shutil.copytree(results, moved)
    v2 = moved / pairs[1][3].relative_to(results)
    assert rebuild_prompts(v2) == rebuild_prompts(pairs[1][3])


def test_every_reader_reads_a_replay_as_it_read_the_version_1_replay(replays):
    _, fc, pairs = replays
    source = read_run(fc.run_dir)
    for policy, replayed, v1, v2 in pairs:
        assert run_dir_problems(v2) == [], policy
        sent = {m["id"]: m["message"] for m in replayed.messages}
        assert rebuild_prompts(v2) == rebuild_prompts(v1) == [[sent[i] for i in c.message_ids] for c in replayed.calls]
        old, new = read_transcript(v1), read_transcript(v2)  # the store: the replay's and its source's
        assert (old.steps, old.replies, old.agent_steps) == (new.steps, new.replies, new.agent_steps), policy
        assert {k: new.store[k] for k in old.store} == old.store
        old, new = read_run(v1), read_run(v2)
        # the commands are counted over the whole store, the source's included (the agent's actions
        # are held fixed): the source's last answer, in no prompt, counts too
        commands = ("run_dir", "retrieval_cmds", "execution_cmds")
        assert {k: v for k, v in old.row.items() if k not in commands} == {
            k: v for k, v in new.row.items() if k not in commands
        }, policy
        assert (
            old.row["retrieval_cmds"] + old.row["execution_cmds"]
            <= new.row["retrieval_cmds"] + new.row["execution_cmds"]
        )
        if policy == "FC":
            assert [new.row[k] for k in commands[1:]] == [source.row[k] for k in commands[1:]]
        for name, column in old.calls.items():
            np.testing.assert_array_equal(column, new.calls[name])


def test_a_replay_whose_source_is_gone_or_changed_is_named(replays, tmp_path):
    results, source, pairs = replays
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    v2 = copy / pairs[1][3].relative_to(results)
    store = copy / source.run_dir.relative_to(results) / MESSAGES_JSONL
    store.write_text(store.read_text() + '{"id": "0000000000000000", "tokens": 1, "message": {}}\n')
    assert any("message_base.sha256" in p for p in run_dir_problems(v2))
    store.unlink()
    with pytest.raises(RecordError, match="has no messages.jsonl"):
        read_run(v2)
    assert any("message_base" in p for p in run_dir_problems(v2))


def test_a_changed_run_json_is_read_again_for_the_store_chain(replays, tmp_path):
    # message_base keeps a source's run.json while the file is unchanged (one read for all its replays)
    results, source, pairs = replays
    copy = tmp_path / "results"
    shutil.copytree(results, copy)
    v2, source_dir = copy / pairs[1][3].relative_to(results), copy / source.run_dir.relative_to(results)
    assert rundir.message_store_files(v2) == [v2 / MESSAGES_JSONL, source_dir / MESSAGES_JSONL]
    record = rundir.read_run_json(source_dir)
    record[rundir.MESSAGE_BASE] = {"run": os.path.relpath(v2, source_dir)}  # the source now names its replay
    rundir.write_run_json(source_dir, record)
    with pytest.raises(RunRecordError, match="a loop or too deep"):
        rundir.message_store_files(v2)
    record = rundir.read_run_json(v2)
    del record[rundir.MESSAGE_BASE]
    rundir.write_run_json(v2, record)
    assert rundir.message_base(v2) is None and rundir.message_store_files(v2) == [v2 / MESSAGES_JSONL]
    (v2 / RUN_JSON).unlink()
    assert rundir.message_base(v2) is None


def test_bundles_carry_and_check_a_replays_source_runs(replays, tmp_path):
    import tarfile

    from ctxpolicy.provenance.bundle import BundleError, check_bundle, export_bundle
    from ctxpolicy.provenance.runs import run_record_files

    results, source, pairs = replays
    copy = tmp_path / "results"
    shutil.copytree(results, copy, ignore=shutil.ignore_patterns("replay-v1"))
    source_rel = source.run_dir.relative_to(results)
    # the source lies outside the bundled folders: it is carried all the same
    (copy / "imported").mkdir()
    shutil.move(copy / "runs", copy / "imported" / "runs")
    for _, _, _, v2 in pairs:
        run = copy / v2.relative_to(results)
        record = rundir.read_run_json(run)
        record[rundir.MESSAGE_BASE] = rundir.message_base_record(
            run, copy / "imported" / source_rel, record[rundir.MESSAGE_BASE]["sha256"]
        )
        rundir.write_run_json(run, record)
    manifest = export_bundle(copy, tmp_path / "b.tar.gz")
    paths = {f["path"] for f in manifest["files"]}
    assert f"imported/{source_rel}/{MESSAGES_JSONL}" in paths and f"imported/{source_rel}/{RUN_JSON}" in paths
    assert {b["base"] for b in manifest["message_bases"]} == {f"imported/{source_rel}"}
    assert len(manifest["message_bases"]) == len(pairs)
    check_bundle(tmp_path / "b.tar.gz")
    hashed = run_record_files(copy / "replay")
    assert copy / "imported" / source_rel / MESSAGES_JSONL in hashed

    forged = tmp_path / "forged.tar.gz"  # the source store swapped, manifest rewritten to match it
    with tarfile.open(tmp_path / "b.tar.gz") as tar, tarfile.open(forged, "w:gz") as out:
        for member in tar:
            data = tar.extractfile(member).read()
            if member.name.endswith(f"imported/{source_rel}/{MESSAGES_JSONL}"):
                data = data + b'{"id": "0000000000000000", "tokens": 1, "message": {}}\n'
                digest = hashlib.sha256(data).hexdigest()
            if member.name == "MANIFEST.json":
                listed = json.loads(data)
                for entry in listed["files"]:
                    if entry["path"].endswith(f"{source_rel}/{MESSAGES_JSONL}"):
                        entry["sha256"] = digest
                data = json.dumps(listed).encode()
            member.size = len(data)
            out.addfile(member, io.BytesIO(data))
    with pytest.raises(BundleError, match="is not the one it was written against"):
        check_bundle(forged)

    outside = tmp_path / "elsewhere"
    shutil.move(copy / "imported" / "runs", outside)
    for _, _, _, v2 in pairs:
        run = copy / v2.relative_to(results)
        record = rundir.read_run_json(run)
        record[rundir.MESSAGE_BASE] = rundir.message_base_record(
            run, outside / source_rel.relative_to("runs"), record[rundir.MESSAGE_BASE]["sha256"]
        )
        rundir.write_run_json(run, record)
    with pytest.raises(BundleError, match="outside"):
        export_bundle(copy, tmp_path / "c.tar.gz")


def test_aggregating_replays_reads_each_source_store_once_per_process(replays, monkeypatch):
    from ctxpolicy.metrics import records

    results, _, pairs = replays
    records._base_store.cache_clear()
    rows = pd.DataFrame([read_run(v2).row for _, _, _, v2 in pairs])
    assert records._base_store.cache_info().misses == 1 and len(rows) == len(pairs)


# ---------------------------------------------------------------- content pieces


def test_a_summary_request_is_stored_in_pieces_and_read_back_exactly(replays):
    _, source, pairs = replays
    _, replayed, _, v2 = next(p for p in pairs if p[0] == "S/Th/0.5")
    raw = list(rundir.read_jsonl(v2 / MESSAGES_JSONL))
    pieced = [line for line in raw if rundir.CONTENT_PIECES in line]
    assert pieced, "the summary requests repeat the source's messages: they are written in pieces"
    for line in pieced:
        assert "content" not in line["message"] and line["message"]["role"] != "assistant"
        refs = [p for p in line[rundir.CONTENT_PIECES] if isinstance(p, dict)]
        assert refs and all(r["id"] in source.store or r["id"] in {m["id"] for m in raw} for r in refs)
    written = [m for m in replayed.messages if m["id"] not in source.store]
    assert rundir.read_message_lines(v2)[: len(written)] == written  # what was written, exactly
    plain = sum(len(json.dumps(m, ensure_ascii=False)) for m in written if m["id"] in {p["id"] for p in pieced})
    assert sum(len(json.dumps(line, ensure_ascii=False)) for line in pieced) < plain / 2


def _rewrite_store(run: Path, change) -> None:
    lines = list(rundir.read_jsonl(run / MESSAGES_JSONL))
    change(lines)
    (run / MESSAGES_JSONL).write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda line: line[rundir.CONTENT_PIECES].append({"id": "0" * 16, "start": 0, "end": 1}), ".id is '0000"),
        (lambda line: line[rundir.CONTENT_PIECES].append(7), "is 7: not a string or a reference"),
        (lambda line: next(p for p in line[rundir.CONTENT_PIECES] if isinstance(p, dict)).update(end=10**9), "within"),
        (lambda line: line["message"].update(role="assistant"), "on an assistant message"),
    ],
)
def test_a_piece_that_cannot_be_resolved_is_named(replays, tmp_path, change, field):
    results, _, pairs = replays
    copy = tmp_path / "results"
    shutil.copytree(results, copy, ignore=shutil.ignore_patterns("replay-v1"))
    run = copy / next(p for p in pairs if p[0] == "S/Th/0.5")[3].relative_to(results)
    _rewrite_store(run, lambda lines: change(next(line for line in lines if rundir.CONTENT_PIECES in line)))
    with pytest.raises(RunRecordError) as caught:
        rundir.read_message_lines(run)
    assert str(caught.value).startswith(f"{run / MESSAGES_JSONL}: line ") and field in str(caught.value)
    assert run_dir_problems(run) != []


def test_content_pieces_find_the_sources_in_order_and_join_back():
    sources = [("a" * 16, "  " + "x" * 300 + "\n"), ("b" * 16, "short"), ("c" * 16, "y" * 400)]
    text = "head " + "x" * 300 + " mid " + "y" * 400 + " tail"
    pieces = rundir.content_pieces(text, sources)
    assert pieces == [
        "head ",
        {"id": "a" * 16, "start": 2, "end": 302},
        " mid ",
        {"id": "c" * 16, "start": 0, "end": 400},
        " tail",
    ]
    contents = dict(sources)
    assert "".join(p if isinstance(p, str) else contents[p["id"]][p["start"] : p["end"]] for p in pieces) == text
    assert rundir.content_pieces("nothing copied here", sources) is None
