"""The quoted views on the study's own rules (A.5: "successful attempts on tasks solved by both
policies, averaging ... within each task before comparing task means"), on a hand-built table
of three attempts per task, and latency measured from the agent's start (the setup left out).

The table (three attempts, so a task is solved with 2 of 3 successes):

FC:  A: a1 ✓ calls 10, 20 s in calls, agent 40 s (setup 100 s), 1000 tokens
        a2 ✓ calls 14, 14 s, agent 30 s, 1400 tokens; a3 ✗ calls 50          -> solved
     B: a1–a3 ✓ calls 40                                                      -> solved
     C: a1 ✗ calls 99; a2 ✓ calls 20, 40 s, agent 50 s, 2000 tokens
        a3 ✓ calls 30, 30 s, agent 70 s, 3000 tokens                         -> solved
SU:  A: a1 ✓ 15 calls, 45 s, agent 100 s (setup 500 s), summaries 20 s, 1500 tokens
        a2 ✓  9 calls,  9 s, agent  60 s, summaries 12 s,  900 tokens
        a3 ✓ 12 calls, 24 s, agent  80 s, summaries 16 s, 1200 tokens        -> solved
     B: a1 ✓ 5 calls; a2, a3 ✗                                                -> not solved
     C: a1 ✓ 30 calls, 30 s, agent 120 s, summaries 30 s, 2400 tokens
        a2 ✗ 80 calls; a3 ✓ 40 calls, 80 s, agent 180 s, summaries 60 s, 3600 tokens -> solved

Shared solved tasks: A and C (B is FC's only). Task means over the successful attempts:
FC  A: calls (10 + 14) / 2 = 12, per call (2 + 1) / 2 = 1.5 s, tokens 1200
    C: calls (20 + 30) / 2 = 25, per call (2 + 1) / 2 = 1.5 s, tokens 2500
SU  A: calls (15 + 9 + 12) / 3 = 12, per call (3 + 1 + 2) / 3 = 2 s, tokens 1200,
       agent (100 + 60 + 80) / 3 = 80 s, summaries (20 + 12 + 16) / 3 = 16 s
    C: calls (30 + 40) / 2 = 35, per call (1 + 2) / 2 = 1.5 s, tokens 3000,
       agent (120 + 180) / 2 = 150 s, summaries (30 + 60) / 2 = 45 s
Means over A and C, policy / FC:
calls (12 + 35) / 2 = 23.5 against (12 + 25) / 2 = 18.5: 47 / 37
per call (2 + 1.5) / 2 = 1.75 against 1.5: 7 / 6
tokens (1200 + 3000) / 2 = 2100 against (1200 + 2500) / 2 = 1850: 42 / 37
summary share (16 + 45) / 2 = 30.5 s over (80 + 150) / 2 = 115 s: 61 / 230 (5 successful runs)
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ctxpolicy.cli import main
from ctxpolicy.metrics import quoted
from ctxpolicy.metrics.compare import compare_to_baseline
from ctxpolicy.metrics.records import agent_time

# (task, attempt, resolved, agent_calls, agent_latency_s, agent_time_s, setup_s, summary_latency_s, total_tokens)
FC = [
    ("A", 1, True, 10, 20.0, 40.0, 100.0, 0.0, 1000),
    ("A", 2, True, 14, 14.0, 30.0, 0.0, 0.0, 1400),
    ("A", 3, False, 50, 50.0, 90.0, 0.0, 0.0, 5000),
    ("B", 1, True, 40, 40.0, 60.0, 0.0, 0.0, 4000),
    ("B", 2, True, 40, 40.0, 60.0, 0.0, 0.0, 4000),
    ("B", 3, True, 40, 40.0, 60.0, 0.0, 0.0, 4000),
    ("C", 1, False, 99, 99.0, 200.0, 0.0, 0.0, 9900),
    ("C", 2, True, 20, 40.0, 50.0, 0.0, 0.0, 2000),
    ("C", 3, True, 30, 30.0, 70.0, 0.0, 0.0, 3000),
]
SU = [
    ("A", 1, True, 15, 45.0, 100.0, 500.0, 20.0, 1500),
    ("A", 2, True, 9, 9.0, 60.0, 0.0, 12.0, 900),
    ("A", 3, True, 12, 24.0, 80.0, 0.0, 16.0, 1200),
    ("B", 1, True, 5, 5.0, 10.0, 0.0, 1.0, 500),
    ("B", 2, False, 50, 50.0, 99.0, 0.0, 9.0, 5000),
    ("B", 3, False, 50, 50.0, 99.0, 0.0, 9.0, 5000),
    ("C", 1, True, 30, 30.0, 120.0, 0.0, 30.0, 2400),
    ("C", 2, False, 80, 80.0, 300.0, 0.0, 90.0, 8000),
    ("C", 3, True, 40, 80.0, 180.0, 0.0, 60.0, 3600),
]
COLUMNS = [
    "task_id",
    "attempt",
    "resolved",
    "agent_calls",
    "agent_latency_s",
    "agent_time_s",
    "setup_s",
    "summary_latency_s",
    "total_tokens",
]


def cell(rows, policy, track):
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.assign(
        benchmark="b",
        model="m",
        policy=policy,
        cell=policy.replace("/", "_"),
        setting=None if policy == "FC" else "primary",
        track=track,
        cohort="main",
        primitive=policy.split("/")[0],
        summarizer=None,
        outcome="submitted",
        outcome_class=["success" if r else "other" for r in table["resolved"]],
        time_limited=False,
        n_prompt_counts=5,
        wall_s=table["agent_time_s"] + table["setup_s"],
        compressions=1,
        billed_est=table["total_tokens"] * 1.0,
        billed_exact=table["total_tokens"] * 1.0,
        billed_measured=float("nan"),
        retrieval_cmds=1,
        execution_cmds=1,
    )


RUNS = pd.concat([cell(FC, "FC", "calibration"), cell(SU, "SU/Th/0.5", "full")], ignore_index=True)


def test_calls_view_counts_successful_attempts_on_tasks_both_solve_task_means_first():
    row = quoted.calls_latency(RUNS, model="m", benchmark="b", n_boot=20).iloc[0]
    assert row["calls_ratio_est"] == pytest.approx(47 / 37)
    assert row["per_call_latency_ratio_est"] == pytest.approx(7 / 6)
    assert row["calls_ratio_n_tasks"] == 2 and row["shared_solved_tasks"] == 2


def test_summary_share_is_the_ratio_of_task_means_on_shared_solved_tasks_of_the_agent_s_time():
    row = quoted.summary_share(RUNS, model="m", benchmark="b").iloc[0]
    assert row["summary_share"] == pytest.approx(61 / 230)
    assert row["summary_s"] == pytest.approx(30.5) and row["agent_time_s"] == pytest.approx(115.0)
    assert row["shared_solved_tasks"] == 2 and row["solved_runs"] == 5


def test_shared_tokens_is_total_tokens_relative_to_fc_on_shared_solved_tasks():
    row = quoted.shared_tokens(RUNS, model="m", benchmark="b", n_boot=20).iloc[0]
    assert row["tokens_ratio_est"] == pytest.approx(42 / 37)
    assert row["tokens_ratio_n_tasks"] == 2
    assert row["tokens_ratio_lo"] <= row["tokens_ratio_est"] <= row["tokens_ratio_hi"]


def test_latency_ratio_is_on_the_agent_s_time_never_the_setup():
    """Every run is eligible here; per task the mean agent time over all three attempts:
    FC A (40 + 30 + 90) / 3, B 60, C (200 + 50 + 70) / 3; SU A 80, B (10 + 99 + 99) / 3,
    C (120 + 300 + 180) / 3 = 200. Policy mean over tasks / FC's."""
    fc = [(40 + 30 + 90) / 3, 60.0, (200 + 50 + 70) / 3]
    su = [80.0, (10 + 99 + 99) / 3, 200.0]
    row = compare_to_baseline(RUNS, model="m", benchmark="b", n_boot=20, cost_method="estimated").iloc[0]
    assert row["latency_ratio_est"] == pytest.approx(sum(su) / sum(fc))


def test_agent_time_is_agent_s_else_wall_minus_setup_else_wall():
    assert agent_time({"wall_s": 140.0, "setup_s": 100.0, "agent_s": 39.5}) == 39.5
    assert agent_time({"wall_s": 140.0, "setup_s": 100.0, "agent_s": None}) == 40.0
    assert agent_time({"wall_s": 140.0}) == 140.0
    assert agent_time({"wall_s": None, "setup_s": None, "agent_s": None}) is None


def test_the_shared_tokens_view_prints(tmp_path, capsys):
    path = tmp_path / "runs.parquet"
    RUNS.to_parquet(path, index=False)
    assert main(["compare", "--runs", str(path), "--view", "shared-tokens", "--json", "--resamples", "20"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["tokens_ratio_est"] == pytest.approx(42 / 37)
    assert main(["compare", "--runs", str(path), "--view", "summary-share"]) == 0
    assert "26.5%" in capsys.readouterr().out  # 61 / 230
