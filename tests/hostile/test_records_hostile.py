"""Hostile run records: one bad record never stops an aggregate, and a rewritten chain is caught.

Every bad record sits among good runs. The good runs must come out in the tables, the tables
must be written, and the bad run must be named with the file, the field and the value that are
wrong. The provenance case rewrites a run record together with the hash its table's sidecar
recorded for it, which a chain of sidecar hashes must still reveal.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ctxpolicy import cli
from ctxpolicy.metrics import records
from ctxpolicy.metrics.aggregate import LEFT_OUT_FILE, aggregate
from ctxpolicy.testing.runs import make_runs
from ctxpolicy.provenance import sidecar_path, verify

GOOD_TASKS = 3


def _edit_json(path: Path, change) -> None:
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def _edit_call(field: str, value, line: int = 1):
    def edit(run_dir: Path) -> None:
        path = run_dir / "calls.jsonl"
        calls = [json.loads(text) for text in path.read_text().splitlines()]
        calls[line][field] = value
        path.write_text("".join(json.dumps(call) + "\n" for call in calls))

    return edit


def _edit_run(change):
    return lambda run_dir: _edit_json(run_dir / "run.json", change)


def _into_directory(name: str):
    def edit(run_dir: Path) -> None:
        (run_dir / name).unlink(missing_ok=True)
        (run_dir / name).mkdir()
        (run_dir / name / "x").write_text("{}")

    return edit


def _edit_message_tokens(run_dir: Path) -> None:
    path = run_dir / "messages.jsonl"
    entries = [json.loads(text) for text in path.read_text().splitlines()]
    entries[0]["tokens"] = str(entries[0]["tokens"])
    path.write_text("".join(json.dumps(entry) + "\n" for entry in entries))


def _write_verdict(resolved):
    return lambda run_dir: (run_dir / "verdict.json").write_text(
        json.dumps({"resolved": resolved, "harness": "h", "report": {}, "log": ""})
    )


# name -> (how the run is spoiled, the file blamed, what the reason must say)
BAD = {
    "attempt-word": (
        _edit_run(lambda r: r["identity"].update(attempt="one")),
        "run.json",
        ["identity.attempt", "'one'", "integer"],
    ),
    "totals-word": (_edit_run(lambda r: r.update(totals="lots")), "run.json", ["totals", "'lots'", "object"]),
    "timing-list": (_edit_run(lambda r: r.update(timing=[1, 2])), "run.json", ["timing", "[1, 2]", "object"]),
    "wall-word": (
        _edit_run(lambda r: r["timing"].update(wall_s="slow")),
        "run.json",
        ["timing.wall_s", "'slow'", "number"],
    ),
    "depth-word": (
        _edit_run(lambda r: r["identity"].update(depth="half")),
        "run.json",
        ["identity.depth", "'half'", "number"],
    ),
    "no-outcome": (_edit_run(lambda r: r.pop("outcome")), "run.json", ["field outcome is missing"]),
    "unknown-outcome": (_edit_run(lambda r: r.update(outcome="won")), "run.json", ["outcome", "'won'"]),
    "run-json-directory": (_into_directory("run.json"), "run.json", ["directory"]),
    "index-word": (_edit_call("index", "zero"), "calls.jsonl", ["line 2", "index", "'zero'", "integer"]),
    "prompt-word": (_edit_call("prompt_tokens", "many"), "calls.jsonl", ["prompt_tokens", "'many'", "integer"]),
    "prompt-bool": (_edit_call("prompt_tokens", True), "calls.jsonl", ["prompt_tokens", "True"]),
    "cached-negative": (_edit_call("cached_tokens", -3), "calls.jsonl", ["cached_tokens", "-3", "minimum"]),
    "latency-word": (_edit_call("latency_s", "slow"), "calls.jsonl", ["latency_s", "'slow'", "number"]),
    "events-word": (_edit_call("events", "none"), "calls.jsonl", ["events", "'none'", "array"]),
    "calls-directory": (_into_directory("calls.jsonl"), "calls.jsonl", ["directory"]),
    "tokens-text": (_edit_message_tokens, "messages.jsonl", ["line 1", "tokens", "integer"]),
    "verdict-word": (_write_verdict("yes"), "verdict.json", ["resolved", "'yes'", "boolean"]),
    "verdict-directory": (_into_directory("verdict.json"), "verdict.json", ["directory"]),
}


@pytest.fixture(scope="module")
def good_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("good") / "runs"
    made = make_runs(root, policies=["TR/Th/0.5"], tasks=GOOD_TASKS, attempts=1, calls_per_run=6, seed=3)
    for run_dir in made:  # every good run graded, so a verdict case always replaces a real one
        _write_verdict(True)(run_dir)
    return root


def _tree_with(good_runs: Path, where: Path, names: list[str]) -> tuple[list[str], dict[str, Path]]:
    shutil.copytree(good_runs, where)
    good = sorted(str(p.parent) for p in where.rglob("run.json"))
    template = Path(good[0])
    bad = {}
    for name in names:
        run_dir = template.parent / f"{name}__a1"
        shutil.copytree(template, run_dir)
        BAD[name][0](run_dir)
        bad[name] = run_dir
    return good, bad


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_record_is_named_and_the_good_runs_are_aggregated(good_runs, tmp_path, name):
    good, bad = _tree_with(good_runs, tmp_path / "runs", [name])
    tables = aggregate([tmp_path / "runs"], processes=1)
    assert sorted(tables.runs["run_dir"]) == good
    assert len(tables.calls) > 0 and set(tables.calls["run_dir"].astype(str)) == set(good)
    [problem] = tables.problems
    _, blamed, says = BAD[name]
    assert problem.path == bad[name] / blamed
    for words in says:
        assert words in problem.reason


def test_aggregate_writes_tables_and_lists_every_bad_record(good_runs, tmp_path, capsys):
    good, bad = _tree_with(good_runs, tmp_path / "runs", sorted(BAD))
    out = tmp_path / "tables"
    assert cli.main(["aggregate", "--runs", str(tmp_path / "runs"), "--out", str(out), "--processes", "2"]) == 0
    assert sorted(pd.read_parquet(out / "runs.parquet")["run_dir"]) == good
    assert set(pd.read_parquet(out / "calls.parquet")["run_dir"]) == set(good)
    err = capsys.readouterr().err
    left_out = json.loads((out / LEFT_OUT_FILE).read_text())
    assert left_out["runs"] == len(good)
    listed = {Path(entry["path"]): entry["reason"] for entry in left_out["left_out"]}
    for name, run_dir in bad.items():
        path = run_dir / BAD[name][1]
        assert f"left out: {path}: {listed[path]}" in err
    assert len(listed) == len(BAD)
    # a clean aggregate afterwards does not leave the old list behind
    shutil.rmtree(tmp_path / "runs")
    shutil.copytree(good_runs, tmp_path / "runs")
    assert cli.main(["aggregate", "--runs", str(tmp_path / "runs"), "--out", str(out), "--processes", "1"]) == 0
    assert json.loads((out / LEFT_OUT_FILE).read_text()) == {"runs": len(good), "left_out": []}


def test_an_unforeseen_failure_leaves_only_that_run_out(good_runs, tmp_path, monkeypatch):
    good, _ = _tree_with(good_runs, tmp_path / "runs", [])
    victim = good[1]
    counted = records.count_commands

    def count_or_fail(messages, action_format=None):
        if any("boom" in str(m) for m in messages):
            raise RuntimeError("a reader bug")
        return counted(messages, action_format)

    monkeypatch.setattr(records, "count_commands", count_or_fail)
    store = Path(victim) / "messages.jsonl"
    entries = [json.loads(text) for text in store.read_text().splitlines()]
    assistant = next(e for e in entries if e["message"]["role"] == "assistant")
    assistant["message"]["content"] += " boom"
    store.write_text("".join(json.dumps(e) + "\n" for e in entries))
    tables = aggregate([tmp_path / "runs"], processes=1)
    assert sorted(tables.runs["run_dir"]) == [d for d in good if d != victim]
    [problem] = tables.problems
    assert problem.path == Path(victim) and "RuntimeError: a reader bug" in problem.reason


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_rewriting_a_run_and_its_recorded_hash_together_is_detected(good_runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(good_runs, "results/runs")
    table, figure = Path("results/tables/runs.parquet"), Path("figures/fig.pdf")
    table.parent.mkdir(parents=True)
    table.write_bytes(b"table")
    assert cli.main(["provenance", "record", str(table), "--runs", "results/runs"]) == 0
    figure.parent.mkdir()
    figure.write_bytes(b"figure")
    assert cli.main(["provenance", "record", str(figure), "--inputs", str(table)]) == 0
    assert verify(figure)[1] == []

    # The forger changes a run's outcome and the hash the table's sidecar recorded for it.
    run_json = sorted(Path("results/runs").rglob("run.json"))[0]
    _edit_json(run_json, lambda r: r.update(outcome="submitted" if r["outcome"] != "submitted" else "error"))
    table_sidecar = sidecar_path(table)

    def forge(sidecar: dict) -> None:
        for entry in sidecar["inputs"]:
            if Path(table_sidecar.parent, entry["path"]).resolve() == run_json.resolve():
                entry["sha256"] = _sha256(run_json)

    _edit_json(table_sidecar, forge)
    assert verify(table)[1] == []  # the table's own sidecar now agrees with the forged run

    _, problems = verify(figure)
    assert [(p.path, p.problem, p.sidecar) for p in problems] == [
        (table_sidecar.as_posix(), "changed", sidecar_path(figure).as_posix())
    ]
    capsys.readouterr()
    assert cli.main(["provenance", "verify", str(figure)]) == 1
    assert f"changed  {table_sidecar.as_posix()}" in capsys.readouterr().out
