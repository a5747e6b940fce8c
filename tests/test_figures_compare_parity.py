"""A number in a figure and the same number printed by `ctxpolicy compare` are equal: Figures 2
and 4 write their data files through the real save path (``output.save_figure``, without the
pictures), cost_sensitivity its data file as that path writes it (``output.data_csv``), and
`ctxpolicy compare --json` (``--view cost-models`` for cost_sensitivity) on the same runs table
prints the same values, row by row and key by key."""

from __future__ import annotations

import functools
import io
import json
import math
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ctxpolicy.figures import cost_sensitivity, coverage, inputs, output, tradeoffs  # noqa: E402

FIXTURE = "tests/fixtures/figures"
BOOT = 200
ROW_KEY = ["benchmark", "model", "policy", "setting"]
FIG2_KEYS = (
    "n_tasks",
    "resolve_rate",
    "baseline_resolve_rate",
    "resolve_delta",
    "tokens_ratio",
    "latency_ratio",
    "cost_ratio",
)
FIG4_KEYS = ("solved", "baseline_solved", "gains", "losses", "left_out_tasks")


@pytest.fixture(scope="module")
def fixture():
    return inputs.read_runs(f"{FIXTURE}/tables"), inputs.read_study(f"{FIXTURE}/config.yaml")


@functools.cache  # Figures 2 and 4 read the same printout (callers do not change it)
def compare_json(*args: str) -> pd.DataFrame:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ctxpolicy",
            "compare",
            "--runs",
            f"{FIXTURE}/tables/runs.parquet",
            "--json",
            "--resamples",
            str(BOOT),
            "--seed",
            "0",
            "--attempts",
            "1",
            *args,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = json.loads(done.stdout)
    flat = []
    for row in rows:
        out = {}
        for key, value in row.items():
            if isinstance(value, dict):
                out.update({f"{key}_{part}": v for part, v in value.items()})
            else:
                out[key] = value
        flat.append(out)
    return pd.DataFrame(flat)


def figure_data(tmp_path, stem, fig, numbers) -> pd.DataFrame:
    # the data file alone: the pictures save_figure writes are not what is compared here
    output.save_figure(fig, tmp_path, stem, numbers, formats=())
    return pd.read_csv(tmp_path / f"{stem}.data.csv")


def same(a, b) -> bool:
    if pd.isna(a) and pd.isna(b):
        return True
    return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)


def columns_of(keys, frame) -> list[str]:
    wanted = []
    for key in keys:
        parts = [c for c in frame.columns if c == key or c in {f"{key}_{p}" for p in ("est", "lo", "hi", "n_tasks")}]
        assert parts, f"{key} missing from the figure's data file"
        wanted += parts
    return wanted


def rows_by_key(frame: pd.DataFrame) -> dict:
    frame = frame.assign(setting=frame["setting"].where(frame["setting"].notna(), None))
    return {tuple(None if pd.isna(v) else str(v) for v in row[ROW_KEY]): row for _, row in frame.iterrows()}


def assert_equal_numbers(figure: pd.DataFrame, printed: pd.DataFrame, keys) -> int:
    printed_rows = rows_by_key(printed)
    checked = 0
    for key, row in rows_by_key(figure).items():
        assert key in printed_rows, f"{key} is drawn but `ctxpolicy compare` does not print it"
        for column in columns_of(keys, figure):
            assert same(row[column], printed_rows[key][column]), (key, column, row[column], printed_rows[key][column])
            checked += 1
    return checked


def test_compare_json_matches_figure_2_number_for_number(fixture, tmp_path):
    runs, config = fixture
    prepared = tradeoffs.compute(runs, config, n_boot=BOOT, seed=0)
    drawn = figure_data(tmp_path, "fig2", tradeoffs.plot(prepared), prepared.numbers())
    assert len(drawn) >= 10
    assert assert_equal_numbers(drawn, compare_json(), FIG2_KEYS) >= 10 * len(FIG2_KEYS)


def test_compare_json_matches_figure_4_number_for_number(fixture, tmp_path):
    runs, config = fixture
    prepared = coverage.compute(runs, config)
    drawn = figure_data(tmp_path, "fig4", coverage.plot(prepared), prepared.numbers())
    assert len(drawn) >= 10
    assert assert_equal_numbers(drawn, compare_json(), FIG4_KEYS) >= 10 * len(FIG4_KEYS)


def test_compare_view_cost_models_matches_cost_sensitivity_number_for_number(fixture):
    from ctxpolicy.metrics import cost_methods
    from ctxpolicy.metrics.sensitivity import DISCOUNTS, discount_ratio

    runs, config = fixture
    prepared = cost_sensitivity.compute(runs, config, n_boot=BOOT, seed=0, pairs=[("tiny", "local")])
    drawn = pd.read_csv(io.StringIO(output.data_csv(prepared.numbers(), prepared.notes)))  # save_figure's data file
    printed = compare_json("--view", "cost-models", "--model", "tiny", "--benchmark", "local")
    keys = [f"cost_ratio_{n}" for n in cost_methods.names()] + [discount_ratio(d) for d in DISCOUNTS]
    keys += [f"break_even_{n}" for n in cost_methods.names()]
    assert len(drawn) >= 5 and drawn["break_even_estimated"].notna().any()
    assert assert_equal_numbers(drawn, printed, keys) >= len(drawn) * len(keys)
