"""The quoted numbers (`ctxpolicy compare --view ...`) on a hand-built runs table; every expected
value is worked out by hand in the comments."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest

from ctxpolicy.cli import main
from ctxpolicy.metrics import quoted

# (task, resolved, outcome, agent_calls, agent_latency_s, wall_s, summary_latency_s, compressions)
FC = [
    ("A", True, "submitted", 10, 20.0, 30.0, 0.0, 0),  # 2 s per call
    ("B", True, "submitted", 20, 20.0, 25.0, 0.0, 0),  # 1 s per call
    ("C", False, "time_limit", 99, 99.0, 900.0, 0.0, 0),  # time-limited: no resource ratio
]
SU = [
    ("A", True, "submitted", 12, 36.0, 50.0, 10.0, 3),  # 3 s per call
    ("B", False, "submitted", 30, 15.0, 40.0, 20.0, 5),  # 0.5 s per call
    ("C", True, "submitted", 5, 5.0, 10.0, 5.0, 1),
]
TR = [
    ("A", True, "submitted", 10, 10.0, 20.0, 0.0, 2),
    ("B", True, "submitted", 20, 40.0, 45.0, 0.0, 6),
    ("C", False, "submitted", 8, 8.0, 15.0, 0.0, 1),
]
TR_03 = [(t, True, "submitted", 30, 30.0, 100.0, 0.0, 1) for t in "ABC"]  # best resolve
TR_07 = [  # cheapest; latency ties TR/Th/0.5's mean of 80 / 3 s
    ("A", False, "submitted", 5, 5.0, 20.0, 0.0, 9),
    ("B", False, "submitted", 5, 5.0, 45.0, 0.0, 9),
    ("C", False, "submitted", 5, 5.0, 15.0, 0.0, 9),
]
COLUMNS = [
    "task_id",
    "resolved",
    "outcome",
    "agent_calls",
    "agent_latency_s",
    "wall_s",
    "summary_latency_s",
    "compressions",
]


def cell(rows, policy, setting, track, cohort="main"):
    table = pd.DataFrame(rows, columns=COLUMNS)
    primitive, *rest = policy.split("/")
    return table.assign(
        benchmark="b",
        model="m",
        policy=policy,
        cell=policy.replace("/", "_") + (f"__{setting}" if setting else ""),
        setting=setting,
        track=track,
        cohort=cohort,
        primitive=primitive,
        trigger=rest[0] if rest else None,
        depth=float(rest[1]) if len(rest) > 1 else None,
        summarizer=None,
        attempt=1,
        n_prompt_counts=5,
        outcome_class=["success" if r else "other" for r in table["resolved"]],
        total_tokens=table["agent_calls"] * 100,
        billed_est=table["agent_calls"] * 10.0,
        billed_exact=table["agent_calls"] * 10.0,
        billed_measured=float("nan"),
        retrieval_cmds=1,
        execution_cmds=1,
    )


RUNS = pd.concat(
    [
        cell(FC, "FC", None, "calibration"),
        cell(SU, "SU/Th/0.5", "primary", "full"),
        cell(TR, "TR/Th/0.5", "primary", "full"),
        cell(TR_03, "TR/Th/0.3", "primary", "sweep", "sweep"),
        cell(TR_07, "TR/Th/0.7", "primary", "sweep", "sweep"),
    ],
    ignore_index=True,
)


def by_policy(table):
    return table.set_index("policy")


def test_calls_and_per_call_latency_relative_to_fc_on_shared_solved_tasks():
    table = by_policy(quoted.calls_latency(RUNS, model="m", benchmark="b", track="full", n_boot=50))
    # one attempt each (1 of 1 solves): FC solves A, B; SU solves A, C: only A, successful runs.
    # SU: calls 12 against 10; per call 3 s against 2 s.
    assert table.loc["SU/Th/0.5", "calls_ratio_est"] == pytest.approx(12 / 10)
    assert table.loc["SU/Th/0.5", "per_call_latency_ratio_est"] == pytest.approx(3 / 2)
    assert table.loc["SU/Th/0.5", "calls_ratio_n_tasks"] == 1
    # TR solves A, B: calls (10 + 20) / 2 against (10 + 20) / 2; per call (1 + 2) / 2 against (2 + 1) / 2
    assert table.loc["TR/Th/0.5", "calls_ratio_est"] == pytest.approx(1.0)
    assert table.loc["TR/Th/0.5", "per_call_latency_ratio_est"] == pytest.approx(1.0)
    assert set(table.index) == {"SU/Th/0.5", "TR/Th/0.5"}  # track full: no sweep cells


def test_summary_share_on_shared_solved_tasks_of_summary_primitives_only():
    table = by_policy(quoted.summary_share(RUNS, model="m", benchmark="b"))
    assert list(table.index) == ["SU/Th/0.5"]  # TR writes no summary
    # shared solved: A only; 10 s of summaries over 50 s (no agent_time_s column: wall_s stands in)
    assert table.loc["SU/Th/0.5", "summary_share"] == pytest.approx(10 / 50)
    assert table.loc["SU/Th/0.5", "solved_runs"] == 1


def test_compressions_per_run_on_tasks_both_fc_and_the_policy_solve():
    table = by_policy(quoted.compressions_shared(RUNS, model="m", benchmark="b", track="full"))
    # SU solves A, C; FC solves A, B: only A, 3 compressions. TR solves A, B: (2 + 6) / 2.
    assert table.loc["SU/Th/0.5", "compressions_per_run"] == 3.0
    assert table.loc["SU/Th/0.5", "shared_solved_tasks"] == 1
    assert table.loc["TR/Th/0.5", "compressions_per_run"] == 4.0


@pytest.fixture(scope="module")
def runs_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("quoted") / "runs.parquet"
    RUNS.to_parquet(path, index=False)
    return path


def run_cli(capsys, *argv):
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_views_print_as_text_json_and_csv(runs_path, capsys):
    code, out, _ = run_cli(capsys, "--runs", str(runs_path), "--view", "summary-share")
    assert code == 0 and "SU/Th/0.5" in out and "20.0%" in out
    code, out, _ = run_cli(capsys, "--runs", str(runs_path), "--view", "calls", "--json", "--resamples", "50")
    records = {r["policy"]: r for r in json.loads(out)}
    assert code == 0 and records["SU/Th/0.5"]["calls_ratio_est"] == pytest.approx(1.2)
    code, out, _ = run_cli(capsys, "--runs", str(runs_path), "--view", "compressions", "--csv")
    rows = {r["policy"]: r for r in csv.DictReader(io.StringIO(out))}
    assert code == 0 and float(rows["TR/Th/0.5"]["compressions_per_run"]) == 4.0
    code, _, err = run_cli(capsys, "--runs", str(runs_path), "--view", "nope")
    assert code == 2 and "--view" in err and "depth-wins" in err


def test_sweep_track_includes_the_shared_primary_cell_and_prints_depth_wins(runs_path, capsys):
    code, out, _ = run_cli(capsys, "--runs", str(runs_path), "--track", "sweep", "--resamples", "50")
    assert code == 0
    policies = {line.split()[0] for line in out.splitlines() if line.startswith("TR/") or line.startswith("SU/")}
    assert policies == {"TR/Th/0.3", "TR/Th/0.5", "TR/Th/0.7"}  # the shared D = 0.5 cell, SU not swept
    # one combination (TR at primary): resolve 3/3 at 0.3; cost 50 at 0.7; latency 80/3 s at 0.5 and 0.7
    assert "depth wins over 1 depth-tunable primitive × threshold combinations" in out
    assert "highest resolve rate: D = 0.3 in 1, D = 0.5 in 0, D = 0.7 in 0" in out
    assert "lowest cost: D = 0.3 in 0, D = 0.5 in 0, D = 0.7 in 1" in out
    assert "lowest latency: D = 0.3 in 0, D = 0.5 in 1, D = 0.7 in 1" in out
    code, out, _ = run_cli(capsys, "--runs", str(runs_path), "--view", "depth-wins", "--json")
    assert code == 0 and [r["best_latency"] for r in json.loads(out)] == [0, 1, 1]
