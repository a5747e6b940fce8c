"""Seeded, vectorised task bootstrap.

Resampling n tasks with replacement B times is represented by a (B, n) matrix of counts: how
often each task was drawn in each resample. A mean over resampled tasks is then
``counts @ x / n`` and a ratio of means over the tasks with a measurement is
``(counts @ (a * m)) / (counts @ (b * m))`` (the shared count divides out). Every task keeps
all its runs for both sides, because the per-task values are computed before resampling.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ctxpolicy.metrics.pages import ordinary_pages

DEFAULT_RESAMPLES = 10_000
CONFIDENCE = 0.95


@lru_cache(maxsize=4)
def resample_counts(n_tasks: int, n_boot: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """(n_boot, n_tasks) counts of each task in each resample (float64, ready for matmul).

    Depends only on its arguments, so comparisons over the same number of tasks share one
    (read-only, cached) matrix."""
    # four arrays of n_boot x n_tasks: the study's comparisons took 2.1-2.3 s so, 2.5-3.2 s on huge pages
    with ordinary_pages():  # (metrics.pages)
        counts = _draw_counts(n_tasks, n_boot, seed)
    counts.flags.writeable = False
    return counts


def _draw_counts(n_tasks: int, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if n_tasks == 0:
        return np.zeros((n_boot, 0))
    draws = rng.integers(0, n_tasks, size=(n_boot, n_tasks), dtype=np.int64)
    flat = draws + (np.arange(n_boot, dtype=np.int64) * n_tasks)[:, None]
    return np.bincount(flat.ravel(), minlength=n_boot * n_tasks).reshape(n_boot, n_tasks).astype(np.float64)


def percentile_interval(samples: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile interval, ignoring resamples where the statistic is undefined (NaN)."""
    finite = samples[np.isfinite(samples)]
    if finite.size == 0:
        return float("nan"), float("nan")
    tail = 100 * (1 - confidence) / 2
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return float(lo), float(hi)


def boot_means(counts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Mean of per-task values in each resample."""
    n = counts.shape[1]
    return counts @ np.asarray(values, dtype=np.float64) / n if n else np.full(len(counts), np.nan)


def boot_ratio(counts: np.ndarray, numerator: np.ndarray, denominator: np.ndarray, included: np.ndarray) -> np.ndarray:
    """Ratio of means over included tasks in each resample (NaN when none was drawn)."""
    m = included.astype(np.float64)
    num = counts @ (np.nan_to_num(numerator) * m)
    den = counts @ (np.nan_to_num(denominator) * m)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / den, np.nan)
