"""The cost decomposition (ctxpolicy.metrics.decomposition) and its columns in ctxpolicy compare."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from ctxpolicy.metrics.compare import compare_to_baseline, resolve_rate, select
from ctxpolicy.metrics.decomposition import decompose, decomposition_columns, missing_decompositions, task_ratios
from ctxpolicy.testing.studies import study_of


def _run(
    track,
    policy,
    setting,
    task,
    cost,
    tokens,
    calls,
    summary_calls=0,
    summarizer=None,
    resolved=True,
    outcome="submitted",
):
    cell = ("" if track != "replay" else "r:") + policy + (f"__{setting}" if setting else "")
    return {
        "benchmark": "local",
        "model": "m",
        "cohort": "main",
        "track": track,
        "policy": policy,
        "setting": setting,
        "summarizer": summarizer,
        "cell": cell,
        "task_id": task,
        "attempt": 1,
        "outcome": outcome,
        "resolved": resolved,
        "n_prompt_counts": 3,
        "wall_s": 1.0,
        "billed_est": cost,
        "billed_exact": cost,
        "billed_measured": float("nan"),
        "total_tokens": tokens,
        "agent_calls": calls,
        "summary_calls": summary_calls,
        "retrieval_cmds": 0,
        "execution_cmds": 0,
        "outcome_class": "resolved",
    }


@pytest.fixture
def runs() -> pd.DataFrame:
    rows = [
        _run("full", "FC", None, "a", 100, 1000, 10),
        _run("full", "FC", None, "b", 200, 2000, 20),
        _run("full", "TR/Th/0.5", "primary", "a", 90, 800, 12),
        _run("full", "TR/Th/0.5", "primary", "b", 160, 1400, 24),
        _run("full", "OTRC/St", None, "a", 100, 1000, 10),  # no replay of it
        # replays: FC reproduces FC; TR halves the cost and tokens, keeps the calls
        _run("replay", "FC", None, "a", 100, 1000, 10, resolved=False),
        _run("replay", "FC", None, "b", 200, 2000, 20, resolved=False, outcome="time_limit"),
        _run("replay", "TR/Th/0.5", "primary", "a", 50, 500, 10, resolved=False),
        _run("replay", "TR/Th/0.5", "primary", "b", 100, 1000, 20, resolved=False, outcome="time_limit"),
    ]
    return pd.DataFrame(rows)


def test_the_decomposition_splits_each_ratio_into_mechanical_and_behavioural(runs):
    table = decompose(runs, model="m", benchmark="local", n_boot=200)
    assert list(table["policy"]) == ["TR/Th/0.5"]
    row = table.iloc[0]
    assert row["decomposition_n_tasks"] == 2 and row["replay_summaries"] == "none"
    assert math.isclose(row["cost_mechanical_est"], 150 / 300)
    assert math.isclose(row["cost_actual_est"], 250 / 300)
    assert math.isclose(row["cost_behavioural_est"], (250 / 300) / (150 / 300))
    assert math.isclose(row["tokens_mechanical_est"], 0.5) and math.isclose(row["tokens_actual_est"], 2200 / 3000)
    assert math.isclose(row["calls_mechanical_est"], 1.0) and math.isclose(row["calls_behavioural_est"], 36 / 30)
    assert row["cost_behavioural_lo"] <= row["cost_behavioural_est"] <= row["cost_behavioural_hi"]
    assert set(decomposition_columns()) <= set(table.columns)
    per_task = task_ratios(runs, model="m", benchmark="local").set_index(["task_id", "resource"])
    assert per_task.loc[("a", "cost"), "mechanical"] == 0.5 and per_task.loc[("b", "cost"), "actual"] == 0.8
    assert math.isclose(per_task.loc[("b", "calls"), "behavioural"], 1.2)
    assert missing_decompositions(runs, model="m", benchmark="local") == [
        "local/m/OTRC/St: no replay of this policy and setting"
    ]


def test_replay_runs_never_enter_resolve_rates_or_the_baseline(runs):
    proxied = _run("proxy", "FC", None, "a", 100, 1000, 10, resolved=False)
    runs = pd.concat([runs, pd.DataFrame([{**proxied, "benchmark": "local", "cell": "proxy:FC"}])], ignore_index=True)
    assert set(select(runs, model="m", benchmark="local")["track"]) == {"full"}
    fc = select(runs, model="m", benchmark="local")
    assert resolve_rate(fc[fc["policy"] == "FC"]) == 1.0  # the unresolved FC replays are not counted
    # with them, FC would be two cells and the baseline ambiguous
    table = compare_to_baseline(runs, model="m", benchmark="local", n_boot=100)
    assert set(table["track"]) == {"full"} and set(table["baseline_resolve_rate"]) == {1.0}


def test_compare_prints_the_decomposition_columns_from_the_same_table(runs, tmp_path, capsys):
    from ctxpolicy.metrics import cli_compare

    path = tmp_path / "runs.parquet"
    runs.to_parquet(path)
    args = SimpleNamespace(
        runs=path,
        replay=None,
        benchmark=None,
        model=None,
        track="full",
        setting=None,
        baseline="FC",
        attempts=None,
        resamples=100,
        seed=0,
        cost_method="estimated",
        json=True,
        csv=False,
    )
    assert cli_compare.main(args) == 0
    records = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    assert math.isclose(records["TR/Th/0.5"]["decomposition"]["cost"]["mechanical"]["est"], 0.5)
    assert records["OTRC/St"]["decomposition"] is None
    replays = tmp_path / "replay.parquet"
    runs[runs["track"] == "replay"].to_parquet(replays)
    runs[runs["track"] != "replay"].to_parquet(path)
    args.replay, args.json, args.csv = replays, False, True
    assert cli_compare.main(args) == 0
    csv = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out))
    assert math.isclose(csv.set_index("policy").loc["TR/Th/0.5", "cost_behavioural_est"], 250 / 150)


def test_the_figure_draws_every_full_comparison_policy_with_replays_and_notes_without(tmp_path):
    from ctxpolicy.figures import decomposition, inputs, output
    from ctxpolicy.testing.replays import replay_table

    fixture = Path(__file__).parent / "fixtures" / "figures"
    config = inputs.read_study(fixture / "config.yaml")
    runs = inputs.read_runs(fixture / "tables")
    replays = replay_table(runs, saving=0.6)
    data = decomposition.compute(runs, replays, config, n_boot=50, seed=0)
    assert not data.empty and set(data.table["cost_mechanical_est"].round(6)) == {0.6}
    ratio = data.table["cost_actual_est"] / data.table["cost_mechanical_est"]
    assert (ratio - data.table["cost_behavioural_est"]).abs().max() < 1e-9
    assert output.save_figure(decomposition.plot(data), tmp_path, "with")[1].stat().st_size > 10_000
    empty = decomposition.compute(runs, replays.iloc[0:0], config, n_boot=50, seed=0)
    assert empty.empty and "no replay runs" in empty.note_text()


def test_one_cost_method_prices_both_sides_and_measured_is_refused(runs):
    from ctxpolicy.metrics.decomposition import MeasuredCostError

    # exact costs twice the estimate on the replays only: with one method per side mixed, the
    # exact-priced mechanical ratio would not move; priced alike, it follows the method chosen
    replay = runs["track"] == "replay"
    runs = runs.assign(
        billed_exact=runs["billed_est"].where(~replay, runs["billed_est"] * (1 + (runs["task_id"] == "a")))
    )
    est = decompose(runs, model="m", benchmark="local", cost_method="estimated", n_boot=50).iloc[0]
    exact = decompose(runs, model="m", benchmark="local", cost_method="exact", n_boot=50).iloc[0]
    assert math.isclose(est["cost_mechanical_est"], 150 / 300)
    assert math.isclose(exact["cost_mechanical_est"], (100 + 100) / (200 + 200))  # a doubled on both replays
    assert math.isclose(exact["cost_actual_est"], est["cost_actual_est"])  # the runs: same numbers here
    with pytest.raises(MeasuredCostError, match="no server-reported cached tokens"):
        decompose(runs, model="m", benchmark="local", cost_method="measured", n_boot=50)


def test_the_figure_names_one_method_and_refuses_measured_with_a_note():
    from ctxpolicy.figures import decomposition, inputs
    from ctxpolicy.testing.replays import replay_table

    fixture = Path(__file__).parent / "fixtures" / "figures"
    config = inputs.read_study(fixture / "config.yaml")
    runs = inputs.read_runs(fixture / "tables")
    replays = replay_table(runs, saving=0.6)
    measured = {**config.config, "metrics": {**config.config["metrics"], "cost_method": "measured"}}
    data = decomposition.compute(runs, replays, study_of(measured), n_boot=20, seed=0)
    assert data.empty and "cost method 'measured'" in data.note_text()
    fig = decomposition.plot(decomposition.compute(runs, replays, config, n_boot=20, seed=0))
    texts = " ".join(t.get_text() for t in fig.texts)
    method = config.cost_method
    assert f"one method for the runs and the replays: {method}" in texts and "exact prefix" not in texts
