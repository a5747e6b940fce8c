"""`snakemake --report` of a small study as the reviewer's front page: the start page renders
without an RST error, each figure's and table's caption says what it shows (from the figure
catalog), with its pairs and missing-data notes, tables are rendered, entries are in study order,
and each cell's trajectory index is linked (docs/workflow.md, docs/view.md)."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import require
from workflow_helpers import snakemake, write_study

from ctxpolicy.figures.catalog import report_captions, targets_for
from ctxpolicy.study import load_study
from ctxpolicy.testing.views import write_event_runs
from ctxpolicy.view.browser import Session, chromium
from ctxpolicy.view.pages import write_index

PNG = Path(__file__).resolve().parents[1] / "docs" / "view-run-page.png"
SHOWN = ("fig2", "fig3", "cost_sensitivity", "table6")  # their captions are checked word for word


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The report of a one-task study whose every figure, Table 6 and one cell's trajectory index
    (as its view rule writes it: the run pages inside) were made: (report, targets)."""
    tmp_path = tmp_path_factory.mktemp("report")
    config_path = write_study(tmp_path, "config.yaml", {"main": ["tinyweb-001"], "sweep": ["tinyweb-001"]})
    targets = targets_for(load_study(config_path))
    figures = tmp_path / "figures"
    figures.mkdir()
    made = [n for n, spec in targets.items() if spec["kind"] == "figure" or n in SHOWN]
    for name in made:  # what each target's job would have written
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
    write_index(runs["TR"].parent, view / "index.html", "estimated", embed=True)  # as the view rule does
    report = tmp_path / "report.html"
    wanted = [f"figures/{n}.png" for n in made if targets[n]["kind"] == "figure"] + [
        "figures/table6.csv",
        "results/view/local/qwen05b/FC/index.html",
    ]
    done = snakemake(tmp_path, config_path, "--report", str(report), *wanted)
    assert done.returncode == 0, done.stderr[-3000:]
    return report, targets


def test_the_report_start_page_captions_tables_order_and_trajectories(report):
    report, targets = report
    page = report.read_text(encoding="utf-8")

    assert "System Message" not in page and "Inline literal" not in page  # no RST error anywhere
    assert "ctxpolicy study <strong>local</strong>" in page
    captions = report_captions(targets)
    order = [captions[n] for n in targets if n in SHOWN]
    for caption in order:
        assert f"<strong>{caption['label']}</strong>: {html.escape(caption['shows'], quote=False)}." in page
    for caption in order:
        if caption["pairs"]:
            assert f"Pairs (model/benchmark): {caption['pairs']}." in page
    for name in SHOWN[:3]:
        assert f"{name}: no FC run finished within the time limit" in page  # the notes, in the caption
    assert re.search(r"<table[^>]*>.*?<th[^>]*>model</th>.*?<td>2400</td>", page, re.DOTALL)  # table rendered
    sections = [captions[n]["section"] for n in targets if n in SHOWN and targets[n]["kind"] == "figure"]
    assert sections == sorted(sections) and sections[2].endswith("cost_sensitivity")  # catalog order, not names
    assert re.search(r'"name": "index.html", "filename": "index.html", "labels": \{"cell": "FC"\}', page)  # the index
    assert "Trajectory pages of cell" in page


CLICK = """(() => {
  const link = Array.from(document.querySelectorAll("a")).find(a => a.textContent.trim() === %s);
  if (link) link.click();
  return Boolean(link);
})()"""
MENU = "Array.from(document.querySelectorAll('nav a, ul a')).map(a => a.textContent.trim()).filter(t => t)"


def test_in_chromium_a_trajectory_link_opens_its_run_and_figures_follow_the_study(report):
    """Clicked through in chromium as a reader would: Figures lists the study's figures in its
    order, then this repository's; under Trajectories the cell's index opens in the report's
    frame, and its run link opens the run page there (not a blank frame)."""
    require(chromium() is not None, "chromium (Debian package chromium) for the page tests")
    report, targets = report
    captions = report_captions(targets)
    figures = [captions[n]["section"] for n, spec in targets.items() if spec["kind"] == "figure"]
    numbers = [targets[n]["number"] for n, spec in targets.items() if spec["kind"] == "figure"]
    assert numbers[:12] == [2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15] and None in numbers
    with Session() as browser:
        browser.open(report)
        browser.wait_for("document.body.innerText.includes('Trajectories')")
        assert browser.evaluate(CLICK % json.dumps("Figures"))
        browser.wait_for(f"document.body.innerText.includes({json.dumps(figures[-1])})")
        shown = [t for t in browser.evaluate(MENU) if t in figures]
        assert shown == figures  # 00 Figure 2, 01 Figure 3, ..., then the repository's own
        assert [t.split(" ", 1)[1] for t in shown[:12]] == [f"Figure {n}" for n in numbers[:12]]

        browser.open(report)
        browser.wait_for("document.body.innerText.includes('Trajectories')")
        assert browser.evaluate(CLICK % json.dumps("Trajectories"))
        browser.wait_for("document.querySelectorAll('table a[iconname=eye]').length > 0")
        browser.evaluate("document.querySelector('table a[iconname=eye]').click()")
        frame = browser.wait_for(
            "(document.querySelector('iframe') || {}).src && document.querySelector('iframe').src.slice(0, 15)"
        )
        assert frame == "data:text/html;"  # the index, shown alone: no runs/ beside it
        (index,) = [f["id"] for f in browser.frames()[1:]]
        browser.wait_for("document.querySelector('a[data-page]') !== null", index)
        assert browser.evaluate("document.querySelector('a[data-page]').textContent", index) == "task-0000__a1"
        browser.evaluate("document.querySelector('a[data-page]').click()", index)
        page = browser.wait_for(
            "document.querySelector('#timeline') && document.body.getAttribute('data-ready') && document.title",
            index,
        )
        assert page == "task-0000 · TR/Th/0.5 · attempt 1"
        assert browser.evaluate("document.querySelectorAll('#timeline tr').length", index) > 8
