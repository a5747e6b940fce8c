"""Per-run sums over several runs' calls laid end to end: the one segmented sum the reader's
batches (``metrics.chunk``), the bills (``metrics.cost``) and the cost methods share, kept apart
from all of them so that none imports another for it."""

from __future__ import annotations

import numpy as np


def run_sums(values: np.ndarray, runs: np.ndarray) -> np.ndarray:
    """Per run, the sum of its calls' integer (or boolean) ``values``: several runs' calls laid
    end to end, ``runs[r]`` calls each (0 for a run of none)."""
    total = np.concatenate((np.zeros(1, np.int64), np.cumsum(values, dtype=np.int64)))
    ends = np.cumsum(runs)
    return total[ends] - total[ends - runs]
