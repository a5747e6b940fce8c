"""The quoted-number figures (``ctxpolicy.figures.quoted``) draw what ``ctxpolicy.metrics.quoted``
computes: on the hand-worked run set of tests/test_metrics_quoted.py, relabelled as one pair of the
figure fixture's config, each figure's data carries the numbers worked out there by hand, and each
figure renders and passes the layout check. (Rendering on the fixture itself: test_figures_render.py
through figure_helpers; on the paper-shaped set: test_notebooks.py through the catalog.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxpolicy.figures import layout, quoted

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figure_helpers import read_fixture  # noqa: E402
from ctxpolicy.testing.studies import study_of  # noqa: E402
from test_metrics_quoted import RUNS  # noqa: E402

PAIR = [("qwen05b", "local")]


@pytest.fixture(autouse=True)
def _from_root(figure_root):
    yield


@pytest.fixture(scope="module")
def config():
    return read_fixture()[1]


@pytest.fixture(scope="module")
def runs():
    return RUNS.assign(model="qwen05b", benchmark="local")


def by_policy(data):
    return data.table.set_index("policy")


def test_calls_figure_carries_the_hand_worked_ratios(runs, config):
    data = quoted.compute("quoted_calls", runs, study_of(config), n_boot=50, seed=0, pairs=PAIR)
    table = by_policy(data)
    assert table.loc["SU/Th/0.5", "calls_ratio_est"] == pytest.approx(12 / 10)
    assert table.loc["SU/Th/0.5", "per_call_latency_ratio_est"] == pytest.approx(3 / 2)
    assert table.loc["TR/Th/0.5", "calls_ratio_est"] == pytest.approx(1.0)
    assert "TR/Th/0.3" not in table.index  # a sweep depth is not a full-comparison policy
    layout.check(quoted.plot("quoted_calls", data, "quoted_calls"), name="quoted_calls")


def test_summary_share_figure_carries_the_shared_solved_share(runs, config):
    data = quoted.compute("quoted_summary_share", runs, study_of(config), n_boot=0, seed=0, pairs=PAIR)
    table = by_policy(data)
    assert list(table.index) == ["SU/Th/0.5"]
    assert table.loc["SU/Th/0.5", "summary_share"] == pytest.approx(10 / 50)
    assert "summary_share" in data.numbers()
    layout.check(quoted.plot("quoted_summary_share", data, "quoted_summary_share"), name="quoted_summary_share")


def test_shared_tokens_figure_carries_the_shared_solved_ratio(runs, config):
    data = quoted.compute("quoted_shared_tokens", runs, study_of(config), n_boot=50, seed=0, pairs=PAIR)
    table = by_policy(data)
    # SU shares A with FC: 1200 tokens against 1000; TR shares A and B: (1000 + 2000) / (1000 + 2000)
    assert table.loc["SU/Th/0.5", "tokens_ratio_est"] == pytest.approx(1.2)
    assert table.loc["TR/Th/0.5", "tokens_ratio_est"] == pytest.approx(1.0)
    layout.check(quoted.plot("quoted_shared_tokens", data, "quoted_shared_tokens"), name="quoted_shared_tokens")


def test_compressions_figure_carries_the_shared_solved_means(runs, config):
    data = quoted.compute("quoted_compressions", runs, study_of(config), n_boot=0, seed=0, pairs=PAIR)
    table = by_policy(data)
    assert table.loc["SU/Th/0.5", "compressions_per_run"] == 3.0
    assert table.loc["SU/Th/0.5", "shared_solved_tasks"] == 1
    assert table.loc["TR/Th/0.5", "compressions_per_run"] == 4.0
    layout.check(quoted.plot("quoted_compressions", data, "quoted_compressions"), name="quoted_compressions")


def test_peak_figure_marks_the_pairs_thresholds_and_the_share_above_each(runs, config):
    # term/qwen05b has preset thresholds 1800 / 2400 / 3000 in the fixture config
    peaks = {"A": 1000, "B": 2000, "C": 2500}
    term = runs.assign(benchmark="term", peak_prompt_tokens=runs["task_id"].map(peaks))
    data = quoted.compute("peak_context", term, study_of(config), n_boot=0, seed=0, pairs=[("qwen05b", "term")])
    assert list(data.table["peak_prompt_tokens"]) == [1000.0, 2000.0, 2500.0]  # FC runs only
    marks = data.extra["thresholds"].iloc[0]
    assert (marks["threshold_tight"], marks["threshold_primary"], marks["threshold_loose"]) == (1800, 2400, 3000)
    # above 1800: 2000, 2500; above 2400: 2500; above 3000: none
    assert marks["share_above_tight"] == pytest.approx(2 / 3)
    assert marks["share_above_primary"] == pytest.approx(1 / 3)
    assert marks["share_above_loose"] == 0.0
    assert set(data.numbers()["part"]) == {"main", "thresholds"}
    layout.check(quoted.plot("peak_context", data, "peak_context"), name="peak_context")


def test_unknown_view_names_the_allowed_ones(runs, config):
    with pytest.raises(ValueError, match="peak_context"):
        quoted.compute("nope", runs, study_of(config), n_boot=0, seed=0)
