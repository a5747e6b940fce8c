"""The independent count's own rules on hand-worked cases, so that an agreement with the
pipeline means something: A.5.2's cache reconstruction, A.5's ratio of task means, the
solved-task rule and the interval band."""

from __future__ import annotations

import math

import numpy as np
import pytest

from independent.records import cached_estimate
from independent.study import check_interval, quantile_band, ratio_of_means, solved_min

OTRC_STEP = [{"primitive": "OTRC", "unchanged_prefix_tokens": 3000, "total_tokens_before": 6000}]


def test_cache_reconstruction_by_hand():
    # call 1 nothing; 2 growth: all of call 1 (1000 -> 992 in 16-token blocks); 3 growth: 1500
    # -> 1488; 4 a large drop (>= max(1000, 0.25*2000)): the stable prefix, min(1000, 900) -> 896;
    # 5 an OTRC step: the previous prompt up to the cleared message, 3000/6000 of 900 = 450 -> 448;
    # 6 a small unexplained drop: the stable prefix, min(1000, 860) -> 848.
    prompts = [1000, 1500, 2000, 900, 1200, 860]
    steps = [[], [], [], [], OTRC_STEP, []]
    assert cached_estimate(prompts, steps) == [0, 992, 1488, 896, 448, 848]


def test_an_otrc_step_without_its_position_keeps_the_stable_prefix():
    steps = [[], [{"primitive": "OTRC", "unchanged_prefix_tokens": None, "total_tokens_before": 10}]]
    assert cached_estimate([1000, 1100], steps) == [0, 992]


def test_ratio_of_task_means_uses_only_tasks_measured_on_both_sides():
    est, n, boot = ratio_of_means({"a": 2.0, "b": 4.0, "c": 100.0}, {"a": 1.0, "b": 2.0}, ["a", "b", "c"])
    assert (est, n) == (2.0, 2)
    assert np.allclose(boot, 2.0)  # every resample of tasks a, b has the ratio 2
    assert math.isnan(ratio_of_means({"a": 1.0}, {"b": 1.0}, ["a", "b"])[0])


def test_solved_is_two_of_three():
    assert [solved_min(a) for a in (1, 2, 3, 6)] == [1, 2, 2, 4]


def test_the_interval_band_rejects_a_wrong_end():
    boot = np.random.default_rng(0).normal(size=5000)
    low, high = quantile_band(boot, 0.025, 200)
    assert low < np.quantile(boot, 0.025) < high
    check_interval("ok", 0.0, np.quantile(boot, 0.025), np.quantile(boot, 0.975), boot, 200)
    with pytest.raises(AssertionError, match="outside"):
        check_interval("narrow", 0.0, -0.5, 0.5, boot, 200)  # a 38 % interval, not a 95 % one
    with pytest.raises(AssertionError, match="not finite"):
        check_interval("nan", 0.0, float("nan"), 1.0, boot, 200)
