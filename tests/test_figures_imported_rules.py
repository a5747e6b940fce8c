"""The imported corpus's figures count as Figure 2 does (A.5, A.6.5): resource-eligible replays
only, a task on both sides or on neither, agent calls only, cost by the config's method. A
hand-built replay table; every expected number is worked out in the docstrings.

FC replays:   A: 100 tokens, 10 agent calls, billed estimated 50, exact 40
              B: 200 tokens, 20 agent calls, billed estimated 100, exact unknown (NaN)
              C: 300 tokens, 30 agent calls, time-limited at the source (not eligible)
TR/Th/0.5:    A:  50 tokens, 10 agent calls + 2 summary calls, estimated 30, exact 20
              B: 150 tokens, 20 agent calls + 4 summary calls, estimated 60, exact 45
              C: 100 tokens, 30 agent calls + 1 summary call, estimated 10, exact 10 (eligible,
                 but FC's C is not: C counts on neither side)
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ctxpolicy.figures import imported_replay, imported_sweep
from ctxpolicy.study import Study
from ctxpolicy.testing.studies import study_of

ROWS = [
    # policy, setting, task, outcome, total_tokens, agent_calls, summary_calls, billed_est, billed_exact
    ("FC", None, "A", "submitted", 100, 10, 0, 50.0, 40.0),
    ("FC", None, "B", "submitted", 200, 20, 0, 100.0, math.nan),
    ("FC", None, "C", "time_limit", 300, 30, 0, 150.0, 150.0),
    ("TR/Th/0.5", "primary", "A", "submitted", 50, 10, 2, 30.0, 20.0),
    ("TR/Th/0.5", "primary", "B", "submitted", 150, 20, 4, 60.0, 45.0),
    ("TR/Th/0.5", "primary", "C", "submitted", 100, 30, 1, 10.0, 10.0),
]
COLUMNS = ["policy", "setting", "task_id", "outcome", "total_tokens", "agent_calls", "summary_calls"]
REPLAYS = pd.DataFrame(ROWS, columns=[*COLUMNS, "billed_est", "billed_exact"]).assign(
    benchmark="swebench", model="frontier", n_prompt_counts=5, billed_measured=math.nan, track="replay"
)
REPLAYS["time_limited"] = REPLAYS["outcome"] == "time_limit"


def config(method: str) -> Study:
    """An imported-only study whose figures price by ``method``."""
    return study_of(
        {
            "study": "x",
            "imported": {"path": "c", "benchmark": "swebench", "model": "frontier"},
            "metrics": {"cost_method": method},
            "grid": {
                "full_comparison": {"setting": "primary", "policies": ["FC", "TR/Th/0.5"]},
                "sweeps": {"settings": ["primary"], "depths": [0.5], "tunable": ["TR"], "invariant": []},
            },
        }
    )


def test_tokens_and_calls_count_eligible_tasks_on_both_sides_and_agent_calls_only():
    """Tokens: A and B, (50 + 150) / (100 + 200) = 2/3 (C is not eligible for FC, so on neither
    side). Calls: the agent's only, (10 + 20) / (10 + 20) = 1 (with the summary calls it would be
    (12 + 24) / 30 = 1.2)."""
    row = imported_replay.compute(REPLAYS, config("estimated"), n_boot=20, seed=0).table.iloc[0]
    assert row["tokens_ratio_est"] == pytest.approx(2 / 3) and row["tokens_ratio_n_tasks"] == 2
    assert row["calls_ratio_est"] == pytest.approx(1.0)
    assert row["n_tasks"] == 3  # replayed on both sides


def test_cost_is_the_config_s_method_and_a_task_missing_on_one_side_counts_on_neither():
    """Estimated: (30 + 60) / (50 + 100) = 0.6. Exact: FC's B is unknown, so B drops from both
    sides: 20 / 40 = 0.5 on one task (summing what is known would give (20 + 45) / 40)."""
    estimated = imported_replay.compute(REPLAYS, config("estimated"), n_boot=20, seed=0)
    assert estimated.table.iloc[0]["cost_ratio_est"] == pytest.approx(0.6)
    exact = imported_replay.compute(REPLAYS, config("exact"), n_boot=20, seed=0).table.iloc[0]
    assert exact["cost_ratio_est"] == pytest.approx(0.5) and exact["cost_ratio_n_tasks"] == 1


def test_the_sweep_figure_counts_by_the_same_rules():
    data = imported_sweep.compute(REPLAYS, config("exact"), n_boot=20, seed=0)
    row = data.table.set_index("policy").loc["TR/Th/0.5"]
    assert row["tokens_ratio_est"] == pytest.approx(2 / 3)
    assert row["cost_ratio_est"] == pytest.approx(0.5)


def test_exact_and_measured_profile_side_by_side_where_the_corpus_has_measured_hits():
    """Measured profile (FC: A 45, B 90; TR: A 28, B 55; C on neither side): 83 / 135 on two
    tasks, beside exact's 20 / 40 on one; the figure draws a fourth panel with both."""
    served = REPLAYS.assign(billed_profile=[45.0, 90.0, 140.0, 28.0, 55.0, 10.0], cached_profile=[9, 18, 0, 4, 5, 0])
    data = imported_replay.compute(served, config("estimated"), n_boot=20, seed=0)
    row = data.table.iloc[0]
    assert row["cost_profile_ratio_est"] == pytest.approx(83 / 135) and row["cost_profile_ratio_n_tasks"] == 2
    assert row["cost_exact_ratio_est"] == pytest.approx(0.5) and row["cost_exact_ratio_n_tasks"] == 1
    assert imported_replay.NO_MEASURED_HITS not in data.notes
    assert len(imported_replay.plot(data).axes) == len(imported_replay.RESOURCES) + 1


def test_a_corpus_without_provider_cached_tokens_says_it_has_no_measured_profile():
    unpriced = REPLAYS.assign(billed_profile=math.nan)
    data = imported_replay.compute(unpriced, config("estimated"), n_boot=20, seed=0)
    assert imported_replay.NO_MEASURED_HITS in data.notes
    assert "cost_profile_ratio_est" not in data.table
    served_nothing = REPLAYS.assign(billed_profile=100.0, cached_profile=0)
    notes = imported_replay.compute(served_nothing, config("estimated"), n_boot=20, seed=0).notes
    assert any("served none of the source calls" in n for n in notes)


def test_the_sweep_figure_says_the_n_of_its_replays():
    """Three tasks of one attempt (no attempt column: one each), counted from the table itself."""
    import matplotlib

    matplotlib.use("Agg")
    from ctxpolicy.figures import notes

    fig = imported_sweep.plot(imported_sweep.compute(REPLAYS, config("exact"), n_boot=20, seed=0))
    tasks = REPLAYS["task_id"].nunique()
    assert f"n = {tasks} tasks × 1 attempt (frontier, swebench)" in " ".join(notes.recorded(fig))


def test_the_cost_sensitivity_figure_prices_the_replays_against_the_fc_replay():
    """imported_cost_sensitivity on the same replays. Estimated parts, fresh + d · cached
    (billed_est at d = 0.1): FC A 45 + 50, B 95 + 50; TR A 20 + 100, B 50 + 100 (C on neither
    side). At d = 1: (120 + 150) / (95 + 145) = 1.125; at d = 0.5: 170 / 190. Break-even: the
    parts' means, F 35 vs 70, C 100 vs 50: d* = (70 - 35) / (100 - 50) = 0.7. By cache model:
    exact 0.5 on one task and measured profile 83 / 135 on two, as imported_replay draws them;
    measured (a replay sends nothing to a server) is not available."""
    from ctxpolicy.figures import cost_sensitivity

    replays = REPLAYS.assign(
        cell=REPLAYS["policy"].str.replace("/", "_"),
        summary_input=0,
        fresh_est=[45, 95, 100, 20, 50, 5],
        cached_est=[50, 50, 500, 100, 100, 50],
        billed_profile=[45.0, 90.0, 140.0, 28.0, 55.0, 10.0],
        cached_profile=[9, 18, 0, 4, 5, 0],
    )
    data = cost_sensitivity.compute_imported(replays, config("estimated"), n_boot=20, seed=0)
    row = data.table.set_index("policy").loc["TR/Th/0.5"]
    assert row["cost_ratio_at_0.1_est"] == pytest.approx(0.6) and row["cost_ratio_at_0.1_n_tasks"] == 2
    assert row["cost_ratio_at_1_est"] == pytest.approx(1.125)
    assert row["cost_ratio_at_0.5_est"] == pytest.approx(170 / 190)
    assert row["break_even_estimated"] == pytest.approx(0.7)
    assert row["cost_ratio_exact_est"] == pytest.approx(0.5) and row["cost_ratio_exact_n_tasks"] == 1
    assert row["cost_ratio_measured-profile_est"] == pytest.approx(83 / 135)
    assert math.isnan(row["cost_ratio_measured_est"])
    by_cache = imported_replay.compute(replays, config("estimated"), n_boot=20, seed=0).table.iloc[0]
    assert row["cost_ratio_exact_est"] == by_cache["cost_exact_ratio_est"]
    assert row["cost_ratio_measured-profile_est"] == by_cache["cost_profile_ratio_est"]
    assert imported_replay.NO_MEASURED_HITS not in data.notes
    figure = cost_sensitivity.plot(data, "imported_cost_sensitivity")
    assert len(figure.axes) == 2
    unpriced = replays.assign(billed_profile=math.nan)
    data = cost_sensitivity.compute_imported(unpriced, config("estimated"), n_boot=20, seed=0)
    assert imported_replay.NO_MEASURED_HITS in data.notes
    assert data.table["cost_ratio_measured-profile_est"].isna().all()


def test_the_cost_sensitivity_figure_without_an_fc_replay_is_a_note():
    from ctxpolicy.figures import cost_sensitivity

    policies_only = REPLAYS[REPLAYS["policy"] != "FC"].assign(cell="TR_Th_0.5")
    data = cost_sensitivity.compute_imported(policies_only, config("estimated"), n_boot=20, seed=0)
    assert data.table.empty and "no FC replay of the imported corpus (frontier on swebench)." in data.notes
    assert cost_sensitivity.plot(data) is not None
