"""Threshold calibration from full-context (FC) runs, and the study's preset thresholds.

Each complete FC run contributes its peak context: the largest server-reported prompt of its
agent calls. The tight, primary and loose thresholds are the 5th, 15th and 25th percentiles of
those peaks (numpy's default linear interpolation), rounded to the nearest ``round_to`` tokens
(halves round up). The study used 1,000; small embedded models need a finer unit (e.g. 100).

The study (A.4) takes the peak of *every* uncompressed trajectory, time-limited ones included:
that is the default (``calibrated_from: "every FC run"``). A config may instead leave out the
time-limited runs (``grid.calibration.exclude_time_limited``; the local study does, on a slow
machine a run's peak is where the clock stopped it): time-limited is the runs table's one
definition (``metrics.outcomes.is_time_limited``: the agent's time limit or the harness's
timeout). When *every* FC run is time-limited, the thresholds are still derived, from all of
them, so that the study goes on, and the file says so in ``warnings`` (``ctxpolicy calibrate``
also prints it, and the local study's end summary repeats it). The file records the rule in
``calibrated_from`` and ``time_limited_runs``. ``sweep_warnings`` adds a warning where settings
coincide, or no FC peak exceeds one: a sweep that does not sweep.
"""

from __future__ import annotations

import numpy as np

from ctxpolicy.threshold_settings import order_problem

PERCENTILES = {"tight": 5, "primary": 15, "loose": 25}
DEFAULT_ROUND = 1000
EVERY_RUN = "every FC run"  # A.4: the peak of every FC trajectory
WITHIN_LIMIT = "runs within the time limit"  # grid.calibration.exclude_time_limited

# The study's own thresholds (tokens), keyed like config/paper.yaml: benchmark -> model.
PRESET_THRESHOLDS: dict[str, dict[str, dict]] = {
    "swebench": {
        "qwen": {"source": "preset", "tight": 10000, "primary": 15000, "loose": 20000},
        "devstral": {"source": "preset", "tight": 17000, "primary": 21000, "loose": 24000},
        "glm": {"source": "preset", "tight": 10000, "primary": 13000, "loose": 15000},
    },
    "terminalbench": {
        "qwen": {"source": "preset", "tight": 2000, "primary": 3000, "loose": 4000},
        "devstral": {"source": "preset", "tight": 3000, "primary": 4000, "loose": 7000},
        "glm": {"source": "preset", "primary": 3000},  # the study set no tight or loose here
    },
}


def round_nearest(value: float, unit: int) -> int:
    return int(np.floor(value / unit + 0.5) * unit)


def thresholds_from_peaks(peaks: list[int] | np.ndarray, round_to: int = DEFAULT_ROUND) -> dict:
    """The thresholds-file content (docs/architecture.md) for a list of FC peak contexts."""
    values = np.asarray(peaks, dtype=float)
    if values.size == 0:
        raise ValueError("no FC peaks to calibrate from")
    if round_to < 1:
        raise ValueError(f"round_to must be >= 1, got {round_to}")
    raw = {name: float(np.percentile(values, q)) for name, q in PERCENTILES.items()}
    result = {"source": "calibrated"}
    for name, value in raw.items():
        rounded = round_nearest(value, round_to)
        if rounded <= 0:
            raise ValueError(
                f"{name} threshold {value:.0f} rounds to {rounded} at round_to={round_to}; use a smaller rounding unit"
            )
        result[name] = rounded
    result["percentiles"] = {str(PERCENTILES[name]): value for name, value in raw.items()}
    result["round_to"] = round_to
    result["n_runs"] = int(values.size)
    result["peaks"] = sorted(int(v) for v in values)
    return result


def preset_thresholds(source: dict | None, benchmark: str, model: str) -> dict:
    """The thresholds-file content for a preset (the config's ``thresholds.B.M``, ``source``:
    ``{source: preset, ...}``): the same layout as a calibrated file, so that cells read one kind
    of file whatever the source; settings the preset leaves out are null. Raises ValueError
    naming the key when it is no preset or its settings are not tight < primary < loose."""
    if not isinstance(source, dict) or source.get("source") != "preset":
        raise ValueError(
            f"thresholds.{benchmark}.{model}: {source!r} is not a preset "
            "({source: preset, tight: N, primary: N, loose: N})"
        )
    problem = order_problem(source)
    if problem:
        raise ValueError(f"thresholds.{benchmark}.{model}: {problem}")
    return {"source": "preset", **{name: source.get(name) for name in PERCENTILES}, "percentiles": {}, "peaks": []}


def select_peaks(runs: list[tuple[bool, int | None]], *, exclude_time_limited: bool = False) -> tuple[list[int], dict]:
    """The peaks to calibrate from, given (time_limited, peak) per FC run, and what the file
    records about the choice: ``calibrated_from`` (the rule), ``time_limited_runs`` (how many
    of the runs with a peak were time-limited) and ``warnings``. By default (A.4) every peak
    counts; ``exclude_time_limited`` leaves the time-limited runs out unless that is all of them."""
    with_peak = [(bool(limited), peak) for limited, peak in runs if peak is not None]
    finished = [peak for limited, peak in with_peak if not limited]
    limited = len(with_peak) - len(finished)
    if not exclude_time_limited:
        return [peak for _, peak in with_peak], {
            "time_limited_runs": limited,
            "calibrated_from": EVERY_RUN,
            "warnings": [],
        }
    if finished or not with_peak:
        return finished, {"time_limited_runs": limited, "calibrated_from": WITHIN_LIMIT, "warnings": []}
    warning = (
        f"all {limited} FC runs hit the time limit: thresholds calibrated from the peaks of "
        "time-limited runs (where the clock stopped them), and no FC run is eligible for resource "
        "ratios; raise limits.wall_time_limit_s or run on a less busy machine"
    )
    return [peak for _, peak in with_peak], {
        "time_limited_runs": limited,
        "calibrated_from": "time-limited runs (none finished)",
        "warnings": [warning],
    }


def sweep_warnings(thresholds: dict) -> list[str]:
    """What keeps a thresholds file from sweeping: settings that coincide (equal token counts) and
    settings at or above every FC peak (they would never fire on an FC-like run). Empty when the
    settings it has are distinct and each lies below at least one recorded peak. ``thresholds`` is
    a thresholds file's content; peaks are checked only where the file records them."""
    values = {name: thresholds.get(name) for name in PERCENTILES if thresholds.get(name) is not None}
    said = []
    by_value: dict[int, list[str]] = {}
    for name, value in values.items():
        by_value.setdefault(int(value), []).append(name)
    for value, names in by_value.items():
        if len(names) > 1:
            said.append(
                f"calibration cannot separate the settings: {' = '.join(names)} = {value} tokens, so the "
                "sweep compares equal thresholds there"
            )
    peaks = [int(p) for p in thresholds.get("peaks") or []]
    if peaks:
        top = max(peaks)
        never = [name for name, value in values.items() if value >= top]
        if never:
            said.append(
                f"{', '.join(never)} at or above every FC peak (largest {top} tokens): it would never fire on an FC-like run"
            )
    return said
