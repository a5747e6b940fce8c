"""The paper-shaped synthetic data set (ctxpolicy.testing.paper) covers the study's grid."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxpolicy.analysis.audit import audit_run
from ctxpolicy.study.grid import cohort_tasks, expand_grid
from ctxpolicy.metrics.aggregate import aggregate
from ctxpolicy.policies import parse_spec
from ctxpolicy.testing.paper import (
    CONFIG,
    load_paper_config,
    make_paper_dataset,
    missing_attempt,
    run_specs,
    write_thresholds,
)
from ctxpolicy.testing.runs import write_runs

REAL_NAMES = re.compile(r"qwen|devstral|glm|gemma|mistral|llama", re.IGNORECASE)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("paper")
    used = make_paper_dataset(out, task_cap=2, seed=3, processes=2)
    return out, load_paper_config(used)


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_whatever_the_processes(small, tmp_path):
    """The fixture's runs (2 processes) written again in 1 process, byte for byte: those of every
    cohort's first task (every cell, every attempt; a run's bytes depend on its identity alone,
    not on the tasks beside it), which is half the data set and checks the same."""
    out, _ = small
    again = tmp_path / "again"
    config = load_paper_config(make_paper_dataset(again, task_cap=1, seed=3, processes=1))
    written = _files(again / "runs")
    firsts = {
        t for b, bench in config["benchmarks"].items() for c in bench["cohorts"] for t in cohort_tasks(config, b, c)
    }
    expected = {
        str(p.relative_to(out / "runs"))
        for p in (out / "runs").glob("*/*/*/*/*")
        if p.is_file() and p.parent.name.rsplit("__a", 1)[0] in firsts
    }
    assert written and set(written) == expected
    assert all((out / "runs" / name).read_bytes() == data for name, data in written.items())
    # another seed: the first run of the grid alone is enough to differ
    other = tmp_path / "other"
    config = load_paper_config(CONFIG, task_cap=1, results_dir=other)
    write_thresholds(config)
    write_runs(run_specs(config, seed=4)[:1])
    first = next(p for p in sorted((other / "runs").rglob("calls.jsonl")))
    assert first.read_bytes() != (out / "runs" / first.relative_to(other / "runs")).read_bytes()


def test_every_cell_of_the_grid_has_every_attempt_of_its_cohort_but_the_missing_ones(small):
    out, config = small
    cells = expand_grid(config)
    assert len(cells) == len(expand_grid(load_paper_config(CONFIG)))  # the cap cuts tasks, not cells
    written = {p.relative_to(out / "runs").parent for p in (out / "runs").glob("*/*/*/*/run.json")}
    expected = set()
    for cell in cells:
        for task in cohort_tasks(config, cell.benchmark, cell.cohort):
            for attempt in (1, 2, 3):
                if missing_attempt(cell.slug, task, attempt):
                    assert not (cell.run_root(out) / f"{task}__a{attempt}").exists()
                    continue
                expected.add(Path(cell.benchmark, cell.model, cell.slug, f"{task}__a{attempt}"))
                record = json.loads((cell.run_root(out) / f"{task}__a{attempt}" / "run.json").read_text())
                assert record["identity"]["cell"] == cell.slug and record["identity"]["track"] == cell.track
    assert {p.parent for p in expected} == {p.parent for p in written} and expected == written
    missing = sum(
        missing_attempt(c.slug, t, a)
        for c in cells
        for t in cohort_tasks(config, c.benchmark, c.cohort)
        for a in (2, 3)
    )
    assert missing > 0  # the data set holds missing attempts (counted unresolved, docs/metrics.md)


def test_aggregate_reads_every_run_and_finds_the_outcome_mix(small):
    out, config = small
    tables = aggregate([out / "runs"], processes=1)
    assert tables.problems == []
    runs = tables.runs
    assert len(runs) == sum(1 for _ in (out / "runs").glob("*/*/*/*/run.json"))
    assert set(runs["model"]) == {"synth-a", "synth-b", "synth-c"}
    assert {"success", "submitted_unsuccessful", "time_limited"} <= set(runs["outcome_class"])
    assert (runs.loc[runs["policy"] == "FC", "compression_events"] == 0).all()
    assert (runs.loc[runs["policy"] != "FC"].groupby("policy", observed=True)["compression_events"].sum() > 0).all()
    summarizing = runs["policy"].astype(str).map(lambda p: parse_spec(p).needs_summarizer)
    assert (runs[summarizing].groupby("policy", observed=True)["summary_calls"].sum() > 0).all()
    assert (runs.loc[~summarizing, "summary_calls"] == 0).all()
    assert set(runs.loc[runs["summarizer"].notna(), "summarizer"]) == {"synth-sum-a", "synth-sum-b"}


def test_no_real_model_names_anywhere_in_the_records(small):
    out, config = small
    assert not REAL_NAMES.search(json.dumps(config["models"]))
    for run_json in list((out / "runs").glob("*/*/*/*/run.json"))[::50]:
        text = run_json.read_text() + (run_json.parent / "calls.jsonl").read_text()
        assert not REAL_NAMES.search(text), run_json


def test_the_audit_finds_compression_steps_and_anchors(small):
    out, _ = small
    rows = [
        row
        for cell in ("TR_Th_0.5__primary", "SU_Th_0.5__primary", "OTRCplusTR_StplusTh_0.5__primary")
        for run_dir in sorted((out / "runs" / "swebench" / "synth-a" / cell).iterdir())
        for row in audit_run(run_dir)
    ]
    assert rows
    assert sum(r["anchors_at_risk"] for r in rows) > 0
    assert sum(r["anchors_summarised"] for r in rows) > 0
    assert sum(r["anchors_kept"] + r["anchors_summarised"] for r in rows) < sum(r["anchors_at_risk"] for r in rows)


def test_thresholds_files_are_the_presets(small):
    out, config = small
    values = json.loads((out / "thresholds" / "swebench" / "synth-a.json").read_text())
    assert (values["tight"], values["primary"], values["loose"]) == (10000, 15000, 20000)
    assert json.loads((out / "thresholds" / "terminalbench" / "synth-c.json").read_text())["tight"] is None
