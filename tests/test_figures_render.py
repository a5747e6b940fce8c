"""Every figure module renders the fixture, saves it (PDF: the writer with fonts to embed) without a
colliding or clipped text, and renders a note (never an error) when the runs or the config lack
what it needs. Every figure's PNG (and PDF) is written by its notebook at the study's scale, and a
render is deterministic (the same bytes again) across processes, in tests/test_notebooks.py
(REPEATED: a target of every figure module)."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from ctxpolicy.figures import coverage, inputs, layout, output, ranks, summarizers, sweep, tradeoffs  # noqa: E402
from figure_helpers import BOOT, FIGURES, note_texts, read_fixture  # noqa: E402
from ctxpolicy.testing.studies import study_of  # noqa: E402


@pytest.fixture(scope="module")
def fixture():
    return read_fixture()


@pytest.fixture(autouse=True)
def _from_root(figure_root):
    yield


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_renders_saves_and_lays_out_its_texts(fixture, name):
    runs, config, calls = fixture
    fig = FIGURES[name](runs, config, calls)
    assert output.figure_bytes(fig, "pdf").startswith(b"%PDF")
    layout.check(fig, name=name)  # no colliding or clipped text (after saving: drawing moves it)


def test_fig2_draws_every_combo_with_runs_and_notes_the_one_without(fixture):
    runs, config, calls = fixture
    data = tradeoffs.compute(runs, study_of(config), n_boot=BOOT, seed=0)
    assert set(zip(data.table["benchmark"], data.table["model"])) == {
        ("local", "qwen05b"),
        ("term", "qwen05b"),
        ("local", "tiny"),
    }
    assert data.notes == ["no runs for tiny on term."]
    assert not data.table["summarizer"].notna().any()  # other summarizers belong to Figure 19
    fig = tradeoffs.plot(data)
    assert len(fig.axes) == 9 and "no runs for tiny on term" in note_texts(fig)


def test_sweep_includes_the_full_comparison_depth_on_the_sweep_tasks(fixture):
    runs, config, calls = fixture
    data = sweep.compute(runs, study_of(config), n_boot=BOOT, seed=0)
    assert set(data.table["policy"]) == {"TR/Th/0.3", "TR/Th/0.5", "TR/Th/0.7", "TRC/Th"}
    assert set(data.table["n_tasks"]) == {8}


def test_summarizer_figure_compares_the_agent_with_the_other_summarizer(fixture):
    runs, config, calls = fixture
    data = summarizers.compute(runs, study_of(config), n_boot=BOOT, seed=0)
    assert set(data.table["summarizer"]) == {summarizers.SELF, "tiny"}


def test_fig5_pairs_are_the_studys_four_and_only_what_the_config_has(fixture):
    runs, config, calls = fixture
    data = ranks.compute(runs, study_of(config), n_boot=BOOT, seed=0)
    assert set(data.meta["pairs"]["pair"]) == {"S-p − S", "TRC+S − S", "OTRC − TRC", "OTRC+S-p − OTRC"}
    best = data.table.groupby(["benchmark", "model"])["resolve_rate_rank"].min()
    assert (best == 1).all()
    no_s = {
        **config,
        "grid": {
            **config["grid"],
            "full_comparison": {
                **config["grid"]["full_comparison"],
                "policies": [p for p in config["grid"]["full_comparison"]["policies"] if not p.startswith("S/")],
            },
        },
    }
    data = ranks.compute(runs, study_of(no_s), n_boot=BOOT, seed=0)
    assert set(data.meta["pairs"]["pair"]) == {"OTRC − TRC", "OTRC+S-p − OTRC"}
    assert any("S-p vs S, TRC+S vs S" in n for n in data.notes)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_without_runs_is_a_note(fixture, name):
    _, config, _ = fixture
    empty_runs = inputs.read_runs("tests/fixtures/figures/none")
    empty_calls = inputs.read_calls("tests/fixtures/figures/none")
    fig = FIGURES[name](empty_runs, config, empty_calls)
    said = note_texts(fig)
    assert re.search(r"\bno\b.*?\bruns\b|covers 1 model/benchmark pair", said), said


def test_figure_for_a_config_without_the_block_is_a_note(fixture):
    runs, config, _ = fixture
    no_summarizer = {**config, "grid": {k: v for k, v in config["grid"].items() if k != "summarizer"}}
    fig = summarizers.plot(summarizers.compute(runs, study_of(no_summarizer), n_boot=BOOT, seed=0))
    assert "no summarizer comparison" in note_texts(fig)
    fig = sweep.plot_ablation(
        sweep.compute(runs, study_of(config), n_boot=BOOT, seed=0, pairs=[("nomodel", "nobench")]), "fig12"
    )
    assert "nomodel/nobench is not a pair of the config's grid.sweeps block." in note_texts(fig)


def test_fig2_numbers_use_the_compare_commands_keys(fixture):
    runs, config, calls = fixture
    numbers = tradeoffs.compute(runs, study_of(config), n_boot=BOOT, seed=0).numbers()
    for key in ("resolve_delta", "tokens_ratio", "latency_ratio", "cost_ratio"):
        assert {f"{key}_est", f"{key}_lo", f"{key}_hi"} <= set(numbers.columns), key
    assert {
        "benchmark",
        "model",
        "policy",
        "setting",
        "summarizer",
        "n_tasks",
        "resolve_rate",
        "baseline_resolve_rate",
        "tokens_ratio_n_tasks",
        "cost_ratio_n_tasks",
    } <= set(numbers.columns)
    delta = numbers["resolve_rate"] - numbers["baseline_resolve_rate"]
    assert (numbers["resolve_delta_est"] - delta).abs().max() < 1e-12  # a fraction, not points
    assert set(numbers["cost_ratio_method"]) == {"estimated"}  # the default headline
    assert (numbers["cost_ratio_est"] == numbers["cost_ratio_estimated_est"]).all()


def test_fig3_numbers_hold_the_curves_and_the_table(fixture):
    runs, config, calls = fixture
    numbers = sweep.compute(runs, study_of(config), n_boot=BOOT, seed=0, calls=calls).numbers()
    assert set(numbers["part"]) == {"main", "frequency", "summary"}
    summary = numbers[numbers["part"] == "summary"]
    assert summary["latency_s"].notna().all() and summary["best_resolve"].astype(bool).any()


def test_fig4_numbers_use_the_compare_commands_keys(fixture):
    runs, config, calls = fixture
    numbers = coverage.compute(runs, study_of(config)).numbers()
    assert {"solved", "baseline_solved", "gains", "losses", "left_out_tasks", "gains_losses_tasks"} <= set(numbers)
    assert "n_tasks" not in numbers  # compare's n_tasks counts every compared task: not the same number
    assert (numbers["left_out_tasks"] == 0).all()  # the fixture records every attempt
