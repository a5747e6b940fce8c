"""The trajectory pages in a real headless browser (Debian's chromium, installed by
scripts/test.sh): the script runs (``data-ready``), the timeline and the events are in the DOM, a
call's messages open, hostile text stays text, and nothing reaches the console."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from conftest import require
from view_helpers import render

from ctxpolicy.testing.views import write_event_runs, write_hostile_run
from ctxpolicy.view.browser import chromium, open_page, screenshot

ARTIFACTS = Path(os.environ.get("CTXPOLICY_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts"))


@pytest.fixture  # not module-scoped: the page tests need no shared state and may run on two workers
def browser():
    require(chromium() is not None, "chromium (Debian package chromium) for the page tests")


def test_a_run_page_runs_its_script_and_opens_a_call(browser, tmp_path):
    runs = write_event_runs(tmp_path / "runs", steps=16)
    page = render(runs["stacked"], tmp_path / "stacked.html")
    opened = open_page(page_path := tmp_path / "stacked.html", "#messages-9")
    assert opened.console == []
    assert re.search(r'<body[^>]* data-ready="1"', opened.dom)
    assert '<table id="timeline"' in opened.dom and 'class="event" data-primitive="OTRC"' in opened.dom
    assert re.search(r'<aside id="panel">', opened.dom)  # shown: no hidden attribute left
    assert "run A, call 9" in opened.dom and opened.dom.count('class="message role-') >= 3
    shot = screenshot(page_path, ARTIFACTS / "view" / "run-page.png", "#messages-9")
    assert shot.stat().st_size > 10_000
    assert page.count('class="event"') == opened.dom.count('class="event"')
    index = tmp_path / "cell" / "index.html"
    render(runs["stacked"].parent, index)
    opened = open_page(index)
    assert opened.console == [] and re.search(r'<body[^>]* data-ready="0"', opened.dom)  # no run data embedded
    assert 'href="runs/task-0000__a1.html"' in opened.dom


def test_a_hostile_page_stays_inert_in_the_browser(browser, tmp_path):
    run = write_hostile_run(tmp_path / "hostile" / "task-0000__a1", huge_chars=60_000)
    render(run, tmp_path / "hostile.html")
    opened = open_page(tmp_path / "hostile.html", "#messages-3")
    assert opened.console == []  # no injected script ran, none failed
    assert re.search(r'<body[^>]* data-ready="1"', opened.dom)
    assert "<title>task-0000 · FC · attempt 1</title>" in opened.dom  # the injected scripts set no title
    assert "<img" not in opened.dom and "<b>bold" not in opened.dom
    collapsed = re.findall(r"collapsed: [\d,]+ tokens, ([\d,]+) characters; show</button>", opened.dom)
    assert len(collapsed) == 1 and int(collapsed[0].replace(",", "")) > 60_000  # the huge output, folded
