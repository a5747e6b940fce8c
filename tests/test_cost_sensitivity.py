"""The cost_sensitivity numbers (``metrics.sensitivity``) on hand-worked cases: the break-even
discount, and a hand-built runs table whose every ratio is worked out below.

Runs table (estimated parts; billed = fresh + d·cached + summary, at the table's d = 0.1):

    FC         A: fresh 100, cached  900, summary  0  (billed 190)   exact: the same
               B: fresh 200, cached 1800, summary  0  (billed 380)   exact: unknown (NaN)
               C: time-limited (not eligible), fresh 9999
    TR/Th/0.5  A: fresh 300, cached  300, summary 50  (billed 380)   exact: fresh 400, cached 200
               B: fresh 500, cached  500, summary 50  (billed 600)   exact: fresh 600, cached 400
               C: fresh 100, cached  100 (eligible, but FC's C is not: on neither side)

Task means, estimated, over A and B: F_fc = 150, C_fc = 1350, F_p = 450, C_p = 400, so
ratio(d) = (450 + 400 d) / (150 + 1350 d): 490/285 at 0.1, 550/487.5 at 0.25, 650/825 at 0.5,
850/1500 at 1, and the bills cross at d = (150 - 450) / (400 - 1350) = 6/19.
Exact, on A only (FC's B unknown): (450 + 0.1·200) / (100 + 0.1·900) = 470/190, crossing at
(100 - 450) / (200 - 900) = 0.5.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from ctxpolicy.metrics.compare import compare_to_baseline
from ctxpolicy.metrics.sensitivity import DISCOUNTS, break_even, cost_sensitivity, discount_ratio

NAN = math.nan


def test_the_break_even_where_the_bills_cross():
    """(100 + d·200) = (50 + d·400) at d = 0.25: the policy is dearer below it, cheaper above."""
    assert break_even(100, 200, 50, 400) == pytest.approx(0.25)
    assert break_even(100, 100, 150, 50) == pytest.approx(1.0)  # the crossing at no cache still counts


def test_no_break_even_where_the_bills_never_cross_in_zero_to_one():
    """(40 + 100 d) < (50 + 200 d) for every d >= 0: they would cross at d = -0.1, outside [0, 1];
    equal cached tokens and different fresh ones never cross; equal bills have no single crossing."""
    assert math.isnan(break_even(40, 100, 50, 200))
    assert math.isnan(break_even(40, 100, 50, 100))
    assert math.isnan(break_even(50, 100, 50, 100))
    assert math.isnan(break_even(NAN, 100, 50, 100))


def test_fc_without_cached_tokens_crosses_where_the_policy_s_cache_pays_for_its_fresh_tokens():
    """FC all fresh (300, nothing cached); the policy 100 fresh + 400 cached: 100 + 400 d = 300 at d = 0.5."""
    assert break_even(100, 400, 300, 0) == pytest.approx(0.5)


def _runs() -> pd.DataFrame:
    rows = [
        # policy, task, outcome, fresh_est, cached_est, summary, fresh_exact, cached_exact
        ("FC", "A", "submitted", 100, 900, 0, 100, 900),
        ("FC", "B", "submitted", 200, 1800, 0, NAN, NAN),
        ("FC", "C", "time_limit", 9999, 0, 0, 9999, 0),
        ("TR/Th/0.5", "A", "submitted", 300, 300, 50, 400, 200),
        ("TR/Th/0.5", "B", "submitted", 500, 500, 50, 600, 400),
        ("TR/Th/0.5", "C", "submitted", 100, 100, 0, 100, 100),
    ]
    columns = "policy task_id outcome fresh_est cached_est summary_input fresh_exact cached_exact".split()
    runs = pd.DataFrame(rows, columns=columns)
    fc = runs["policy"] == "FC"
    return runs.assign(
        benchmark="b",
        model="m",
        track="full",
        attempt=1,
        resolved=False,
        n_prompt_counts=5,
        cell=fc.map({True: "FC", False: "TR_Th_0.5__primary"}),
        setting=fc.map({True: None, False: "primary"}),
        summarizer=None,
        total_tokens=100,
        agent_time_s=1.0,
        agent_calls=3,
        billed_est=runs["fresh_est"] + 0.1 * runs["cached_est"] + runs["summary_input"],
        billed_exact=runs["fresh_exact"] + 0.1 * runs["cached_exact"] + runs["summary_input"],
    )


@pytest.fixture(scope="module")
def row() -> dict:
    table = cost_sensitivity(_runs(), model="m", benchmark="b", n_boot=50, seed=0)
    assert len(table) == 1
    return table.iloc[0].to_dict()


def test_the_ratio_at_each_discount_and_the_break_even(row):
    expected = {0.1: 490 / 285, 0.25: 550 / 487.5, 0.5: 650 / 825, 1.0: 850 / 1500}
    for d in DISCOUNTS:
        assert row[f"{discount_ratio(d)}_est"] == pytest.approx(expected[d]), d
        assert row[f"{discount_ratio(d)}_n_tasks"] == 2
    assert row["break_even_estimated"] == pytest.approx(6 / 19)
    assert row["cost_ratio_method"] == "estimated" and row["n_tasks"] == 3


def test_each_cache_model_on_the_tasks_it_prices_and_the_same_as_compare(row):
    assert row["cost_ratio_estimated_est"] == pytest.approx(490 / 285)
    assert row["cost_ratio_exact_est"] == pytest.approx(470 / 190) and row["cost_ratio_exact_n_tasks"] == 1
    assert row["break_even_exact"] == pytest.approx(0.5)
    assert math.isnan(row["cost_ratio_measured_est"]) and math.isnan(row["break_even_measured"])  # no such column
    compared = compare_to_baseline(_runs(), model="m", benchmark="b", n_boot=50, seed=0).iloc[0]
    for name in ("estimated", "exact"):
        for part in ("est", "lo", "hi", "n_tasks"):
            assert row[f"cost_ratio_{name}_{part}"] == pytest.approx(compared[f"cost_ratio_{name}_{part}"])


def test_the_exact_ratio_at_each_discount_under_the_exact_method():
    """Under exact, on A only: (450 + 200 d) / (100 + 900 d); at no cache 650/1000."""
    table = cost_sensitivity(_runs(), model="m", benchmark="b", cost_method="exact", n_boot=20, seed=0)
    assert table.iloc[0][f"{discount_ratio(1.0)}_est"] == pytest.approx(650 / 1000)
    assert table.iloc[0][f"{discount_ratio(0.5)}_est"] == pytest.approx(550 / 550)


def test_without_baseline_runs_it_says_so():
    with pytest.raises(ValueError, match="no FC runs"):
        cost_sensitivity(_runs().query("policy != 'FC'"), model="m", benchmark="b", n_boot=10)


def test_compare_view_cost_models_prints_the_ratios_and_the_break_even(tmp_path, capsys):
    from ctxpolicy.cli import main

    path = tmp_path / "runs.parquet"
    _runs().assign(outcome=lambda r: r["outcome"].astype(str)).to_parquet(path, index=False)
    assert main(["compare", "--table", str(path), "--view", "cost-models", "--resamples", "50"]) == 0
    header, row = capsys.readouterr().out.splitlines()[1:3]
    assert header.split()[:7] == ["benchmark", "model", "policy", "setting", "n", "estimated", "exact"]
    assert "measured" not in header.split()  # no cell has it
    assert row.split()[:4] == ["b", "m", "TR/Th/0.5", "primary"] and row.split()[-1] == f"{6 / 19:.2f}"
    assert f"{490 / 285:.2f} [" in row and f"{850 / 1500:.2f} [" in row
    assert main(["compare", "--table", str(path), "--view", "cost-models", "--cost-method", "exact", "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["cost_ratio_method"] == "exact" and record["break_even_exact"] == pytest.approx(0.5)
