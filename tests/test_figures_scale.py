"""Figures 2–6 and 9–18 at the study's scale: 13 configurations, 3 models × 2 benchmarks, 3 attempts,
the sweep's 3 thresholds × 3 depths: the paper-shaped synthetic data set (``paper_tables``,
``ctxpolicy.testing.paper``, a few tasks per cohort).
Each figure, its main form and a one-pair variant, passes the layout check (no colliding or
clipped text), and no two policies share a colour + marker in a figure's legend. That a fresh
render writes the same bytes is checked where the notebooks draw these figures on this data set
(tests/test_notebooks.py, REPEATED)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

from ctxpolicy.figures import (
    coverage,
    inputs,
    layout,
    notes,
    prompt_profile,
    ranks,
    style,
    sweep,
    tradeoffs,
)
from figure_helpers import legend_look_clashes

BOOT = 30
# Figures 9-15 as config/synthetic-paper.yaml numbers them (config/paper.yaml's choice, synthetic names)
ABLATION_PAIRS = {
    9: "synth-a/swebench",
    12: "synth-a/terminalbench",
    13: "synth-b/terminalbench",
    15: "synth-b/swebench",
    10: "none",
    11: "none",
    14: "none",
}
MAIN = "synth-a/swebench,synth-a/terminalbench"  # like config/paper.yaml's Figure 2: one model, both benchmarks
VARIANT = "synth-b/terminalbench"


def _pairs(text):
    return inputs.parse_pairs(text)


def _ablation(number: int):
    text = ABLATION_PAIRS[number]
    return lambda r, c, k: sweep.plot_ablation(
        sweep.compute_ablation(r, c, n_boot=BOOT, seed=0, pairs=_pairs(text)), f"fig{number}"
    )


# The main forms of Figures 2-6 and 9-18 are drawn by their notebooks on this data set and
# checked there (tests/test_notebooks.py: layout, legend, a target of each module the same bytes
# again); here, the variants and the main forms with checks of their own.
SCALE_FIGURES = {
    "fig2-all": lambda r, c, k: tradeoffs.plot(tradeoffs.compute(r, c, n_boot=BOOT, seed=0)),
    "fig2-variant": lambda r, c, k: tradeoffs.plot(
        tradeoffs.compute(r, c, n_boot=BOOT, seed=0, pairs=_pairs(VARIANT)), name="fig2-synth-b-terminalbench"
    ),
    "fig3-variant": lambda r, c, k: sweep.plot_fig3(
        sweep.compute(r, c, n_boot=BOOT, seed=0, calls=k, pairs=_pairs(VARIANT)), name="fig3-synth-b-terminalbench"
    ),
    "fig4-all": lambda r, c, k: coverage.plot(coverage.compute(r, c)),
    "fig4-variant": lambda r, c, k: coverage.plot(
        coverage.compute(r, c, pairs=_pairs(VARIANT)), name="fig4-synth-b-terminalbench"
    ),
    "fig5-variant": lambda r, c, k: ranks.plot(
        ranks.compute(r, c, n_boot=BOOT, seed=0, pairs=_pairs(VARIANT)), name="fig5-synth-b-terminalbench"
    ),
    "fig6": lambda r, c, k: prompt_profile.plot(prompt_profile.compute(r, k, c)),
    "fig6-variant": lambda r, c, k: prompt_profile.plot(
        prompt_profile.compute(r, k, c, pairs=_pairs(VARIANT)), name="fig6-synth-b-terminalbench"
    ),
    "fig9": _ablation(9),
    "fig18": lambda r, c, k: coverage.plot_sweep(
        coverage.compute_sweep(r, c, setting="loose", pairs=_pairs("synth-a/swebench")), "fig18"
    ),
    "fig17-variant": lambda r, c, k: coverage.plot_sweep(
        coverage.compute_sweep(r, c, setting="primary", pairs=_pairs(VARIANT)), "fig17-synth-b-terminalbench"
    ),
}


@pytest.fixture(scope="session")
def scale_data(paper_tables):
    style.apply()
    tables_dir, config_path = paper_tables
    return inputs.read_runs(tables_dir), inputs.read_study(config_path), inputs.read_calls(tables_dir)


@pytest.fixture(scope="module")
def rendered(scale_data):
    figures = {name: make(*scale_data) for name, make in SCALE_FIGURES.items()}
    yield figures
    for fig in figures.values():
        plt.close(fig)


# The main forms are checked where the workflow draws them: every notebook rendered on this data
# set in tests/test_notebooks.py (CTXPOLICY_CHECK_LAYOUT); here, the forms no notebook draws there.
@pytest.mark.parametrize("name", sorted(n for n in SCALE_FIGURES if "-" in n))
def test_figure_at_scale_has_no_colliding_or_clipped_text(rendered, name):
    layout.check(rendered[name], name=name)


@pytest.mark.parametrize("name", sorted(SCALE_FIGURES))
def test_no_two_legend_entries_share_colour_and_marker(rendered, name):
    assert legend_look_clashes(rendered[name]) == [], name


@pytest.mark.parametrize("number", [10, 11, 14])
def test_ablation_number_without_a_pair_is_a_one_line_note(scale_data, number):
    fig = _ablation(number)(*scale_data)
    try:
        said = notes.recorded(fig)
        assert len(said) == 1 and f"Figure {number}" in said[0] and "no model/benchmark pair" in said[0]
    finally:
        plt.close(fig)


# That an ablation given one pair draws that pair alone is checked where its notebook draws it on
# this data set (tests/test_notebooks.py, ONE_PAIR).


def test_depth_invariant_policies_are_never_drawn_at_a_depth(rendered, scale_data):
    """TRC and the OTRC stacks are horizontal references in the depth ablation: no marker at a depth."""
    fig = rendered["fig9"]
    _runs, config, _calls = scale_data
    invariant = {style.policy_color(p) for p in config.section("sweeps")["invariant"]}
    for ax in fig.axes:
        for line in ax.lines:
            if matplotlib.colors.to_hex(line.get_color()) in {matplotlib.colors.to_hex(c) for c in invariant}:
                assert line.get_marker() in (None, "None", "", " "), line.get_label()
                ys = line.get_ydata()
                assert len(set(ys)) == 1, "a depth-invariant policy is one level per threshold"


def test_pairs_restrict_the_runs_a_figure_reads(scale_data):
    runs, config, _calls = scale_data
    data = tradeoffs.compute(runs, config, n_boot=BOOT, seed=0, pairs=_pairs(MAIN))
    assert set(zip(data.table["model"], data.table["benchmark"])) == {
        ("synth-a", "swebench"),
        ("synth-a", "terminalbench"),
    }
    none = tradeoffs.compute(runs, config, n_boot=BOOT, seed=0, pairs=[])
    assert none.empty


# Figure 5's (a) on the first benchmark shown and (b) of both, and its layout: checked where its
# notebook draws it on this data set (tests/test_notebooks.py); here, (a) on the benchmark named.
def test_fig5_ranks_the_benchmark_it_is_given(scale_data):
    runs, config, _calls = scale_data
    other = ranks.compute(runs, config, n_boot=BOOT, seed=0, ranks_benchmark="terminalbench")
    assert set(other.table["benchmark"]) == {"terminalbench"}
