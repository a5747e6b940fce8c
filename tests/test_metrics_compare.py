"""Comparisons against FC on a hand-built runs table; every expected value worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctxpolicy.metrics.bootstrap import boot_ratio, percentile_interval, resample_counts
from ctxpolicy.metrics.compare import (compare_to_fc, execution_length, gains_losses, outcome_breakdown,
                                       paired_differences, resolve_rate, resource_ratio,
                                       task_resource_means)

# (task, attempt, resolved, outcome, total_tokens, n_prompt_counts, agent_calls)
FC_RUNS = [
    ("A", 1, True, "submitted", 100, 5, 10), ("A", 2, True, "submitted", 200, 5, 20),
    ("A", 3, False, "time_limit", 999, 5, 50),
    ("B", 1, False, "submitted", 300, 5, 30), ("B", 2, False, "step_limit", 600, 5, 30),
    ("B", 3, False, "submitted", 300, 5, 30),
    ("C", 1, True, "submitted", 50, 1, 10), ("C", 2, True, "submitted", 100, 5, 10),
    ("C", 3, True, "submitted", 100, 5, 10),
]
P_RUNS = [
    ("A", 1, True, "submitted", 60, 5, 30), ("A", 2, False, "submitted", 90, 5, 40),
    ("A", 3, False, "error", 90, 5, 40),
    ("B", 1, True, "time_limit", 10, 5, 5), ("B", 2, True, "time_limit", 10, 5, 5),
    ("B", 3, False, "time_limit", 10, 5, 5),
    ("C", 1, True, "submitted", 40, 5, 15), ("C", 2, True, "submitted", 60, 5, 15),
    ("C", 3, True, "submitted", 50, 5, 15),
]


def frame(rows, policy, cell, setting):
    table = pd.DataFrame(rows, columns=["task_id", "attempt", "resolved", "outcome", "total_tokens",
                                        "n_prompt_counts", "agent_calls"])
    table["outcome_class"] = np.where(table["resolved"], "success", "other")
    return table.assign(policy=policy, cell=cell, setting=setting, primitive=policy.split("/")[0],
                        trigger=None, depth=None, summarizer=None, model="m", benchmark="b", cohort="main",
                        wall_s=table["total_tokens"] / 10, billed_exact=table["total_tokens"] * 2.0,
                        billed_est=table["total_tokens"] * 3.0, billed_measured=np.nan,
                        retrieval_cmds=2 if policy != "FC" else 1, execution_cmds=1 if policy != "FC" else 2)


@pytest.fixture
def runs():
    return pd.concat([frame(FC_RUNS, "FC", "FC", None), frame(P_RUNS, "TR/Th/0.5", "TR", "primary")],
                     ignore_index=True)


def test_resolve_rate_is_the_mean_of_per_task_success_fractions(runs):
    fc = runs[runs.policy == "FC"]
    assert resolve_rate(fc) == pytest.approx((2 / 3 + 0 + 1) / 3)
    # per-task means differ from the pooled run mean when tasks have unequal attempts
    assert resolve_rate(fc.iloc[1:]) == pytest.approx((1 / 2 + 0 + 1) / 3)


def test_resource_ratio_inclusion_rules_and_ratio_of_means(runs):
    fc, policy = runs[runs.policy == "FC"], runs[runs.policy != "FC"]
    # FC: A = (100 + 200) / 2 (time-limited run out), B = 400 (the step-limited 600 stays), C = (100 + 100) / 2
    # (the one-prompt run out). Policy: A = 80, B all time-limited -> no measurement, C = 50.
    # Shared tasks A, C: (80 + 50) / 2 / ((150 + 100) / 2) = 0.52 (the mean of ratios would be 0.5167)
    assert task_resource_means(fc, "total_tokens").to_dict() == {"A": 150, "B": 400, "C": 100}
    ratio, n = resource_ratio(policy, fc, "total_tokens")
    assert ratio == pytest.approx(0.52) and n == 2


def test_compare_to_fc_row(runs):
    table = compare_to_fc(runs, model="m", benchmark="b", n_boot=2000, seed=1)
    assert len(table) == 1
    row = table.iloc[0]
    assert row.n_tasks == 3 and row.n_resource_tasks == 2
    assert row.resolve_rate == pytest.approx((1 / 3 + 2 / 3 + 1) / 3)
    assert row.fc_resolve_rate == pytest.approx(5 / 9)
    assert row.delta_pp == pytest.approx(100 * (2 / 3 - 5 / 9))
    assert row.token_ratio == pytest.approx(0.52)
    assert row.cost_ratio == pytest.approx(0.52) and row.cost_ratio_est == pytest.approx(0.52)
    assert row.latency_ratio == pytest.approx(0.52)
    # calls: FC A = (10 + 20) / 2 = 15, C = 10; policy A = (30 + 40 + 40) / 3 = 110/3, C = 15
    assert row.calls_ratio == pytest.approx((110 / 3 + 15) / (15 + 10))
    assert np.isnan(row.cost_ratio_measured) and row.n_measured_tasks == 0
    assert row.retrieval_ratio == pytest.approx(2.0) and row.execution_ratio == pytest.approx(0.5)
    assert row.delta_pp_lo <= row.delta_pp <= row.delta_pp_hi
    assert row.token_ratio_lo <= row.token_ratio <= row.token_ratio_hi
    # every resample holds only A and C or only one of them: the ratio lies within [50/100, 80/150]
    assert 0.5 - 1e-9 <= row.token_ratio_lo and row.token_ratio_hi <= 80 / 150 + 1e-9
    for column in ("policy", "primitive", "trigger", "depth", "setting", "delta_pp_hi", "cost_ratio_measured_lo",
                   "calls_ratio_lo", "latency_ratio_hi", "cost_ratio_est_lo"):
        assert column in table.columns


def test_bootstrap_is_seeded_and_resamples_tasks():
    counts = resample_counts(5, n_boot=1000, seed=3)
    assert counts.shape == (1000, 5) and (counts.sum(axis=1) == 5).all()
    assert np.array_equal(counts, resample_counts(5, n_boot=1000, seed=3))
    assert not np.array_equal(counts, resample_counts(5, n_boot=1000, seed=4))
    # ratio per resample equals a direct recomputation on the drawn tasks
    a, b = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([2.0, 2.0, 2.0, 2.0, np.nan])
    measured = ~np.isnan(b)
    ratios = boot_ratio(counts, a, b, measured)
    k = 17
    drawn = np.repeat(np.arange(5), counts[k].astype(int))
    drawn = drawn[measured[drawn]]
    assert ratios[k] == pytest.approx(a[drawn].mean() / b[drawn].mean())


def test_percentile_interval_is_the_central_95_percent():
    lo, hi = percentile_interval(np.arange(1001, dtype=float))
    assert (lo, hi) == pytest.approx((25.0, 975.0))
    assert percentile_interval(np.array([np.nan, 2.0, 2.0])) == (2.0, 2.0)


def test_identical_tasks_give_a_degenerate_interval():
    rows = [(t, a, True, "submitted", 100, 5, 10) for t in "ABCD" for a in (1, 2)]
    other = [(t, a, a == 1, "submitted", 50, 5, 10) for t in "ABCD" for a in (1, 2)]
    runs = pd.concat([frame(rows, "FC", "FC", None), frame(other, "TR/Th/0.5", "TR", "primary")])
    row = compare_to_fc(runs, model="m", benchmark="b", n_boot=500).iloc[0]
    assert (row.delta_pp, row.delta_pp_lo, row.delta_pp_hi) == pytest.approx((-50.0, -50.0, -50.0))
    assert (row.token_ratio_lo, row.token_ratio_hi) == pytest.approx((0.5, 0.5))


def test_gains_and_losses_need_two_of_three(runs):
    row = gains_losses(runs, model="m", benchmark="b").iloc[0]
    # FC solves A (2/3) and C (3/3); the policy solves B (2/3) and C: gain B, loss A
    assert (row.n_tasks, row.policy_solved, row.fc_solved) == (3, 2, 2)
    assert (row.gains, row.losses, row.net) == (1, 1, 0)
    assert list(row.gain_tasks) == ["B"] and list(row.loss_tasks) == ["A"]


def test_gains_and_losses_leave_out_tasks_without_three_attempts(runs):
    short = runs[~((runs.policy == "FC") & (runs.task_id == "A") & (runs.attempt == 3))]
    row = gains_losses(short, model="m", benchmark="b").iloc[0]
    assert row.n_tasks == 2 and (row.gains, row.losses) == (1, 0)


def test_gains_and_losses_one_attempt_rule(runs):
    first = runs[runs.attempt == 1]
    row = gains_losses(first, model="m", benchmark="b", attempts=1, solved_min=1).iloc[0]
    # attempt 1: FC solves A, C; the policy solves A, B, C -> gain B
    assert (row.n_tasks, row.gains, row.losses) == (3, 1, 0)
    assert gains_losses(first, model="m", benchmark="b").iloc[0].n_tasks == 0  # 3 attempts required


def test_paired_differences_and_holm(runs):
    third = frame([(t, a, t == "C", "submitted", 10, 5, 5) for t in "ABC" for a in (1, 2, 3)],
                  "TRC/Th", "TRC", "primary")
    table = paired_differences(pd.concat([runs, third]), model="m", benchmark="b", n_boot=2000, holm=True)
    assert table[["cell_a", "cell_b"]].values.tolist() == [["FC", "TR"], ["FC", "TRC"], ["TR", "TRC"]]
    # FC 5/9, TR 2/3, TRC 1/3
    assert table["diff_pp"].tolist() == pytest.approx([100 * (5 / 9 - 2 / 3), 100 * (5 / 9 - 1 / 3),
                                                       100 * (2 / 3 - 1 / 3)])
    assert (table["excludes_zero"] == ((table["diff_pp_lo"] > 0) | (table["diff_pp_hi"] < 0))).all()
    # Holm by hand: sort p ascending, multiply the i-th smallest by (m - i), running max, cap at 1
    p = table["p_boot"].to_numpy()
    order = np.argsort(p)
    adjusted = np.minimum(1, np.maximum.accumulate(p[order] * (3 - np.arange(3))))
    expected = np.empty(3)
    expected[order] = adjusted
    assert table["p_holm"].to_numpy() == pytest.approx(expected)


def test_paired_differences_with_chosen_pairs(runs):
    table = paired_differences(runs, model="m", benchmark="b", pairs=[("TR", "FC")], n_boot=100)
    assert table["diff_pp"].tolist() == pytest.approx([100 * (2 / 3 - 5 / 9)])
    with pytest.raises(KeyError, match="nope"):
        paired_differences(runs, model="m", benchmark="b", pairs=[("TR", "nope")], n_boot=100)


def test_execution_length_on_tasks_solved_by_both(runs):
    row = execution_length(runs, model="m", benchmark="b").iloc[0]
    # solved by both: A, C. FC successful calls: A (10 + 20) / 2 = 15, C 10 -> 12.5;
    # policy: A 30, C 15 -> 22.5. Change: 22.5 / 12.5 - 1 = +80 %
    assert row.n_tasks == 2
    assert (row.calls_policy, row.calls_fc) == pytest.approx((22.5, 12.5))
    assert row["pct_change"] == pytest.approx(80.0)
    # resamples hold A and/or C: the change lies between C alone (15/10: +50 %) and A alone (30/15: +100 %)
    assert 50.0 - 1e-9 <= row["pct_change_lo"] <= 80.0 <= row["pct_change_hi"] <= 100.0 + 1e-9


def test_outcome_breakdown_counts_every_class(runs):
    table = outcome_breakdown(runs)
    fc = table[table.cell == "FC"].set_index("outcome_class")
    assert fc.loc["success", "n"] == 5 and fc.loc["other", "n"] == 4 and fc.loc["time_limited", "n"] == 0
    assert fc["share"].sum() == pytest.approx(1.0)
    assert len(table) == 10
