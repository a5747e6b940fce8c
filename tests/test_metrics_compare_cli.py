"""`ctxpolicy compare` on a hand-built runs table; every expected value worked out by hand."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest

from ctxpolicy.cli import main
from ctxpolicy.metrics.compare import compare_columns

# (task, attempt, resolved, outcome, total_tokens, agent_calls)
FC_RUNS = [
    ("A", 1, True, "submitted", 100, 10),
    ("A", 2, True, "submitted", 200, 20),
    ("A", 3, False, "time_limit", 999, 50),
    ("B", 1, False, "submitted", 300, 30),
    ("B", 2, False, "step_limit", 600, 30),
    ("B", 3, False, "submitted", 300, 30),
    ("C", 1, True, "submitted", 100, 10),
    ("C", 2, True, "submitted", 100, 10),
    ("C", 3, True, "submitted", 100, 10),
]
TR_RUNS = [
    ("A", 1, True, "submitted", 60, 30),
    ("A", 2, False, "submitted", 90, 40),
    ("A", 3, False, "error", 90, 40),
    ("B", 1, True, "time_limit", 10, 5),
    ("B", 2, True, "time_limit", 10, 5),
    ("B", 3, False, "time_limit", 10, 5),
    ("C", 1, True, "submitted", 40, 15),
    ("C", 2, True, "submitted", 60, 15),
    ("C", 3, True, "submitted", 50, 15),
]
SWEEP_RUNS = [(t, a, t == "C", "submitted", 50, 10) for t in "ABC" for a in (1, 2, 3)]


def cell(rows, policy, cell_name, setting, track, cohort="main"):
    table = pd.DataFrame(rows, columns=["task_id", "attempt", "resolved", "outcome", "total_tokens", "agent_calls"])
    return table.assign(
        benchmark="b",
        model="m",
        policy=policy,
        cell=cell_name,
        setting=setting,
        track=track,
        cohort=cohort,
        primitive=policy.split("/")[0],
        trigger=None,
        depth=None,
        summarizer=None,
        n_prompt_counts=5,
        outcome_class=np.where(table["resolved"], "success", "other"),
        wall_s=table["total_tokens"] / 10,
        billed_est=table["total_tokens"] * 3.0,
        billed_exact=table["total_tokens"] * 2.0,
        billed_measured=np.nan,
        retrieval_cmds=1,
        execution_cmds=1,
    )


@pytest.fixture
def runs_path(tmp_path):
    runs = pd.concat(
        [
            cell(FC_RUNS, "FC", "FC", None, "calibration"),
            cell(TR_RUNS, "TR/Th/0.5", "TR_Th_0.5__primary", "primary", "full"),
            cell(SWEEP_RUNS, "TR/Th/0.3", "TR_Th_0.3__tight", "tight", "sweep", "sweep"),
        ],
        ignore_index=True,
    )
    path = tmp_path / "runs.parquet"
    runs.to_parquet(path, index=False)
    return path


def compare(capsys, *args):
    try:
        code = main(["compare", *map(str, args), "--resamples", "300"])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_gives_the_keys_and_the_hand_worked_numbers(runs_path, capsys):
    code, out, err = compare(capsys, "--table", runs_path, "--json")
    assert code == 0 and err == ""
    (row,) = json.loads(out)  # default track full: the TR cell only
    assert list(row) == [
        "benchmark",
        "model",
        "policy",
        "setting",
        "summarizer",
        "n_tasks",
        "resolve_rate",
        "baseline_resolve_rate",
        "resolve_delta",
        "tokens_ratio",
        "latency_ratio",
        "cost_ratio",
        "solved",
        "baseline_solved",
        "gains",
        "losses",
        "calls_change",
        "left_out_tasks",
    ]
    assert (row["policy"], row["setting"], row["summarizer"]) == ("TR/Th/0.5", "primary", None)
    # success fractions over 3 attempts: TR A 1/3, B 2/3, C 1 -> 2/3; FC 2/3, 0, 1 -> 5/9
    assert (row["n_tasks"], row["resolve_rate"], row["baseline_resolve_rate"]) == pytest.approx((3, 2 / 3, 5 / 9))
    delta = row["resolve_delta"]
    assert set(delta) == {"est", "lo", "hi"} and delta["est"] == pytest.approx(1 / 9)
    assert -1 <= delta["lo"] <= delta["est"] <= delta["hi"] <= 1
    # tokens over eligible runs (time-limited left out) on tasks measured on both sides (A, C):
    # TR (80 + 50) / 2 = 65, FC (150 + 100) / 2 = 125 -> 0.52; cost (3 x tokens) the same
    assert row["tokens_ratio"]["est"] == pytest.approx(0.52) and row["tokens_ratio"]["n_tasks"] == 2
    assert row["cost_ratio"]["est"] == pytest.approx(0.52) and row["cost_ratio"]["method"] == "estimated"
    counts = [row[key] for key in ("solved", "baseline_solved", "gains", "losses", "left_out_tasks")]
    assert counts == [2, 2, 1, 1, 0]
    # calls on tasks both solve 2 of 3 (C): 15 / 10 - 1
    assert row["calls_change"] == {
        "est": pytest.approx(0.5),
        "lo": pytest.approx(0.5),
        "hi": pytest.approx(0.5),
        "n_tasks": 1,
    }


def test_csv_flattens_the_intervals(runs_path, capsys):
    code, out, _ = compare(capsys, "--table", runs_path, "--csv", "--cost-method", "exact")
    assert code == 0
    reader = csv.DictReader(io.StringIO(out))
    assert reader.fieldnames == compare_columns()
    assert "tokens_ratio_n_tasks" in reader.fieldnames and "resolve_delta_n_tasks" not in reader.fieldnames
    (row,) = list(reader)
    assert float(row["resolve_rate"]) == pytest.approx(2 / 3)
    assert float(row["resolve_delta_est"]) == pytest.approx(1 / 9)
    assert float(row["cost_ratio_est"]) == pytest.approx(0.52) and row["cost_ratio_method"] == "exact"
    assert (row["gains"], row["losses"], row["calls_change_n_tasks"]) == ("1", "1", "1")


def test_plain_output_is_an_aligned_table_in_percent(runs_path, capsys):
    code, out, _ = compare(capsys, "--table", runs_path)
    assert code == 0
    note, method, group, header, line = out.splitlines()
    assert "3 planned attempts" in note and "cost method: estimated" in method and "2 of 3" in note
    assert group == "# b / m"
    assert "66.7" in line and "55.6" in line and "11.1 [" in line and "0.52 [" in line
    assert header.index("resolve (%)") == line.index("66.7")


def test_the_default_text_view_fits_a_terminal_and_every_header_says_its_unit(runs_path, capsys):
    from ctxpolicy.metrics.compare_text import WIDTH

    code, out, _ = compare(capsys, "--table", runs_path)
    assert code == 0 and max(map(len, out.splitlines())) <= WIDTH
    header = out.splitlines()[3]
    for title in ("tasks", "resolve (%)", "FC resolve (%)", "Δ resolve (pp)", "tokens / FC", "cost / FC"):
        assert title in header
    assert "summarizer" not in header  # no cell of the table has one


def test_columns_chooses_the_rest_and_names_a_wrong_one(runs_path, capsys):
    code, out, _ = compare(capsys, "--table", runs_path, "--columns", "model,policy,gains,losses,latency")
    assert code == 0
    header, line = out.splitlines()[2:]  # model is a column: no group line
    assert header.split("  ")[0] == "model" and "gains (tasks)" in header and "latency / FC" in header
    assert line.split()[:4] == ["m", "TR/Th/0.5", "1", "1"]
    code, out, _ = compare(capsys, "--table", runs_path, "--columns", "all")
    headers = out.splitlines()[2]
    for title in ("benchmark", "calls Δ (%)", "FC solved (tasks)", "left out (tasks)"):
        assert title in headers
    code, out, err = compare(capsys, "--table", runs_path, "--columns", "policy,speed")
    assert code == 2 and out == "" and "unknown speed" in err and err.count("\n") == 1


def test_track_setting_and_attempts_select_what_is_compared(runs_path, capsys):
    code, out, _ = compare(capsys, "--table", runs_path, "--track", "sweep", "--json")
    (row,) = json.loads(out)
    # the sweep cell (cohort sweep) against FC: only C is solved, in every attempt
    assert (row["policy"], row["setting"], row["resolve_rate"]) == ("TR/Th/0.3", "tight", pytest.approx(1 / 3))
    code, out, err = compare(capsys, "--table", runs_path, "--track", "sweep", "--setting", "loose")
    assert code == 2 and "no sweep-track cells" in err and "'loose'" in err
    # four planned attempts: TR A 1/4, B 2/4, C 3/4 -> 1/2; solved needs 3 of 4, which no task has recorded
    code, out, _ = compare(capsys, "--table", runs_path, "--attempts", "4", "--json")
    (row,) = json.loads(out)
    assert row["resolve_rate"] == pytest.approx(1 / 2) and row["left_out_tasks"] == 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--table", "missing.parquet"], "missing.parquet: no such file"),
        (["--model", "x"], "no runs with model 'x'"),
        (["--benchmark", "x"], "no runs with benchmark 'x'"),
        (["--baseline", "SU/Th/0.5"], "no SU/Th/0.5 runs for model 'm' on benchmark 'b'"),
        (["--track", "all"], "--track is 'all'"),
        (["--cost-method", "cheap"], "--cost-method is 'cheap'"),
        (["--attempts", "x"], "invalid int value"),
        (["--attempts", "0"], "--attempts and --resamples must be >= 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(runs_path, capsys, args, message):
    if args[0] != "--table":
        args = ["--table", str(runs_path), *args]
    code, out, err = compare(capsys, *args)
    assert code == 2 and out == ""
    assert message in err and err.startswith("compare: ") and err.count("\n") == 1


def test_a_file_that_is_not_a_runs_table(tmp_path, capsys):
    path = tmp_path / "other.parquet"
    pd.DataFrame({"x": [1]}).to_parquet(path)
    code, _, err = compare(capsys, "--table", path)
    assert code == 2 and "not a runs table" in err and err.count("\n") == 1
    (tmp_path / "text.parquet").write_text("not parquet")
    code, _, err = compare(capsys, "--table", tmp_path / "text.parquet")
    assert code == 2 and "not a readable parquet table" in err
