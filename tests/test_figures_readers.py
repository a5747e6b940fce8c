"""Figures as a reader sees them: the n behind them where it is small, every policy visible where
points coincide (and the legend says so), thresholds written as the config writes them,
Figure 3's open and filled markers explained, one font in Figure 4's rows, and no legend entry
the plot does not draw."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import copy  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from figure_helpers import BOOT, COMPUTE, PLOT, ROOT, read_fixture  # noqa: E402

from ctxpolicy.figures import style, tradeoffs  # noqa: E402
from ctxpolicy.testing.studies import study_of  # noqa: E402


@pytest.fixture(scope="module")
def fixture():
    return read_fixture()


@pytest.fixture(autouse=True)
def _from_root(figure_root):
    yield


_COMPUTED: dict = {}


def computed(name: str, fixture):
    """Each figure's data computed once for the module (a copy: tests may change it)."""
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


# Every figure drawn from the runs (Figure 6 draws one chosen run per side, not a sample; Figure 10
# of the helpers draws no pair), and Figures 9-15 and 16-18 by their first member.
SAMPLED = [name for name in COMPUTE if name not in ("fig6", "fig10")] + ["retention"]
# one figure for each place that finds the runs behind a figure (comparisons.compare_block, the
# sweep, outcomes, summarizers, decomposition, FC peaks, compression steps)
ONE_PER_SOURCE = ["fig2", "fig3", "fig20", "fig19", "cost_decomposition", "peak_context", "retention"]
N_PART = re.compile(r"(\d+) tasks? × (\d+) attempts? \((\S+), (\S+)\)")
PAIR = {"model": "qwen05b", "benchmark": "local"}


def _listed(path) -> list[str]:
    return [t.strip() for t in path.read_text().splitlines() if t.strip() and not t.startswith("#")]


def _one_pair(config, tmp_path, copies: int = 1):
    """The fixture's config on one pair with three policies and one depth (the figures draw
    faster), its cohorts listing each task ``copies`` times over (``_copies``)."""
    config = copy.deepcopy(config)
    for block in ("full_comparison", "sweeps", "summarizer"):
        config["grid"][block].update(models=[PAIR["model"]], benchmarks=[PAIR["benchmark"]])
    config["grid"]["full_comparison"]["policies"] = ["FC", "TR/Th/0.5", "SU/Th/0.5"]
    config["grid"]["sweeps"]["depths"] = [0.5]
    cohorts = config["benchmarks"][PAIR["benchmark"]]["cohorts"]
    for cohort, path in cohorts.items():
        listed = tmp_path / f"{cohort}.txt"
        listed.write_text("".join(f"{t}{_copy(c)}\n" for c in range(copies) for t in _listed(ROOT / path)))
        cohorts[cohort] = str(listed)
    return config


def _copy(c: int) -> str:
    return f"-copy{c}" if c else ""


def _copies(table: pd.DataFrame, copies: int) -> pd.DataFrame:
    """One pair's rows with every task (and run directory) ``copies`` times over, under new names."""
    table = table[(table["model"].astype(str) == PAIR["model"]) & (table["benchmark"].astype(str) == PAIR["benchmark"])]
    frames = []
    for c in range(copies):
        frame = table.copy()
        frame["task_id"] = frame["task_id"].astype(str) + _copy(c)
        if "run_dir" in frame:
            frame["run_dir"] = frame["run_dir"].astype(str) + _copy(c)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _tables(fixture):
    from ctxpolicy.figures import inputs

    runs, _, calls = fixture
    return runs, calls, inputs._read_table(ROOT / "tests/fixtures/figures/tables/events.parquet", ())


def _draw(name: str, runs, config, calls, events, out_dir) -> list[str]:
    """Draw one figure and write it (pictures left out): the notes its notes.json carries."""
    import json

    from ctxpolicy.figures import output, retention

    if name == "retention":
        fig = retention.plot(retention.compute(events, study_of(config), n_boot=BOOT, seed=0))
    else:
        fig = PLOT[name](COMPUTE[name](runs, config, calls))
    output.save_figure(fig, out_dir, name, formats=())
    return json.loads((out_dir / f"{name}.notes.json").read_text())


def test_figures_with_few_tasks_say_their_n(fixture, tmp_path):
    """Three tasks of the pair: each figure's notes.json says n, the tasks and attempts that the
    table itself holds for the pair (the compression steps' table for retention)."""
    config = _one_pair(fixture[1], tmp_path)
    few = _listed(ROOT / fixture[1]["benchmarks"][PAIR["benchmark"]]["cohorts"]["sweep"])[:3]
    runs, calls, events = (_copies(t, 1) for t in _tables(fixture))
    runs, events = (t[t["task_id"].isin(few)] for t in (runs, events))
    for name in SAMPLED:
        drawn = _draw(name, runs, config, calls, events, tmp_path)
        said = [m for m in drawn if m.startswith("n = ")]
        assert len(said) == 1, (name, drawn)
        table = events if name == "retention" else runs
        expected = [
            (str(table["task_id"].nunique()), str(table.groupby("task_id")["attempt"].nunique().max()), *PAIR.values())
        ]
        assert N_PART.findall(said[0]) == expected, (name, said)


def test_figures_with_enough_tasks_say_no_n(fixture, tmp_path):
    """The pair's tasks four times over (new task ids, the cohort files list them all): at least
    notes.FEW_TASKS tasks in every cohort, and no figure says n."""
    from ctxpolicy.figures import notes

    config = _one_pair(fixture[1], tmp_path, copies=4)
    assert min(len(_listed(tmp_path / f)) for f in ("main.txt", "sweep.txt")) >= notes.FEW_TASKS
    runs, calls, events = (_copies(t, 4) for t in _tables(fixture))
    assert events["task_id"].nunique() >= notes.FEW_TASKS
    for name in ONE_PER_SOURCE:
        drawn = _draw(name, runs, config, calls, events, tmp_path)
        assert not [m for m in drawn if m.startswith("n = ")], (name, drawn)


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
