"""The cost-methods figure's numbers: each method's mean billed input per run and policy, the
reference (measured only where every run has it), the gaps and the disagreement notes."""

from __future__ import annotations

import math

import pytest

from ctxpolicy.figures import cost_methods
from figure_helpers import read_fixture
from ctxpolicy.testing.studies import study_of


@pytest.fixture(scope="module")
def fixture():
    runs, config, _ = read_fixture()
    return runs, config


def test_means_per_policy_and_the_measured_reference(fixture):
    runs, config = fixture
    runs = runs.copy()
    runs["billed_measured"] = runs["billed_exact"].astype(float)  # the server agrees with the simulation
    data = cost_methods.compute(runs, study_of(config))
    fc = data.table[data.table["policy"] == "FC"].iloc[0]
    own = runs[(runs["policy"] == "FC") & (runs["benchmark"] == fc["benchmark"]) & (runs["model"] == fc["model"])]
    assert fc["n_runs"] == len(own)
    assert fc["estimated"] == pytest.approx(own["billed_est"].mean())
    assert fc["reference"] == "measured" and fc["exact_gap"] == pytest.approx(0.0)
    assert not data.table.loc[data.table["exact_gap"].abs() > 0.1].shape[0]


def test_a_bill_far_from_the_measured_one_is_said(fixture):
    runs, config = fixture
    runs = runs.copy()
    runs["billed_measured"] = runs["billed_exact"].astype(float) * 2.0
    data = cost_methods.compute(runs, study_of(config))
    assert data.table["disagrees"].all()
    assert data.table["exact_gap"].tolist() == pytest.approx([-0.5] * len(data.table))
    assert any("more than 10% from the measured bill" in n for n in data.notes)


def test_measured_counts_only_when_every_run_has_it(fixture):
    runs, config = fixture
    runs = runs.copy()
    runs["billed_measured"] = runs["billed_exact"].astype(float)
    first = runs[runs["policy"] == "FC"].iloc[0]
    runs.loc[runs.index[runs["policy"] == "FC"][0], "billed_measured"] = float("nan")
    table = cost_methods.compute(runs, study_of(config)).table
    fc = table[(table["policy"] == "FC") & (table["model"] == first["model"])]
    fc = fc[fc["benchmark"] == first["benchmark"]].iloc[0]
    assert math.isnan(fc["measured"]) and fc["reference"] == "exact"
