"""The end summary of scripts/study.sh (workflow/scripts/study_summary.py) on a results tree
made by hand: cells done, runs by outcome, figures written, missing-data notes, warnings."""

from __future__ import annotations

import importlib.util
import json

import yaml

from ctxpolicy.paths import REPO_ROOT
from ctxpolicy.study import load_study

spec = importlib.util.spec_from_file_location("study_summary", REPO_ROOT / "workflow/scripts/study_summary.py")
study_summary = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study_summary)


def test_summary_counts_cells_outcomes_figures_notes_and_warnings(tmp_path):
    data = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    data["results_dir"], data["figures_dir"] = str(tmp_path / "results"), str(tmp_path / "figures")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    study = load_study(path)
    cells = list(study.cells)
    for cell, outcomes in zip(cells[:2], ({"time_limit": 3}, {"step_limit": 2, "submitted": 1})):
        cell_dir = cell.run_root(study.results_dir)
        cell_dir.mkdir(parents=True)
        warnings = ["3 of 3 runs hit the wall-time limit"] if "time_limit" in outcomes else []
        (cell_dir / "cell.json").write_text(json.dumps({"outcomes": outcomes, "warnings": warnings}))
    thresholds = tmp_path / "results" / "thresholds" / "local" / "qwen05b.json"
    thresholds.parent.mkdir(parents=True)
    thresholds.write_text(json.dumps({"primary": 500, "warnings": ["all 3 FC runs hit the wall-time limit"]}))
    figures = tmp_path / "figures"
    figures.mkdir()
    for name in ("fig2.pdf", "fig2.png", "fig3.pdf"):
        (figures / name).write_bytes(b"x")
    (figures / "fig2.notes.json").write_text(json.dumps(["no FC run finished within the time limit"]))
    (figures / "fig3.pdf.prov.json").write_text(json.dumps({"notes": ["no compression events"]}))

    index = tmp_path / "results" / "view" / cells[0].benchmark / cells[0].model / cells[0].slug / "index.html"
    index.parent.mkdir(parents=True)
    index.write_text("<!doctype html>")
    lines = study_summary.summarize(study)
    assert lines[0] == f"cells done: 2 of {len(cells)}"
    assert lines[1] == "runs: 6 (time_limit 3, step_limit 2, submitted 1)"
    assert lines[2] == (
        "thresholds local/qwen05b: tight None, primary 500, loose None; distinct and each below an FC peak: yes"
    )
    assert lines[3].startswith(
        "figures and tables written: 4 of "
    )  # fig2.pdf, .png, .notes.json; fig3.pdf and "missing: " in lines[3]
    assert lines[4] == "drawn with a missing-data note: 2"
    assert f"  {figures}/fig2: no FC run finished within the time limit" in lines
    assert f"  {figures}/fig3: no compression events" in lines
    assert lines[lines.index("warnings: 2") + 1].endswith("FC: 3 of 3 runs hit the wall-time limit")
    assert lines[-1] == f"  {thresholds}: all 3 FC runs hit the wall-time limit"
    assert f"trajectory pages: 1 of {len(cells)} cells under {tmp_path}/results/view/; open {index}" in lines


def test_summary_says_when_the_local_sweep_cannot_sweep(tmp_path):
    data = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    data["results_dir"], data["figures_dir"] = str(tmp_path / "results"), str(tmp_path / "figures")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    thresholds = tmp_path / "results" / "thresholds" / "local" / "qwen05b.json"
    thresholds.parent.mkdir(parents=True)
    merged = {"tight": 810, "primary": 810, "loose": 810, "peaks": [810, 814, 868], "warnings": []}
    thresholds.write_text(json.dumps(merged))
    lines = study_summary.summarize(load_study(path))
    assert "distinct and each below an FC peak: no (see warnings)" in lines[2]
    assert any("tight = primary = loose = 810 tokens" in line for line in lines)
    thresholds.write_text(json.dumps({**merged, "primary": 811, "loose": 812}))
    assert study_summary.summarize(load_study(path))[2].endswith("distinct and each below an FC peak: yes")
