"""Cohort files: parsing, seeded stratified drawing, the shipped study cohorts and `ctxpolicy cohort`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from ctxpolicy.benchmarks import BenchmarkError, get_adapter
from ctxpolicy.benchmarks.catalog import catalog_for
from ctxpolicy.benchmarks.cli_cohort import main as cohort_main
from ctxpolicy.benchmarks.cohorts import (
    cohort_problems,
    draw_cohorts,
    parse_cohort,
    read_cohort,
    stratified_sample,
)
from ctxpolicy.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
COHORTS = REPO / "config" / "cohorts"


def run_cli(argv: list[str]) -> int:
    return cohort_main(build_parser().parse_args(["cohort", *argv]))


def test_parse_skips_comments_and_blank_lines():
    assert parse_cohort("# header\n\na  # why\nb\n") == ["a", "b"]


def test_duplicate_ids_are_an_error_naming_both_lines():
    with pytest.raises(BenchmarkError, match=r"x\.txt:3: duplicate task id 'a' \(first on line 1\)"):
        parse_cohort("a\nb\na\n", "x.txt")


def test_empty_and_missing_cohort_files_are_errors(tmp_path):
    with pytest.raises(BenchmarkError, match="lists no task ids"):
        parse_cohort("# nothing\n")
    with pytest.raises(BenchmarkError, match="cohort file not found"):
        read_cohort(tmp_path / "nope.txt")


def test_stratified_sample_is_seeded_and_respects_quotas():
    items = [(f"{s}-{i}", s) for s in "ab" for i in range(10)]
    first = stratified_sample(items, {"a": 3, "b": 2}, seed=7)
    assert first == stratified_sample(list(reversed(items)), {"a": 3, "b": 2}, seed=7)
    assert Counter(i[0] for i in first) == {"a": 3, "b": 2}
    assert first != stratified_sample(items, {"a": 3, "b": 2}, seed=8)
    with pytest.raises(BenchmarkError, match="has 10 tasks, cannot draw 11"):
        stratified_sample(items, {"a": 11}, seed=7)


def test_draw_cohorts_draws_subsets_from_their_parent_and_orders_by_rank():
    items = [(f"t{i:02d}", "ab"[i % 2], i % 3) for i in range(30)]
    design = {"main": {"strata": {"a": 6, "b": 6}}, "sweep": {"from": "main", "strata": {"a": 2, "b": 1}}}
    cohorts = draw_cohorts(items, design, seed=1)
    assert set(cohorts["sweep"]) <= set(cohorts["main"])
    rank = {i: r for i, _, r in items}
    assert [rank[i] for i in cohorts["main"]] == sorted(rank[i] for i in cohorts["main"])
    with pytest.raises(BenchmarkError, match="not defined before it"):
        draw_cohorts(items, {"sweep": {"from": "main", "strata": {"a": 1}}}, seed=1)


def test_cohort_problems_reports_every_kind_of_mistake():
    stratum_of = {"a": "x", "b": "x", "c": "y"}
    problems = cohort_problems(["a", "a", "zz"], stratum_of, {"x": 2}, subset_of=["a"])
    assert any("duplicate ids: a" in p for p in problems)
    assert any("unknown ids: zz" in p for p in problems)
    assert any("not in the parent cohort: zz" in p for p in problems)
    assert cohort_problems(["a", "c"], stratum_of, {"x": 1, "y": 1}) == []


def test_shipped_swebench_cohorts_match_the_study():
    stratum_of = catalog_for("swebench").stratum_of
    main, sweep = read_cohort(COHORTS / "swebench_main.txt"), read_cohort(COHORTS / "swebench_sweep.txt")
    assert Counter(stratum_of[i] for i in main) == {"django": 34, "sympy": 34, "scikit-learn": 32}
    assert Counter(stratum_of[i] for i in sweep) == {"django": 9, "sympy": 8, "scikit-learn": 8}
    assert set(sweep) <= set(main)
    # SWE-bench Verified holds exactly 32 scikit-learn instances: the study takes all of them
    assert sum(s == "scikit-learn" for s in stratum_of.values()) == 32


def test_shipped_terminalbench_cohorts_match_the_study():
    known = set(catalog_for("terminalbench").stratum_of)
    assert len(known) == 80
    main, sweep = read_cohort(COHORTS / "terminalbench_main.txt"), read_cohort(COHORTS / "terminalbench_sweep.txt")
    assert len(main) == 40 and len(sweep) == 15
    assert set(sweep) <= set(main) <= known


@pytest.mark.parametrize("adapter", ["swebench", "terminalbench"])
def test_generate_reproduces_the_shipped_cohorts(adapter, tmp_path, capsys):
    assert run_cli(["generate", "--adapter", adapter, "--seed", "1234", "--out", str(tmp_path)]) == 0
    for cohort in ("main", "sweep"):
        assert read_cohort(tmp_path / f"{adapter}_{cohort}.txt") == read_cohort(COHORTS / f"{adapter}_{cohort}.txt")
    assert "tasks" in capsys.readouterr().out


def test_generate_reads_the_cube_metadata_format(tmp_path):
    import json

    index = json.loads((REPO / "src/ctxpolicy/benchmarks/data/swebench_verified.json").read_text())
    cube = [
        {
            "id": i["instance_id"],
            "repo": i["repo"],
            "version": i["version"],
            "base_commit": i["base_commit"],
            "difficulty": i["difficulty"],
            "container_config": {"image": i["image"]},
        }
        for i in index["instances"]
    ]
    (tmp_path / "task_metadata.json").write_text(json.dumps(cube))
    out = tmp_path / "out"
    assert (
        run_cli(
            [
                "generate",
                "--adapter",
                "swebench",
                "--metadata",
                str(tmp_path / "task_metadata.json"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert read_cohort(out / "swebench_main.txt") == read_cohort(COHORTS / "swebench_main.txt")


def test_local_cohorts_put_easy_tasks_first_and_sweep_inside_main():
    catalog = catalog_for("local")
    main, sweep = read_cohort(COHORTS / "local_main.txt"), read_cohort(COHORTS / "local_sweep.txt")
    assert set(main) == set(catalog.stratum_of)
    assert set(sweep) <= set(main)
    assert set(Counter(catalog.stratum_of[i] for i in sweep)) == {"tinyweb", "tinysym", "tinylearn", "terminal"}
    rank = {i: r for i, _, r in catalog.items}
    assert all(rank[i] == 0 for i in main[:5]), "the first tasks of the main cohort must be easy ones"


@pytest.mark.parametrize("config", ["config/config.yaml", "config/paper.yaml"])
def test_cohort_check_passes_on_the_shipped_configs(config, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert run_cli(["check", "--config", config]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out and out.count("OK") >= 2


def test_cohort_check_fails_on_a_bad_cohort(tmp_path, capsys, monkeypatch):
    import yaml

    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    bad = tmp_path / "bad.txt"
    bad.write_text("hello-world\nno-such-task\n")
    config["benchmarks"]["local"]["cohorts"]["sweep"] = str(bad)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert run_cli(["check", "--config", str(tmp_path / "c.yaml")]) == 2
    assert "unknown ids: no-such-task" in capsys.readouterr().out


def test_cohort_list_prints_sizes(capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert run_cli(["list", "--config", "config/paper.yaml", "--benchmark", "swebench"]) == 0
    assert "100 tasks (django 34, scikit-learn 32, sympy 34)" in capsys.readouterr().out


def test_adapter_rejects_unknown_ids_and_duplicates_before_any_run(tmp_path):
    adapter = get_adapter("local", {"adapter": "local", "cohorts": {"x": "x.txt", "y": "y.txt"}}, tmp_path)
    (tmp_path / "x.txt").write_text("hello-world\nnot-a-task\n")
    (tmp_path / "y.txt").write_text("hello-world\nhello-world\n")
    with pytest.raises(BenchmarkError, match="unknown task id\\(s\\): not-a-task"):
        adapter.tasks("x")
    with pytest.raises(BenchmarkError, match="duplicate task id 'hello-world'"):
        adapter.tasks("y")
    with pytest.raises(BenchmarkError, match="no cohort 'z'"):
        adapter.tasks("z")
    swebench = get_adapter("swebench", {"adapter": "swebench", "cohorts": {"x": "x.txt"}}, tmp_path)
    with pytest.raises(BenchmarkError, match="unknown task id"):
        swebench.tasks("x")  # checked against the vendored index before any dataset is loaded


def test_get_adapter_rejects_an_unknown_adapter():
    with pytest.raises(
        BenchmarkError, match="benchmarks.b.adapter: 'nope' is not one of local, swebench, terminalbench"
    ):
        get_adapter("b", {"adapter": "nope"}, Path("."))
