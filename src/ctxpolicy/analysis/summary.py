"""Per-policy statistics of the audit table, with task-bootstrap intervals.

Every rate is a ratio of sums over a policy's events (e.g. anchors lost / anchors at risk),
computed per task first and resampled by task (``ctxpolicy.metrics.bootstrap``), so a task
with many events weighs by its events, and all events of a task travel together.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ctxpolicy.metrics.bootstrap import boot_ratio, percentile_interval, resample_counts

GROUP = ("benchmark", "model", "policy", "primitive", "depth", "threshold_setting")
# name -> (numerator columns, denominator columns); an empty denominator counts events
RATES = {
    "anchor_retention": (("anchors_kept", "anchors_summarised"), ("anchors_at_risk",)),
    "anchor_verbatim": (("anchors_kept",), ("anchors_at_risk",)),
    "constraint_retention": (("constraints_kept", "constraints_preserved"), ("constraints_at_risk",)),
    "reacq_per_event": (("reacq_commands",), ()),
    "lost_per_event": (("anchors_lost",), ()),
    "reacq_of_lost_share": (("reacq_of_lost",), ("reacq_commands",)),
}


def _per_task(events: pd.DataFrame) -> pd.DataFrame:
    columns = sorted({c for num, den in RATES.values() for c in (*num, *den)})
    # the task id and the rates' columns alone (not every column of the audit table), summed per
    # task: agg(n_events=("task_id", "size"), c=(c, "sum"), ...) without its per-column path
    table = pd.DataFrame({c: pd.to_numeric(events[c], errors="coerce").fillna(0) for c in columns})
    grouped = table.groupby(events["task_id"], sort=True)
    per_task = grouped.sum()
    per_task.insert(0, "n_events", grouped.size())
    return per_task


def rate_with_interval(
    per_task: pd.DataFrame, numerator: tuple[str, ...], denominator: tuple[str, ...], *, n_boot: int, seed: int
) -> tuple[float, float, float]:
    num = _row_sums(per_task, numerator)
    den = _row_sums(per_task, denominator) if denominator else per_task["n_events"].to_numpy(float)
    total = den.sum()
    point = float(num.sum() / total) if total > 0 else float("nan")
    counts = resample_counts(len(per_task), n_boot, seed)
    lo, hi = percentile_interval(boot_ratio(counts, num, den, den > 0))
    return point, lo, hi


def _row_sums(per_task: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """``per_task[list(columns)].sum(axis=1)`` as floats, the columns added one by one."""
    total = per_task[columns[0]].to_numpy(float)
    for column in columns[1:]:
        total = total + per_task[column].to_numpy(float)
    return total


def by_policy(
    events: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0, group: tuple[str, ...] = GROUP
) -> pd.DataFrame:
    """One row per policy (and ``group``): event and task counts, each rate with lo/hi."""
    rows = []
    if events.empty:
        return pd.DataFrame(
            columns=[*group, "n_events", "n_tasks", *(f"{r}{s}" for r in RATES for s in ("", "_lo", "_hi"))]
        )
    keyed = events.assign(**{g: events[g].astype("object").where(events[g].notna(), "none") for g in group})
    for key, part in keyed.groupby(list(group), sort=True, dropna=False):
        per_task = _per_task(part)
        row = dict(zip(group, key))
        row.update(n_events=len(part), n_tasks=len(per_task))
        for name, (num, den) in RATES.items():
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = rate_with_interval(
                per_task, num, den, n_boot=n_boot, seed=seed
            )
        reached = pd.to_numeric(part["steps_to_reacq"], errors="coerce").dropna()
        row["median_steps_to_reacq"] = float(reached.median()) if len(reached) else float("nan")
        row["events_with_reacq"] = int(len(reached))
        rows.append(row)
    return pd.DataFrame(rows)


def lost_vs_reacquired(events: pd.DataFrame) -> float:
    """Spearman correlation, over events, of anchors lost and reacquisition commands (NaN if flat)."""
    if len(events) < 3:
        return float("nan")
    lost = pd.to_numeric(events["anchors_lost"], errors="coerce")
    reacq = pd.to_numeric(events["reacq_commands"], errors="coerce")
    if lost.nunique() < 2 or reacq.nunique() < 2:
        return float("nan")
    return float(lost.corr(reacq, method="spearman"))
