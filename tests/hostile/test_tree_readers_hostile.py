"""`audit`, `cost --runs` and `view` as robust as `aggregate` (issue 30): one reader of a run tree
(`rundir.read_tree`), the same "left out: PATH: reason" report, the rest computed; and
`calls.parquet` cuts an impossible cached count to the prompt as the runs table does.

The tree holds three good runs and, beside them, a run.json nested 100,000 deep, a run.json that is
not JSON, an open proxy conversation and (for `cost --runs`) a complete run whose calls.jsonl is cut.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ctxpolicy import cli
from ctxpolicy.rundir import is_complete_run
from ctxpolicy.testing.runs import make_runs

TASKS = 3


@pytest.fixture(scope="module")
def good_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tree") / "runs"
    make_runs(root, policies=["TR/Th/0.5"], tasks=TASKS, attempts=1, calls_per_run=8, seed=11)
    return root


def _hostile_tree(good_runs: Path, where: Path) -> tuple[list[Path], dict[str, Path]]:
    shutil.copytree(good_runs, where)
    good = sorted(p.parent for p in where.rglob("run.json"))
    cell = good[0].parent
    bad = {name: cell / f"{name}__a1" for name in ("deep", "notjson", "open")}
    for run in bad.values():
        shutil.copytree(good[0], run)
    (bad["deep"] / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    (bad["notjson"] / "run.json").write_text('{"complete": true, "identity": ')
    record = json.loads((good[0] / "run.json").read_text())
    record.update(complete=False, proxy={"open": True, "requests": 8})
    (bad["open"] / "run.json").write_text(json.dumps(record))
    return good, bad


def _left_out(err: str, prefix: str = "") -> dict[str, str]:
    lines = [line.removeprefix(prefix) for line in err.splitlines() if line.startswith(f"{prefix}left out: ")]
    return {Path(line.split(": ")[1]).name: line for line in lines}


def test_the_tree_reader_names_every_run_that_does_not_count(good_runs, tmp_path):
    from ctxpolicy.rundir import read_tree

    good, bad = _hostile_tree(good_runs, tmp_path / "runs")
    assert not is_complete_run(bad["deep"])  # no RecursionError
    tree = read_tree(tmp_path / "runs")
    assert tree.runs == good
    reasons = {p.path.name: p.reason for p in tree.left_out}
    assert "nested too deeply" in reasons["deep__a1"]
    assert "not valid JSON" in reasons["notjson__a1"]
    assert "still open" in reasons["open__a1"]


def test_audit_names_the_runs_it_leaves_out_and_audits_the_rest(good_runs, tmp_path, capsys):
    good, bad = _hostile_tree(good_runs, tmp_path / "runs")
    out = tmp_path / "events.parquet"
    assert cli.main(["audit", "--runs", str(tmp_path / "runs"), "--out", str(out), "--processes", "1"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    left = _left_out(captured.err)
    assert sorted(left) == ["deep__a1", "notjson__a1", "open__a1"], captured.err
    assert "still open" in left["open__a1"] and "nested too deeply" in left["deep__a1"]
    assert sorted(set(pd.read_parquet(out)["run_dir"])) == [str(p) for p in good]
    assert f"from {TASKS} runs (3 left out)" in captured.out


def test_cost_runs_prices_the_good_runs_and_names_the_bad(good_runs, tmp_path, capsys):
    good, bad = _hostile_tree(good_runs, tmp_path / "runs")
    cut = good[0].parent / "cut__a1"
    shutil.copytree(good[0], cut)
    calls = (cut / "calls.jsonl").read_text()
    (cut / "calls.jsonl").write_text(calls + '{"index": 99, "kind": "agent", "prompt')
    assert cli.main(["cost", "--runs", str(tmp_path / "runs"), "--json"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    left = _left_out(captured.err, "cost: ")
    assert sorted(left) == ["cut__a1", "deep__a1", "notjson__a1", "open__a1"], captured.err
    result = json.loads(captured.out)
    assert sorted(row["run"] for row in result["runs"]) == [str(p) for p in good]
    assert all(row["estimated"] > 0 for row in result["runs"])
    assert sorted(Path(p["run"]).name for p in result["left_out"]) == sorted(left)


def test_view_indexes_the_good_runs_and_lists_the_rest_with_reasons(good_runs, tmp_path, capsys):
    good, bad = _hostile_tree(good_runs, tmp_path / "runs")
    cell = good[0].parent
    spoiled = cell / "spoiled__a1"
    shutil.copytree(good[0], spoiled)
    (spoiled / "messages.jsonl").write_text("")  # complete, but no page can be built: its prompts are gone
    page = tmp_path / "index.html"
    assert cli.main(["view", "--runs", str(cell), "--out", str(page)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    left = _left_out(captured.err, "view: ")
    assert sorted(left) == ["deep__a1", "notjson__a1", "open__a1", "spoiled__a1"], captured.err
    html = page.read_text()
    for run in good:
        assert f'href="runs/{run.name}.html"' in html
    assert 'id="left-out"' in html and "still open" in html and "spoiled__a1" in html


def test_calls_table_cuts_an_impossible_cached_count_to_the_prompt(good_runs, tmp_path):
    shutil.copytree(good_runs, tmp_path / "runs")
    run = sorted(p.parent for p in (tmp_path / "runs").rglob("run.json"))[0]
    calls = [json.loads(line) for line in (run / "calls.jsonl").read_text().splitlines()]
    calls[1]["cached_tokens"] = 10**9
    (run / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))
    tables = tmp_path / "tables"
    assert cli.main(["aggregate", "--runs", str(tmp_path / "runs"), "--out", str(tables), "--processes", "1"]) == 0
    table = pd.read_parquet(tables / "calls.parquet")
    mine = table[table["run_dir"] == str(run)].sort_values("index")
    assert mine["cached_tokens"].iloc[1] == mine["prompt_tokens"].iloc[1] < 10**9
    known = table.dropna(subset=["cached_tokens"])
    assert (known["cached_tokens"] <= known["prompt_tokens"]).all()
