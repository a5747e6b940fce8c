"""Figures 19-21, the figures beyond the study and the tables at the study's scale: 13
configurations × 3 models × 2 benchmarks × 3 attempts: the paper-shaped synthetic data set
(``paper_tables``, ``ctxpolicy.testing.paper``, a few tasks per cohort). A one-pair variant of a
figure keeps to its pair without a text colliding or cut off (``layout.check``), and the tables
keep to the pairs they are given and write the same bytes twice. The main forms (every pair, no
colliding text, no silent panel, the synthetic mark, the same bytes from a second render) are
checked where their notebooks draw them on this data set: tests/test_notebooks.py."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ctxpolicy.figures import (
    agent_calls,
    cost_sensitivity,
    decomposition,
    inputs,
    layout,
    notes,
    outcomes,  # noqa: E402
    output,
    reacquisition,
    retention,
    style,
    summarizers,
    tables,
)
from ctxpolicy.testing.replays import replay_table  # noqa: E402

BOOT = 20


@pytest.fixture(scope="session")
def study(paper_tables):
    """(runs, config, events) of the paper-shaped data set, built once per session."""
    tables_dir, config_path = paper_tables
    style.apply()
    return (
        inputs.read_runs(tables_dir),
        inputs.read_study(config_path),
        pd.read_parquet(tables_dir / "events.parquet"),
    )


def compute(name, runs, config, events, pairs=None):
    kw = {"n_boot": BOOT, "seed": 0, "pairs": pairs}
    if name == "fig19":
        return summarizers.compute(runs, config, **kw)
    if name == "fig20":
        return outcomes.compute(runs, config, **kw)
    if name == "fig21":
        return agent_calls.compute(runs, config, **kw)
    if name == "reacquisition":
        return reacquisition.compute(runs, config, events=events, **kw)
    if name == "retention":
        return retention.compute(events, config, **kw)
    if name == "cost_sensitivity":
        return cost_sensitivity.compute(runs, config, **kw)
    return decomposition.compute(runs, replay_table(runs), config, **kw)


PLOT = {
    "fig19": summarizers.plot,
    "fig20": outcomes.plot,
    "fig21": agent_calls.plot,
    "reacquisition": reacquisition.plot,
    "retention": retention.plot,
    "cost_sensitivity": cost_sensitivity.plot,
    "cost_decomposition": decomposition.plot,
}


@pytest.mark.parametrize("name", ["fig20", "fig21", "cost_sensitivity", "retention"])
def test_a_variant_keeps_to_its_pair_and_names_itself(study, name):
    runs, config, events = study
    data = compute(name, runs, config, events, pairs=inputs.parse_pairs("synth-b/terminalbench"))
    assert set(zip(data.table["model"], data.table["benchmark"])) == {("synth-b", "terminalbench")}
    fig = PLOT[name](data, f"{name}-synth-b-terminalbench")
    try:
        layout.check(fig, name=name)
        visible = [ax for ax in fig.axes if ax.get_visible()]
        # one panel for the pair; retention has a row per measure (anchors, and constraints when any),
        # cost_sensitivity two (by cache model, by discount)
        panels = {"retention": len({ax.get_ylabel() for ax in visible}), "cost_sensitivity": 2}.get(name, 1)
        assert len(visible) == panels
    finally:
        plt.close(fig)


def test_no_pair_is_a_one_line_note(study):
    runs, config, events = study
    data = outcomes.compute(runs, config, pairs=inputs.parse_pairs("none"))
    fig = outcomes.plot(data, "fig20")
    try:
        assert data.empty and notes.recorded(fig)
    finally:
        plt.close(fig)


def test_tables_at_scale_and_for_one_pair(study, tmp_path):
    runs, config, _ = study
    one = [("synth-c", "swebench")]
    t1, t1_one = tables.table1(tables.grid_cells(config)), tables.table1(tables.grid_cells(config, one))
    assert len(t1) == len({c.policy for c in tables.grid_cells(config)}) and set(t1_one["models"]) == {"synth-c"}
    t4, _ = tables.table4(tables.grid_cells(config, one), config)
    assert set(t4["benchmark"]) == {"swebench"} and set(t4["model"]) == {"synth-c"}
    t3, _ = tables.table3(config, runs, one)
    assert set(t3["benchmark"]) == {"swebench"}
    t5, _ = tables.table5(runs, one)
    assert set(t5["model"]) == {"synth-c"}
    t6, note = tables.table6(config)
    assert len(t6) == len(inputs.combos(config, "full_comparison")) and "preset" in note
    assert len(tables.table6(config, one)[0]) == 1
    for stem, table in (("table1", t1), ("table4", t4), ("table3", t3), ("table6", t6)):
        first = output.save_table(table, tmp_path / "a", stem)
        assert [p.read_bytes() for p in first] == [
            p.read_bytes() for p in output.save_table(table, tmp_path / "b", stem)
        ]
