"""Every figure renders from any data: property-based runs of each figure's compute and plot
functions on random subsets of the figure fixture, damaged in the ways a real study damages
its data (every FC run time-limited, one task and one attempt, no solved task, no compression
event, no FC runs, unknown measurements, too few prompt counts), and on the three fixed edge
sets every notebook must render (explicit examples). Each must complete, draw, and leave no panel
without data and without a note saying why; one drawn from no runs says so."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ctxpolicy.figures import notes  # noqa: E402
from figure_helpers import COMPUTE, PLOT, read_fixture, silent_empty_panels  # noqa: E402
from ctxpolicy.testing.studies import study_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests/fixtures/figures"))
import edge_cases  # noqa: E402

# Per figure: the three fixed edge sets (EDGE_SETS, explicit examples: every figure renders each
# of them, whatever hypothesis draws) and this many random draws.
EXAMPLES = 5
# The fixed edge sets as draws of ``perturb``: all runs (keep 1.0: no draw dropped) or none.
FIXED = {"empty": (0.0, []), "fc_time_limited": (1.0, ["fc_time_limited"])}
FIXED["one_task_one_attempt"] = (1.0, ["one_task_one_attempt"])


@pytest.fixture(scope="module")
def study():
    runs, config, calls = read_fixture()
    return runs, calls, config


@pytest.fixture(autouse=True)
def _from_root(figure_root):
    yield


def render(name: str, runs, calls, config):
    data = COMPUTE[name](runs, config, calls)
    fig = PLOT[name](data)
    # Layout, limits, ticks and text are settled at draw time: failures there count too. Every
    # artist draws, on a renderer that paints nothing: the pixels (Agg) of every figure are drawn
    # and layout-checked in tests/test_figures_render.py and tests/test_notebooks.py (the three
    # edge sets: Figures 2, 3 and 20's notebooks).
    fig.draw_without_rendering()
    return data, fig


@pytest.mark.parametrize("name", sorted(COMPUTE))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**16),
    keep=st.sampled_from([0.0, 0.04, 0.3, 0.8, 1.0]),
    damages=st.lists(st.sampled_from(sorted(edge_cases.DAMAGES)), max_size=3, unique=True),
)
@example(seed=0, keep=FIXED["empty"][0], damages=FIXED["empty"][1])
@example(seed=0, keep=FIXED["fc_time_limited"][0], damages=FIXED["fc_time_limited"][1])
@example(seed=0, keep=FIXED["one_task_one_attempt"][0], damages=FIXED["one_task_one_attempt"][1])
def test_figure_renders_any_subset_and_explains_empty_panels(study, name, seed, keep, damages):
    runs, calls, config = study
    runs, calls = edge_cases.perturb(runs, calls, seed=seed, keep=keep, damages=damages)
    data, fig = render(name, runs, calls, config)
    assert silent_empty_panels(fig) == [], (name, damages, keep)
    if data.notes:  # what the data lacks is said on the figure, and recorded for notes.json
        assert set(data.notes) <= set(notes.recorded(fig))
    if runs.empty:
        assert notes.recorded(fig), "a figure drawn from no runs says so"
    plt.close(fig)


@pytest.mark.parametrize("edge", sorted(edge_cases.EDGE_SETS))
def test_fixed_edge_sets_are_draws_of_perturb(study, edge):
    """The explicit examples above are the fixed edge sets themselves."""
    runs, calls, _ = study
    keep, damages = FIXED[edge]
    fixed, drawn = (
        edge_cases.EDGE_SETS[edge](runs, calls),
        edge_cases.perturb(runs, calls, seed=0, keep=keep, damages=damages),
    )
    for a, b in zip(fixed, drawn):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def test_all_fc_time_limited_says_why_resource_ratios_are_missing(study):
    runs, calls, config = study
    runs, calls = edge_cases.fc_time_limited(runs, calls)
    _, fig = render("fig2", runs, calls, config)
    said = notes.recorded(fig)
    assert "no FC run for qwen05b on local finished within the time limit: resource ratios undefined." in said
    # the resource panels of that row carry the reason in the panel itself, not just below
    latency, cost = fig.axes[1], fig.axes[2]
    assert notes.has_note(latency) and notes.has_note(cost)
    assert not notes.has_plotted_data(latency)
    assert notes.has_plotted_data(fig.axes[0])  # the resolve-rate changes are still drawn


def test_fig3_without_any_labelled_line_still_draws(study):
    """The crash of the local study: every sweep run time-limited left no line to label."""
    runs, calls, config = study
    timed_out = runs.assign(outcome="time_limit", outcome_class="time_limited", time_limited=True)
    data, fig = render("fig3", timed_out, calls, config)
    assert silent_empty_panels(fig) == []
    assert "resource ratios undefined" in " ".join(notes.recorded(fig))


@pytest.mark.parametrize("edge", sorted(edge_cases.EDGE_SETS))
def test_tables_build_from_each_edge_set(study, edge, tmp_path):
    from ctxpolicy.figures import output, tables

    runs, calls, config = study
    runs, _ = edge_cases.EDGE_SETS[edge](runs, calls)
    t3, _ = tables.table3(study_of(config), runs)
    t5, note5 = tables.table5(runs)
    assert t3["tasks"].sum() > 0  # the planned tasks come from the cohort files, runs or not
    if edge == "empty":
        assert t5.empty and note5 == "no environment recorded: no runs in the runs table"
    output.save_table(t5, tmp_path, "table5", note=note5)
    assert (tmp_path / "table5.csv").read_text().strip()
