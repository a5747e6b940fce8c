"""`snakemake --report` of a small study as the reviewer's front page: the start page renders
without an RST error, each figure's and table's caption says what it shows (from the figure
catalog), with its pairs and missing-data notes, tables are rendered, entries are in study order,
and each cell's trajectory index is linked (docs/workflow.md, docs/view.md)."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from workflow_helpers import snakemake, write_study

from ctxpolicy.study.config import load_config
from ctxpolicy.figures.catalog import report_caption, targets_for
from ctxpolicy.testing.views import write_event_runs
from ctxpolicy.view.pages import write_index

PNG = Path(__file__).resolve().parents[1] / "docs" / "view-run-page.png"
SHOWN = ("fig2", "fig3", "cost_models", "table6")


def test_the_report_start_page_captions_tables_order_and_trajectories(tmp_path):
    config_path = write_study(tmp_path, "config.yaml", {"main": ["tinyweb-001"], "sweep": ["tinyweb-001"]})
    config = load_config(config_path)
    targets = targets_for(config)
    figures = tmp_path / "figures"
    figures.mkdir()
    for name in SHOWN:  # what each target's job would have written
        for output in targets[name]["outputs"]:
            path = tmp_path / output
            if output.endswith(".png"):
                shutil.copyfile(PNG, path)
            elif output.endswith(".notes.json"):
                path.write_text(f'["{name}: no FC run finished within the time limit"]')
            elif output.endswith(".csv") and not output.endswith(".data.csv"):
                path.write_text("model,benchmark,primary\nqwen05b,local,2400\n")
            else:
                path.write_text("x\n")
    runs = write_event_runs(tmp_path / "runs", steps=8)
    view = tmp_path / "results" / "view" / "local" / "qwen05b" / "FC"
    write_index(runs["TR"].parent, view / "index.html", "estimated")
    report = tmp_path / "report.html"
    wanted = [f"figures/{n}.png" for n in SHOWN[:3]] + [
        "figures/table6.csv",
        "results/view/local/qwen05b/FC/index.html",
    ]
    done = snakemake(tmp_path, config_path, "--report", str(report), *wanted)
    assert done.returncode == 0, done.stderr[-3000:]
    page = report.read_text(encoding="utf-8")

    assert "System Message" not in page and "Inline literal" not in page  # no RST error anywhere
    assert "ctxpolicy study <strong>local</strong>" in page
    order = [report_caption(n, s, i) for i, (n, s) in enumerate(targets.items()) if n in SHOWN]
    for caption in order:
        assert f"<strong>{caption['label']}</strong>: {html.escape(caption['shows'], quote=False)}." in page
    for caption in order:
        if caption["pairs"]:
            assert f"Pairs (model/benchmark): {caption['pairs']}." in page
    for name in SHOWN[:3]:
        assert f"{name}: no FC run finished within the time limit" in page  # the notes, in the caption
    assert re.search(r"<table[^>]*>.*?<th[^>]*>model</th>.*?<td>2400</td>", page, re.DOTALL)  # table rendered
    sections = [c["section"] for c in order]
    assert sections == sorted(sections) and sections[2].endswith("cost_models")  # catalog order, not names
    assert re.search(r'"name": "index.html", "filename": "index.html", "labels": \{"cell": "FC"\}', page)  # the index
    assert "Trajectory pages of cell" in page
