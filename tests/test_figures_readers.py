"""Figures as a reader sees them: the n behind them where it is small, every policy visible where
points coincide (and the legend says so), thresholds written as the config writes them,
Figure 3's open and filled markers explained, one font in Figure 4's rows, and no legend entry
the plot does not draw."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import re  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from figure_helpers import COMPUTE, PLOT, note_texts, read_fixture  # noqa: E402

from ctxpolicy.figures import style, tradeoffs  # noqa: E402


@pytest.fixture(scope="module")
def fixture():
    return read_fixture()


@pytest.fixture(autouse=True)
def _from_root(figure_root):
    yield


_COMPUTED: dict = {}


def computed(name: str, fixture):
    """Each figure's data computed once for the module (a copy: tests may change it)."""
    import copy

    if name not in _COMPUTED:
        _COMPUTED[name] = COMPUTE[name](*fixture)
    return copy.deepcopy(_COMPUTED[name])


def _legend_labels(fig) -> list[str]:
    figures = [fig, *fig.subfigs]
    legends = [lg for f in figures for lg in f.legends] + [a.get_legend() for a in fig.axes if a.get_legend()]
    return [t.get_text() for legend in legends for t in legend.get_texts()]


def test_thresholds_read_as_the_config_writes_them():
    assert style.threshold_label("primary", 466) == "Primary (466 tokens)"
    assert style.threshold_label("primary", 15000) == "Primary (15K)"
    assert style.threshold_label("tight", 2500) == "Tight (2.5K)"


def test_figures_with_few_tasks_say_their_n(fixture):
    for name in ("fig2", "fig3", "fig4"):
        fig = PLOT[name](computed(name, fixture))
        assert re.search(r"n = \d+ tasks × \d+ attempts? \(qwen05b, local\)", note_texts(fig)), name


def test_coinciding_points_are_drawn_side_by_side_and_the_legend_says_so(fixture):
    data = computed("fig2", fixture)
    table = data.table.copy()
    pair = (table["benchmark"] == "local") & (table["model"] == "qwen05b")
    policies = list(table.loc[pair, "policy"].astype(str))
    first, second = policies[0], policies[1]
    columns = [c for c in table.columns if c.endswith(("_est", "_lo", "_hi"))]
    table.loc[pair & (table["policy"].astype(str) == second), columns] = table.loc[
        pair & (table["policy"].astype(str) == first), columns
    ].to_numpy()
    data.table = table
    fig = tradeoffs.plot(data)
    colors = {p: style.policy_color(p) for p in (first, second)}
    xs = {}
    for line in fig.axes[0].lines:
        x = line.get_xdata()
        if len(x) == 1 and line.get_marker() not in (None, "None", ""):
            for p, c in colors.items():
                if matplotlib.colors.same_color(line.get_color(), c):
                    xs.setdefault(p, []).append(float(x[0]))
    assert set(xs) == {first, second} and xs[first][0] != xs[second][0]
    assert any("side by side" in (legend.get_title().get_text()) for legend in fig.legends)
    assert "side by side" in " ".join(getattr(fig, "_ctxpolicy_notes", []))


def test_dodged_offsets_only_points_with_equal_values():
    x = pd.Series([0.5, 0.5, 0.7, np.nan])
    y = pd.Series([1.0, 1.0, 1.0, 1.0])
    offsets = tradeoffs.dodged(x, y)
    assert offsets[0] == -offsets[1] != 0 and offsets[2] == 0 and offsets[3] == 0


def test_fig3_legend_explains_open_and_filled_markers(fixture):
    labels = " ".join(_legend_labels(PLOT["fig3"](computed("fig3", fixture))))
    assert "D = 0.3 (open)" in labels and "D = 0.5 (filled)" in labels


def test_fig4_tallies_share_the_row_labels_font(fixture):
    fig = PLOT["fig4"](computed("fig4", fixture))
    ax = fig.axes[0]
    tallies = [t for t in ax.texts if "→" in t.get_text()]
    row = ax.get_yticklabels()[0]
    assert tallies and all(
        t.get_fontsize() == row.get_fontsize() and t.get_fontfamily() == row.get_fontfamily() for t in tallies
    )


def test_decomposition_legend_has_no_marker_the_plot_does_not_draw(fixture):
    fig = PLOT["cost_decomposition"](computed("cost_decomposition", fixture))
    drawn = {line.get_marker() for ax in fig.axes for line in ax.lines}
    for legend in fig.legends:
        for handle in legend.legend_handles:
            marker = getattr(handle, "get_marker", lambda: None)()
            assert marker in (None, "None", "none", "") or marker in drawn, marker
