"""Range checks on every figure target's ``{stem}.data.csv``, on the paper-shaped data set and
on the three edge data sets of the figure fixture (each figure module's compute on the edge
tables): rates and break-even discounts in [0, 1]; resolve differences within ±1 (fractions) or
±100 (percentage points, ``diff_pp``); counts of attempts or tasks at most tasks × attempts; ratios finite and
> 0 wherever a value is given (a missing ratio only where no task was shared); outcome shares
summing to 100 % per bar. Pure checks of the frames: nothing here imports the pipeline."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ctxpolicy.cohort_file import read_cohort

REPO = Path(__file__).resolve().parents[2]
EDGE_CONFIG = REPO / "tests" / "fixtures" / "figures" / "config.yaml"
EDGES = ("empty", "fc_time_limited", "one_task_one_attempt")

RATE = re.compile(
    r"^(resolve_rate|baseline_resolve_rate|share|resolve_rate_(est|lo|hi)"
    r"|summary_share|share_above_\w+|break_even_[\w-]+"
    r"|(anchor_retention|anchor_verbatim|constraint_retention|reacq_of_lost_share)(_lo|_hi)?)$"
)
DIFFERENCE = re.compile(r"^resolve_delta_(est|lo|hi)$")
POINTS = re.compile(r"^diff_pp(_lo|_hi)?$")
# a ratio's name may hold a cost method's hyphen or a discount's point (cost_ratio_at_0.25_est)
RATIO = re.compile(
    r"^(\w+_ratio(_[\w.-]+)?_(est|lo|hi)|cost_ratio_all|\w+_(actual|mechanical|behavioural)_(est|lo|hi))$"
)
CHANGE = re.compile(r"^calls_change_(est|lo|hi)$")  # a ratio minus one
TOKENS = re.compile(r"^(\w+_tokens|cached_(est|exact))$")  # per-call token counts (Figure 6)
COUNT = re.compile(
    r"^(solved|baseline_solved|gains|losses|n|n_attempts|planned|n_tasks|[\w.-]+_n_tasks|gains_losses_tasks"
    r"|solved_runs|shared_solved_tasks)$"
)
# non-negative finite amounts: billed input by each cost method, compressions per run, seconds
AMOUNT = re.compile(r"^(estimated|exact|measured|compressions_per_run|summary_s|wall_s|agent_time_s)$")


def bound(config_path: Path) -> int:
    """Tasks × attempts: the most attempts any count may hold (the largest cut cohort)."""
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    most = 0
    for bench in config["benchmarks"].values():
        for cohort, path in bench["cohorts"].items():
            limit = (bench.get("cohort_limit") or {}).get(cohort)
            n = len(read_cohort(path))
            most = max(most, min(n, limit) if limit else n)
    return most * int(config.get("attempts", 1))


def check_ranges(stem: str, frame: pd.DataFrame, most: int) -> int:
    """Every ranged column of one frame; returns how many values were checked."""
    checked = 0
    for column in frame.columns:
        values = pd.to_numeric(frame[column], errors="coerce")
        present = values[values.notna()]
        what = f"{stem}.data.csv column {column}"
        if RATE.match(column):
            bad = present[(present < -1e-12) | (present > 1 + 1e-12)]
            assert bad.empty, f"{what}: rates outside [0, 1]: {sorted(bad)[:5]}"
        elif DIFFERENCE.match(column):
            bad = present[present.abs() > 1 + 1e-12]
            assert bad.empty, f"{what}: differences outside ±1: {sorted(bad)[:5]}"
        elif POINTS.match(column):
            bad = present[present.abs() > 100 + 1e-9]
            assert bad.empty, f"{what}: differences outside ±100 pp: {sorted(bad)[:5]}"
        elif RATIO.match(column):
            bad = present[~present.map(math.isfinite) | (present <= 0)]
            assert bad.empty, f"{what}: ratios not finite and > 0: {sorted(bad)[:5]}"
            base = re.sub(r"_(est|lo|hi)$", "", column)
            if f"{base}_n_tasks" in frame.columns and column.endswith("_est"):
                shared = pd.to_numeric(frame[f"{base}_n_tasks"], errors="coerce").fillna(0)
                unexplained = values.isna() & (shared > 0)
                assert not unexplained.any(), f"{what}: no ratio although {base}_n_tasks > 0"
        elif CHANGE.match(column):
            bad = present[~present.map(math.isfinite) | (present <= -1)]
            assert bad.empty, f"{what}: changes not finite and > -100 %: {sorted(bad)[:5]}"
        elif TOKENS.match(column):
            bad = present[present < 0]
            assert bad.empty, f"{what}: negative token counts: {sorted(bad)[:5]}"
            if column.startswith("cached_") and "prompt_tokens" in frame.columns:
                prompt = pd.to_numeric(frame["prompt_tokens"], errors="coerce")
                over = values.notna() & (values > prompt)
                assert not over.any(), f"{what}: more cached than prompt tokens in {int(over.sum())} call(s)"
        elif AMOUNT.match(column):
            bad = present[~present.map(math.isfinite) | (present < 0)]
            assert bad.empty, f"{what}: amounts not finite and >= 0: {sorted(bad)[:5]}"
        elif COUNT.match(column):
            bad = present[(present < 0) | (present > most) | (present != present.round())]
            assert bad.empty, f"{what}: counts outside 0..{most} (tasks × attempts): {sorted(bad)[:5]}"
        else:
            continue
        checked += len(present)
    if {"benchmark", "model", "policy", "share"} <= set(frame.columns):  # Figure 20's bars
        sums = frame.groupby(["benchmark", "model", "policy"])["share"].sum()
        off = sums[(sums - 1).abs() > 1e-9]
        assert off.empty, f"{stem}: outcome shares not summing to 100 % per bar: {off.to_dict()}"
    return checked


# The imported corpus's figures (imported_replay, imported_sweep, imported_cost_sensitivity) are
# drawn from a corpus, not from the paper-shaped data set: tests/test_workflow_imported.py runs
# check_ranges on their .data.csv.
FIGURES = (
    "fig2 fig3 fig4 fig5 fig6 fig9 fig10 fig11 fig12 fig13 fig14 fig15 fig16 fig17 fig18 fig19 fig20 fig21 "
    "reacquisition retention cost_sensitivity cost_decomposition cost_methods quoted_calls quoted_summary_share "
    "quoted_shared_tokens quoted_compressions peak_context"
).split()


@pytest.mark.parametrize("stem", FIGURES)
def test_ranges_at_scale(paper_frames, paper_tables, stem):
    _tables, config_path = paper_tables
    frame = paper_frames[stem]
    checked = check_ranges(stem, frame, bound(Path(config_path)))
    assert checked or list(frame.columns) == ["note"], f"{stem}: no ranged column among {list(frame.columns)}"


@pytest.mark.parametrize("edge", EDGES)
def test_ranges_on_the_edge_sets(edge_frames, edge):
    assert set(edge_frames[edge]) == set(FIGURES)
    for stem, frame in edge_frames[edge].items():
        check_ranges(f"{edge}/{stem}", frame, bound(EDGE_CONFIG))


def test_the_range_checks_catch_impossible_numbers():
    """A frame with a 165 % resolve rate, a zero ratio and shares summing to 90 % fails."""
    for frame in (
        pd.DataFrame({"resolve_rate": [1.65]}),
        pd.DataFrame({"tokens_ratio_est": [0.0], "tokens_ratio_n_tasks": [3]}),
        pd.DataFrame({"resolve_delta_est": [-1.2]}),
        pd.DataFrame({"n_attempts": [45]}),
        pd.DataFrame({"benchmark": ["b", "b"], "model": ["m", "m"], "policy": ["P", "P"], "share": [0.5, 0.4]}),
    ):
        with pytest.raises(AssertionError):
            check_ranges("made-up", frame, 18)
