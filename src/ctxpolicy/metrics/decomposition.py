"""The cost decomposition: a policy's saving split into its mechanical and its behavioural part.

For a policy cell and a resource (``DECOMPOSED``: billed input cost, tokens, calls), over the
tasks that have all four measurements:

  mechanical ratio  = mean_t replay(policy) / mean_t replay(FC)   (the FC trajectories replayed
                      through the policy and through FC, local counts, ``ctxpolicy replay``)
  actual ratio      = mean_t real(policy) / mean_t real(FC)       (the runs, as ``compare`` does)
  behavioural factor = actual / mechanical

A ratio is a ratio of means over tasks (each task's value the mean over its runs), like every
resource ratio of ``compare``; intervals are 95 % task-bootstrap percentiles, the three
statistics of one resample computed on the same drawn tasks. Both sides are priced by one method,
``cost_method`` (the config's ``metrics.cost_method``), so the behavioural factor compares like
with like; ``measured`` is refused (``MeasuredCostError``): a replay sends nothing to a server, so
it has no server-reported cached tokens to price.
Real runs count as for the resource ratios (``resource_eligible``: not time-limited, two prompt
counts); every replayed run counts (a time-limited FC run is a real trace). Definitions and blind
spots: docs/analysis.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.metrics.bootstrap import DEFAULT_RESAMPLES, boot_ratio, percentile_interval, resample_counts
from ctxpolicy.metrics.compare import FC, baseline_runs, resource_eligible, select
from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD

REPLAY_TRACK = "replay"
PLACEHOLDER = "placeholder"  # identity.summarizer of replays with stand-in summaries (ctxpolicy.replay)
UNPRICEABLE = "measured"  # a replay has no server cache counts, so it cannot be priced this way
MEASURED_NOTE = (
    "no cost decomposition with cost method 'measured': a replay sends nothing to a server, so it "
    "has no server-reported cached tokens; use estimated or exact (metrics.cost_method)."
)


class MeasuredCostError(CtxpolicyError, ValueError):
    """The decomposition was asked for the ``measured`` cost method, which a replay cannot have."""


DECOMPOSED = ("cost", "tokens", "calls")
PARTS = ("mechanical", "actual", "behavioural")
STATS = ("est", "lo", "hi")
_COLUMNS = {"tokens": "total_tokens", "calls": "all_calls"}


def decomposition_columns() -> list[str]:
    """The flat columns a decomposition adds per cell: ``<resource>_<part>_<est|lo|hi>``, then
    ``decomposition_n_tasks`` and ``replay_summaries``."""
    return [f"{r}_{p}_{s}" for r in DECOMPOSED for p in PARTS for s in STATS] + [
        "decomposition_n_tasks",
        "replay_summaries",
    ]


def decomposition_record(row: dict) -> dict | None:
    """One compare row's decomposition as JSON: {resource: {part: {est, lo, hi}}, n_tasks,
    replay_summaries}; None where the cell has none (NaN shown as None)."""
    n_tasks = row.get("decomposition_n_tasks")
    if n_tasks is None or n_tasks != n_tasks:
        return None

    def plain(value):
        return None if value is None or value != value else float(value)

    record: dict = {r: {p: {s: plain(row[f"{r}_{p}_{s}"]) for s in STATS} for p in PARTS} for r in DECOMPOSED}
    return {**record, "n_tasks": int(n_tasks), "replay_summaries": row.get("replay_summaries")}


def replay_runs(runs: pd.DataFrame) -> pd.DataFrame:
    if "track" not in runs:
        return runs.iloc[0:0]
    return runs[(runs["track"].astype("object") == REPLAY_TRACK).to_numpy()]


def _column(resource: str, side: str, cost_method: str) -> str:
    if resource == "cost":
        return cost_methods.method(cost_method).billed_column  # one method for both sides
    return _COLUMNS[resource]


def _with_all_calls(runs: pd.DataFrame) -> pd.DataFrame:
    return runs.assign(all_calls=runs["agent_calls"].astype(float) + runs["summary_calls"].astype(float))


def _task_means(runs: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return runs.groupby(runs["task_id"].astype(str))[columns].mean()


def _cell_key(group: pd.DataFrame) -> tuple:
    first = group.iloc[0]
    setting = first.get("setting")
    return str(first["policy"]), None if pd.isna(setting) else str(setting)


@dataclass(frozen=True)
class _Matched:
    """One real policy cell with its replay cell, the shared tasks, and the per-task means
    (columns: ``_column(resource, side)`` for each resource) of the four sides."""

    cell: str
    key: tuple
    replay_cell: str
    replays: pd.DataFrame
    tasks: pd.Index
    real_policy: pd.DataFrame
    real_base: pd.DataFrame
    replay_policy: pd.DataFrame
    replay_base: pd.DataFrame


def _matched_cells(
    runs: pd.DataFrame, replays: pd.DataFrame | None, *, model: str, benchmark: str, cost_method: str, track: str | None
):
    if cost_methods.method(cost_method).name == UNPRICEABLE:
        raise MeasuredCostError(MEASURED_NOTE)
    replays = replay_runs(runs if replays is None else replays)
    replays = _with_all_calls(
        replays[
            (
                (replays["model"].astype("object") == model) & (replays["benchmark"].astype("object") == benchmark)
            ).to_numpy()
        ]
    )
    real = _with_all_calls(select(runs, model=model, benchmark=benchmark))
    if replays.empty or real.empty:
        return
    real_fc = resource_eligible(baseline_runs(real, FC))
    replay_fc = replays[(replays["policy"].astype("object") == FC).to_numpy()]
    if real_fc.empty or replay_fc.empty:
        return
    replay_cells = {
        _cell_key(g): (str(c), g)
        for c, g in replays.groupby("cell", observed=True, sort=True)
        if str(g["policy"].iloc[0]) != FC
    }
    real_columns = [_column(r, "real", cost_method) for r in DECOMPOSED]
    replay_columns = [_column(r, "replay", cost_method) for r in DECOMPOSED]
    real_base = _task_means(real_fc, real_columns).dropna()
    replay_base = _task_means(replay_fc, replay_columns).dropna()
    others = real[(real["policy"].astype("object") != FC).to_numpy()]
    if "summarizer" in others:
        others = others[others["summarizer"].isna().to_numpy()]
    for cell, group in others.groupby("cell", observed=True, sort=True):
        if track is not None and "track" in group and (group["track"].astype("object") != track).all():
            continue
        key = _cell_key(group)
        if key not in replay_cells:
            continue
        replay_cell, replay_group = replay_cells[key]
        real_policy = _task_means(resource_eligible(group), real_columns).dropna()
        replay_policy = _task_means(replay_group, replay_columns).dropna()
        tasks = (
            real_policy.index.intersection(real_base.index)
            .intersection(replay_policy.index)
            .intersection(replay_base.index)
            .sort_values()
        )
        if len(tasks):
            yield _Matched(
                str(cell),
                key,
                replay_cell,
                replay_group,
                tasks,
                real_policy.loc[tasks],
                real_base.loc[tasks],
                replay_policy.loc[tasks],
                replay_base.loc[tasks],
            )


def decompose(
    runs: pd.DataFrame,
    replays: pd.DataFrame | None = None,
    *,
    model: str,
    benchmark: str,
    cost_method: str = DEFAULT_METHOD,
    track: str | None = "full",
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> pd.DataFrame:
    """One row per real policy cell (``track``'s; the agent as its own summarizer) that has a
    replay cell of the same policy and setting: ``benchmark``, ``model``, ``cell``, ``policy``,
    ``setting``, ``replay_cell`` and ``decomposition_columns()``. ``replays`` default to the
    replay-track runs of ``runs``. Cells without replays or without shared tasks are left out
    (``missing_decompositions`` says which). ValueError for an unknown cost method."""
    rows = []
    for m in _matched_cells(runs, replays, model=model, benchmark=benchmark, cost_method=cost_method, track=track):
        counts = resample_counts(len(m.tasks), n_boot, seed)
        row = {
            "benchmark": benchmark,
            "model": model,
            "cell": m.cell,
            "policy": m.key[0],
            "setting": m.key[1],
            "replay_cell": m.replay_cell,
            "decomposition_n_tasks": len(m.tasks),
            "replay_summaries": _summaries(m.replays),
        }
        for resource in DECOMPOSED:
            real_column, replay_column = (
                _column(resource, "real", cost_method),
                _column(resource, "replay", cost_method),
            )
            row.update(
                _decompose_one(
                    resource,
                    m.tasks,
                    counts,
                    m.real_policy[real_column],
                    m.real_base[real_column],
                    m.replay_policy[replay_column],
                    m.replay_base[replay_column],
                )
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=_frame_columns())


def task_ratios(
    runs: pd.DataFrame,
    replays: pd.DataFrame | None = None,
    *,
    model: str,
    benchmark: str,
    cost_method: str = DEFAULT_METHOD,
    track: str | None = "full",
) -> pd.DataFrame:
    """The decomposition task by task: one row per (cell, task, resource) with the task's
    ``mechanical`` (replay(P) / replay(FC)), ``actual`` (real(P) / real(FC)) and ``behavioural``
    (actual / mechanical) ratios, over the same tasks ``decompose`` uses (NaN where a
    denominator is 0)."""
    rows = []
    for m in _matched_cells(runs, replays, model=model, benchmark=benchmark, cost_method=cost_method, track=track):
        for resource in DECOMPOSED:
            real_column, replay_column = (
                _column(resource, "real", cost_method),
                _column(resource, "replay", cost_method),
            )
            with np.errstate(invalid="ignore", divide="ignore"):
                mechanical = (m.replay_policy[replay_column] / m.replay_base[replay_column]).replace(np.inf, np.nan)
                actual = (m.real_policy[real_column] / m.real_base[real_column]).replace(np.inf, np.nan)
            frame = pd.DataFrame(
                {
                    "benchmark": benchmark,
                    "model": model,
                    "cell": m.cell,
                    "policy": m.key[0],
                    "setting": m.key[1],
                    "task_id": m.tasks,
                    "resource": resource,
                    "mechanical": mechanical.to_numpy(),
                    "actual": actual.to_numpy(),
                }
            )
            rows.append(frame.assign(behavioural=frame["actual"] / frame["mechanical"]))
    columns = ["benchmark", "model", "cell", "policy", "setting", "task_id", "resource", *PARTS]
    return pd.concat(rows, ignore_index=True)[columns] if rows else pd.DataFrame(columns=columns)


def _summaries(replays: pd.DataFrame) -> str:
    """``placeholder`` (``ctxpolicy replay`` without an endpoint), ``real`` or ``none``."""
    names = set(replays["summarizer"].dropna().astype(str)) if "summarizer" in replays else set()
    if not names:
        return "none"
    return PLACEHOLDER if PLACEHOLDER in names else "real"


def _frame_columns() -> list[str]:
    return ["benchmark", "model", "cell", "policy", "setting", "replay_cell", *decomposition_columns()]


def _decompose_one(
    resource: str,
    tasks: pd.Index,
    counts: np.ndarray,
    real_policy: pd.Series,
    real_base: pd.Series,
    replay_policy: pd.Series,
    replay_base: pd.Series,
) -> dict:
    values = [s.reindex(tasks).to_numpy(float) for s in (replay_policy, replay_base, real_policy, real_base)]
    everywhere = np.ones(len(tasks), dtype=bool)
    mechanical = _point(values[0], values[1])
    actual = _point(values[2], values[3])
    boot_mechanical = boot_ratio(counts, values[0], values[1], everywhere)
    boot_actual = boot_ratio(counts, values[2], values[3], everywhere)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot_behavioural = np.where(boot_mechanical > 0, boot_actual / boot_mechanical, np.nan)
    behavioural = actual / mechanical if mechanical > 0 else float("nan")
    out = {}
    for part, point, samples in (
        ("mechanical", mechanical, boot_mechanical),
        ("actual", actual, boot_actual),
        ("behavioural", behavioural, boot_behavioural),
    ):
        lo, hi = percentile_interval(samples)
        out.update({f"{resource}_{part}_est": point, f"{resource}_{part}_lo": lo, f"{resource}_{part}_hi": hi})
    return out


def _point(numerator: np.ndarray, denominator: np.ndarray) -> float:
    base = denominator.mean() if len(denominator) else float("nan")
    return float(numerator.mean() / base) if base > 0 else float("nan")


def missing_decompositions(
    runs: pd.DataFrame, replays: pd.DataFrame | None = None, *, model: str, benchmark: str, track: str | None = "full"
) -> list[str]:
    """The real policy cells ``decompose`` cannot split, each with the reason (for figure notes)."""
    replays = replay_runs(runs if replays is None else replays)
    replays = replays[
        ((replays["model"].astype("object") == model) & (replays["benchmark"].astype("object") == benchmark)).to_numpy()
    ]
    real = select(runs, model=model, benchmark=benchmark)
    if replays.empty:
        return [f"{benchmark}/{model}: no replay runs"]
    if not (replays["policy"].astype("object") == FC).any():
        return [f"{benchmark}/{model}: no FC replay (the mechanical ratio's denominator)"]
    keys = {_cell_key(g) for _, g in replays.groupby("cell", observed=True)}
    notes = []
    others = real[(real["policy"].astype("object") != FC).to_numpy()]
    for cell, group in others.groupby("cell", observed=True, sort=True):
        if track is not None and "track" in group and (group["track"].astype("object") != track).all():
            continue
        if "summarizer" in group and group["summarizer"].notna().any():
            continue
        if _cell_key(group) not in keys:
            notes.append(f"{benchmark}/{model}/{cell}: no replay of this policy and setting")
    return notes
