"""Comparisons against FC on a hand-built runs table; every expected value worked out by hand."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest

from ctxpolicy.metrics.bootstrap import boot_ratio, percentile_interval, resample_counts
from ctxpolicy.metrics.compare import (
    compare_to_baseline,
    outcome_breakdown,
    paired_differences,
    resolve_rate,
    resource_ratio,
    solved_threshold,
    task_resource_means,
)

# (task, attempt, resolved, outcome, total_tokens, n_prompt_counts, agent_calls)
FC_RUNS = [
    ("A", 1, True, "submitted", 100, 5, 10),
    ("A", 2, True, "submitted", 200, 5, 20),
    ("A", 3, False, "time_limit", 999, 5, 50),
    ("B", 1, False, "submitted", 300, 5, 30),
    ("B", 2, False, "step_limit", 600, 5, 30),
    ("B", 3, False, "submitted", 300, 5, 30),
    ("C", 1, True, "submitted", 50, 1, 10),
    ("C", 2, True, "submitted", 100, 5, 10),
    ("C", 3, True, "submitted", 100, 5, 10),
]
P_RUNS = [
    ("A", 1, True, "submitted", 60, 5, 30),
    ("A", 2, False, "submitted", 90, 5, 40),
    ("A", 3, False, "error", 90, 5, 40),
    ("B", 1, True, "time_limit", 10, 5, 5),
    ("B", 2, True, "time_limit", 10, 5, 5),
    ("B", 3, False, "time_limit", 10, 5, 5),
    ("C", 1, True, "submitted", 40, 5, 15),
    ("C", 2, True, "submitted", 60, 5, 15),
    ("C", 3, True, "submitted", 50, 5, 15),
]


def frame(rows, policy, cell, setting):
    table = pd.DataFrame(
        rows, columns=["task_id", "attempt", "resolved", "outcome", "total_tokens", "n_prompt_counts", "agent_calls"]
    )
    table["outcome_class"] = np.where(table["resolved"], "success", "other")
    return table.assign(
        policy=policy,
        cell=cell,
        setting=setting,
        primitive=policy.split("/")[0],
        trigger=None,
        depth=None,
        summarizer=None,
        model="m",
        benchmark="b",
        cohort="main",
        wall_s=table["total_tokens"] / 10,
        billed_exact=table["total_tokens"] * 2.0,
        billed_est=table["total_tokens"] * 3.0,
        billed_measured=np.nan,
        retrieval_cmds=2 if policy != "FC" else 1,
        execution_cmds=1 if policy != "FC" else 2,
    )


@pytest.fixture
def runs():
    return pd.concat([frame(FC_RUNS, "FC", "FC", None), frame(P_RUNS, "TR/Th/0.5", "TR", "primary")], ignore_index=True)


def test_resolve_rate_is_the_mean_of_per_task_success_fractions(runs):
    fc = runs[runs.policy == "FC"]
    assert resolve_rate(fc) == pytest.approx((2 / 3 + 0 + 1) / 3)
    # over the planned attempts: A's missing (successful) attempt 1 counts as unresolved, 1 of 3,
    # not 1 of the 2 recorded
    assert resolve_rate(fc.iloc[1:]) == pytest.approx((1 / 3 + 0 + 1) / 3)
    # four planned attempts: A 2/4, B 0/4, C 3/4; attempt numbers beyond the plan do not count
    assert resolve_rate(fc, attempts=4) == pytest.approx((2 / 4 + 0 + 3 / 4) / 3)
    assert resolve_rate(fc, attempts=1) == pytest.approx((1 + 0 + 1) / 3)


def test_solved_threshold_is_two_thirds_of_the_attempts_rounded_up():
    assert [solved_threshold(a) for a in (1, 2, 3, 4, 5, 6)] == [1, 2, 2, 3, 4, 4]


def test_resource_ratio_inclusion_rules_and_ratio_of_means(runs):
    fc, policy = runs[runs.policy == "FC"], runs[runs.policy != "FC"]
    # FC: A = (100 + 200) / 2 (time-limited run out), B = 400 (the step-limited 600 stays), C = (100 + 100) / 2
    # (the one-prompt run out). Policy: A = 80, B all time-limited -> no measurement, C = 50.
    # Shared tasks A, C: (80 + 50) / 2 / ((150 + 100) / 2) = 0.52 (the mean of ratios would be 0.5167)
    assert task_resource_means(fc, "total_tokens").to_dict() == {"A": 150, "B": 400, "C": 100}
    ratio, n = resource_ratio(policy, fc, "total_tokens")
    assert ratio == pytest.approx(0.52) and n == 2


def test_compare_to_baseline_row(runs):
    table = compare_to_baseline(runs, model="m", benchmark="b", n_boot=2000, seed=1)
    assert len(table) == 1
    row = table.iloc[0]
    assert row.n_tasks == 3 and row.tokens_ratio_n_tasks == 2
    assert row.resolve_rate == pytest.approx((1 / 3 + 2 / 3 + 1) / 3)
    assert row.baseline_resolve_rate == pytest.approx(5 / 9)
    assert row.resolve_delta_est == pytest.approx(2 / 3 - 5 / 9)
    assert row.tokens_ratio_est == pytest.approx(0.52)
    assert row.cost_ratio_est == pytest.approx(0.52) and row.cost_ratio_estimated_est == pytest.approx(0.52)
    assert row.cost_ratio_exact_est == pytest.approx(0.52) and row.cost_ratio_method == "estimated"
    assert row.latency_ratio_est == pytest.approx(0.52)
    # calls: FC A = (10 + 20) / 2 = 15, C = 10; policy A = (30 + 40 + 40) / 3 = 110/3, C = 15
    assert row.calls_ratio_est == pytest.approx((110 / 3 + 15) / (15 + 10))
    assert np.isnan(row.cost_ratio_measured_est) and row.cost_ratio_measured_n_tasks == 0
    assert row.retrieval_ratio_est == pytest.approx(2.0) and row.execution_ratio_est == pytest.approx(0.5)
    assert row.resolve_delta_lo <= row.resolve_delta_est <= row.resolve_delta_hi
    assert row.tokens_ratio_lo <= row.tokens_ratio_est <= row.tokens_ratio_hi
    # every resample holds only A and C or only one of them: the ratio lies within [50/100, 80/150]
    assert 0.5 - 1e-9 <= row.tokens_ratio_lo and row.tokens_ratio_hi <= 80 / 150 + 1e-9
    for column in ("policy", "primitive", "trigger", "depth", "setting", "cost_ratio_measured_lo", "calls_ratio_lo"):
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
    row = compare_to_baseline(runs, model="m", benchmark="b", n_boot=500).iloc[0]
    assert (row.resolve_delta_est, row.resolve_delta_lo, row.resolve_delta_hi) == pytest.approx((-0.5, -0.5, -0.5))
    assert (row.tokens_ratio_lo, row.tokens_ratio_hi) == pytest.approx((0.5, 0.5))


def test_gains_and_losses_need_two_of_three(runs):
    row = compare_to_baseline(runs, model="m", benchmark="b", n_boot=10).iloc[0]
    # FC solves A (2/3) and C (3/3); the policy solves B (2/3) and C: gain B, loss A
    assert (row.gains_losses_tasks, row.solved, row.baseline_solved) == (3, 2, 2)
    assert (row.gains, row.losses) == (1, 1)
    assert list(row.gain_tasks) == ["B"] and list(row.loss_tasks) == ["A"]
    assert row.left_out_tasks == 0


def test_gains_and_losses_leave_out_tasks_without_three_attempts(runs):
    short = runs[~((runs.policy == "FC") & (runs.task_id == "A") & (runs.attempt == 3))]
    row = compare_to_baseline(short, model="m", benchmark="b", n_boot=10).iloc[0]
    assert row.gains_losses_tasks == 2 and (row.gains, row.losses) == (1, 0)
    assert row.left_out_tasks == 1  # A: FC has two of the three attempts


def test_gains_and_losses_one_attempt_rule(runs):
    first = runs[runs.attempt == 1]
    row = compare_to_baseline(first, model="m", benchmark="b", n_boot=10).iloc[0]
    # one planned attempt (the table's largest attempt number), solved = 1 of 1:
    # attempt 1: FC solves A, C; the policy solves A, B, C -> gain B
    assert row.attempts == 1
    assert (row.gains_losses_tasks, row.gains, row.losses) == (3, 1, 0)
    three = compare_to_baseline(first, model="m", benchmark="b", attempts=3, n_boot=10).iloc[0]
    assert (three.gains_losses_tasks, three.left_out_tasks) == (0, 3)  # 3 recorded attempts required


def test_paired_differences_and_holm(runs):
    third = frame(
        [(t, a, t == "C", "submitted", 10, 5, 5) for t in "ABC" for a in (1, 2, 3)], "TRC/Th", "TRC", "primary"
    )
    table = paired_differences(pd.concat([runs, third]), model="m", benchmark="b", n_boot=2000, holm=True)
    assert table[["cell_a", "cell_b"]].values.tolist() == [["FC", "TR"], ["FC", "TRC"], ["TR", "TRC"]]
    # FC 5/9, TR 2/3, TRC 1/3
    assert table["diff_pp"].tolist() == pytest.approx(
        [100 * (5 / 9 - 2 / 3), 100 * (5 / 9 - 1 / 3), 100 * (2 / 3 - 1 / 3)]
    )
    assert (table["excludes_zero"] == ((table["diff_pp_lo"] > 0) | (table["diff_pp_hi"] < 0))).all()
    # Holm by hand: sort p ascending, multiply the i-th smallest by (m - i), running max, cap at 1
    p = table["p_boot"].to_numpy()
    order = np.argsort(p)
    adjusted = np.minimum(1, np.maximum.accumulate(p[order] * (3 - np.arange(3))))
    expected = np.empty(3)
    expected[order] = adjusted
    assert table["p_holm"].to_numpy() == pytest.approx(expected)
    assert gc.get_freeze_count() == 0  # the objects set aside for statsmodels' collection are back


def test_holm_leaves_objects_the_caller_froze_frozen(runs):
    kept = [[]]  # frozen by the caller, as a server does before it forks
    gc.freeze()
    try:
        table = paired_differences(runs, model="m", benchmark="b", n_boot=200, holm=True)
        assert table["p_holm"].notna().any()
        assert not any(o is kept for o in gc.get_objects())  # still set aside: frozen objects are in no generation
    finally:
        gc.unfreeze()
    assert any(o is kept for o in gc.get_objects())


def test_paired_differences_with_chosen_pairs(runs):
    table = paired_differences(runs, model="m", benchmark="b", pairs=[("TR", "FC")], n_boot=100)
    assert table["diff_pp"].tolist() == pytest.approx([100 * (2 / 3 - 5 / 9)])
    with pytest.raises(KeyError, match="nope"):
        paired_differences(runs, model="m", benchmark="b", pairs=[("TR", "nope")], n_boot=100)


def test_calls_change_on_tasks_solved_two_of_three_by_both(runs):
    row = compare_to_baseline(runs, model="m", benchmark="b", n_boot=100).iloc[0]
    # solved (2 of 3): FC A, C; policy B, C. Shared: C. Calls of successful attempts: FC 10, policy 15
    assert row.calls_change_n_tasks == 1
    assert (row.calls_change_est, row.calls_change_lo, row.calls_change_hi) == pytest.approx((0.5, 0.5, 0.5))


def test_outcome_breakdown_counts_every_class(runs):
    table = outcome_breakdown(runs)
    fc = table[table.cell == "FC"].set_index("outcome_class")
    assert fc.loc["success", "n"] == 5 and fc.loc["other", "n"] == 4 and fc.loc["time_limited", "n"] == 0
    assert fc["share"].sum() == pytest.approx(1.0)
    assert len(table) == 10 and (table["n_planned"] == 9).all() and (table["n_missing"] == 0).all()


def test_outcome_breakdown_counts_missing_planned_attempts_as_other(runs):
    # the policy lost B's attempt 3 (time-limited) and all of C: 9 planned attempts (tasks A, B, C of
    # the benchmark and model, 3 each), 5 recorded: A success, A other, A other (error),
    # B success, B success; 4 missing -> other = 2 + 4
    short = runs[~((runs.policy != "FC") & (((runs.task_id == "B") & (runs.attempt == 3)) | (runs.task_id == "C")))]
    table = outcome_breakdown(short, attempts=3)
    policy = table[table.cell == "TR"].set_index("outcome_class")
    assert policy["n"].to_dict() == {
        "success": 3,
        "time_limited": 0,
        "step_limited": 0,
        "submitted_unsuccessful": 0,
        "other": 6,
    }
    assert (policy["n_planned"] == 9).all() and (policy["n_missing"] == 4).all()
    assert policy.loc["other", "share"] == pytest.approx(6 / 9)


# -- compare_to_baseline: the command's and the figures' comparison -------------------------


def test_compare_to_baseline_row_worked_by_hand(runs):
    row = compare_to_baseline(runs, model="m", benchmark="b", n_boot=1000, seed=2).iloc[0]
    assert (row.policy, row.setting, row.attempts, row.baseline, row.cost_ratio_method) == (
        "TR/Th/0.5",
        "primary",
        3,
        "FC",
        "estimated",
    )
    # fractions: policy A 1/3, B 2/3, C 1 -> 2/3; FC 2/3, 0, 1 -> 5/9; difference 1/9
    assert (row.n_tasks, row.resolve_rate, row.baseline_resolve_rate) == pytest.approx((3, 2 / 3, 5 / 9))
    assert row.resolve_delta_est == pytest.approx(1 / 9)
    assert -1 <= row.resolve_delta_lo <= row.resolve_delta_est <= row.resolve_delta_hi <= 1
    assert (row.tokens_ratio_est, row.tokens_ratio_n_tasks) == (pytest.approx(0.52), 2)
    assert (row.cost_ratio_est, row.latency_ratio_est) == pytest.approx((0.52, 0.52))
    # solved 2 of 3: policy B, C; FC A, C -> gain B, loss A, nothing left out
    assert (row.solved, row.baseline_solved, row.gains, row.losses, row.left_out_tasks) == (2, 2, 1, 1, 0)
    # calls on tasks both solve (C): 15 / 10 - 1 = 0.5 over one task
    assert (row.calls_change_est, row.calls_change_lo, row.calls_change_hi) == pytest.approx((0.5, 0.5, 0.5))
    assert row.calls_change_n_tasks == 1


def test_compare_to_baseline_cost_method_picks_the_headline(runs):
    runs = runs.copy()
    runs.loc[(runs.policy != "FC") & (runs.task_id == "C"), "billed_exact"] = 0.0
    # exact: policy A (60 + 90 + 90) / 3 * 2 = 160, C 0 -> mean 80; FC A 300, C 200 -> 250: 0.32
    exact = compare_to_baseline(runs, model="m", benchmark="b", n_boot=200, cost_method="exact").iloc[0]
    assert exact.cost_ratio_method == "exact" and exact.cost_ratio_est == pytest.approx(0.32)
    assert exact.cost_ratio_estimated_est == pytest.approx(0.52) and exact.cost_ratio_exact_est == pytest.approx(0.32)
    default = compare_to_baseline(runs, model="m", benchmark="b", n_boot=200).iloc[0]
    assert default.cost_ratio_est == pytest.approx(0.52)
    measured = compare_to_baseline(runs, model="m", benchmark="b", n_boot=200, cost_method="measured").iloc[0]
    assert np.isnan(measured.cost_ratio_est) and measured.cost_ratio_n_tasks == 0
    with pytest.raises(ValueError, match="cost method 'cheap' unknown"):
        compare_to_baseline(runs, model="m", benchmark="b", cost_method="cheap")


def test_compare_to_baseline_counts_missing_attempts_as_unresolved(runs):
    # the policy loses A's successful attempt 1, FC loses B's attempt 2
    short = runs[
        ~(
            ((runs.policy != "FC") & (runs.task_id == "A") & (runs.attempt == 1))
            | ((runs.policy == "FC") & (runs.task_id == "B") & (runs.attempt == 2))
        )
    ]
    row = compare_to_baseline(short, model="m", benchmark="b", n_boot=200).iloc[0]
    # policy A 0/3, B 2/3, C 3/3 -> 5/9; FC A 2/3, B 0/3, C 3/3 -> 5/9
    assert (row.n_tasks, row.resolve_rate, row.baseline_resolve_rate) == pytest.approx((3, 5 / 9, 5 / 9))
    # gains/losses need all three attempts: A (policy) and B (FC) are left out; C is solved by both
    assert (row.solved, row.baseline_solved, row.gains, row.losses, row.left_out_tasks) == (1, 1, 0, 0, 2)


def test_compare_to_baseline_task_without_any_policy_run(runs):
    no_c = runs[~((runs.policy != "FC") & (runs.task_id == "C"))]
    row = compare_to_baseline(no_c, model="m", benchmark="b", n_boot=200).iloc[0]
    # same cohort: C counts, all three attempts missing -> 0. Policy (1/3 + 2/3 + 0) / 3
    assert (row.n_tasks, row.resolve_rate, row.left_out_tasks) == (3, pytest.approx(1 / 3), 1)
    # a policy on another cohort (a sweep subset) is compared on its own tasks A, B only
    sweep = no_c.assign(cohort=np.where(no_c.policy == "FC", "main", "sweep"))
    row = compare_to_baseline(sweep, model="m", benchmark="b", n_boot=200).iloc[0]
    assert (row.n_tasks, row.resolve_rate, row.baseline_resolve_rate) == pytest.approx((2, 1 / 2, 1 / 3))


def test_compare_to_baseline_with_another_baseline_and_without_one(runs):
    row = compare_to_baseline(runs, model="m", benchmark="b", baseline="TR/Th/0.5", n_boot=200).iloc[0]
    assert (row.policy, row.resolve_rate, row.baseline_resolve_rate) == (
        "FC",
        pytest.approx(5 / 9),
        pytest.approx(2 / 3),
    )
    assert (row.gains, row.losses) == (1, 1)
    with pytest.raises(ValueError, match="no FC runs for model 'm' on benchmark 'b'"):
        compare_to_baseline(runs[runs.policy != "FC"], model="m", benchmark="b")


def test_outcome_breakdown_keeps_cells_of_the_same_name_apart_per_model(runs):
    other_model = runs.assign(model="m2")
    other_model = other_model[~((other_model.policy == "FC") & (other_model.task_id == "C"))]
    table = outcome_breakdown(pd.concat([runs, other_model]))
    fc = table[(table.cell == "FC")].groupby("model")["n_planned"].first()
    # m2's FC lacks C's three runs, but C was planned there: the TR cell of m2 ran it
    assert fc.to_dict() == {"m": 9, "m2": 9}
    assert table[(table.cell == "FC") & (table.model == "m2")].set_index("outcome_class").loc["other", "n"] == 4 + 3
