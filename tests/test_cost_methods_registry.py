"""The cost-method registry: a method registered in one place appears everywhere methods are listed."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ctxpolicy.metrics import cli_cost, cost_methods
from ctxpolicy.metrics.aggregate import aggregate
from ctxpolicy.metrics.cost_methods.base import CostMethod, Counts
from ctxpolicy.testing.runs import make_runs


def _half(calls, block):  # a throwaway cache model: half of every prompt after the first
    cached = calls.prompts // 2
    cached[0] = 0
    return Counts(cached)


THROWAWAY = CostMethod(name="half-cache", key="half", label="half", description="half of each prompt", count=_half)


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("registry") / "runs"
    make_runs(root, tasks=2, attempts=1, calls_per_run=6, policies=("FC", "TR/Th/0.5"))
    return root


def test_a_registered_method_appears_in_cost_runs_and_the_aggregate_columns(runs_root, capsys):
    assert "half-cache" not in cost_methods.names()
    with cost_methods.registered(THROWAWAY):
        args = SimpleNamespace(block=16, discount=0.1, input=None, runs=[runs_root], json=True)
        assert cli_cost.main(args) == 0
        out = json.loads(capsys.readouterr().out)
        run = out["runs"][0]
        assert run["half-cache"] is not None and run["half-cache"] > 0
        tables = aggregate([runs_root], processes=1)
        assert {"billed_half", "fresh_half", "cached_half"} <= set(tables.runs.columns)
        assert "cached_half" in tables.calls.columns
        agent = tables.calls[tables.calls["kind"] == "agent"]
        first = agent.groupby("run_dir", observed=True)["cached_half"].first()
        assert (first == 0).all()
        row = tables.runs.iloc[0]
        assert row["cached_half"] + row["fresh_half"] == row["prompt_tokens"] - row["summary_input"]
        from ctxpolicy.figures import cost_methods as methods_figure
        from ctxpolicy.metrics.compare import ratio_columns

        assert ("half-cache", "billed_half") == methods_figure.methods()[-1][:2]
        assert ratio_columns()["cost_ratio_half-cache"] == "billed_half"
        _appears_in_cost_sensitivity(tables.runs)
        args.json = False
        assert cli_cost.main(args) == 0
        assert "half-cache" in capsys.readouterr().out.splitlines()[1].split()
    assert "half-cache" not in cost_methods.names()
    assert "billed_half" not in aggregate([runs_root], processes=1).runs.columns


def _appears_in_cost_sensitivity(runs) -> None:
    """The throwaway method's ratio and break-even in cost_sensitivity's numbers, drawn in its figure."""
    from ctxpolicy.figures import cost_sensitivity as figure
    from ctxpolicy.figures.prepared import Prepared
    from ctxpolicy.metrics.sensitivity import cost_sensitivity

    (benchmark, model), *_ = runs[["benchmark", "model"]].drop_duplicates().itertuples(index=False)
    table = cost_sensitivity(runs, model=model, benchmark=benchmark, n_boot=20, seed=0)
    assert table["cost_ratio_half-cache_est"].between(0, 10).all() and "break_even_half-cache" in table
    assert figure.methods()[-1][:2] == ("cost_ratio_half-cache", "half-cache")
    meta = {"combos": [(benchmark, model)], "setting": "primary", "cost_method": "estimated"}
    fig = figure.plot(Prepared(table, [], meta))
    assert "half-cache" in {t.get_text() for legend in fig.legends for t in legend.get_texts()}


def test_a_name_is_validated_once_and_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="allowed: estimated, exact, measured"):
        cost_methods.method("cheap")
    with pytest.raises(ValueError, match="already registered"):
        with cost_methods.registered(CostMethod("exact", "x", "x", "x", _half)):
            pass
    assert np.array_equal(_half(cost_methods.RunCalls(np.array([10, 20])), 16).cached, [0, 10])
