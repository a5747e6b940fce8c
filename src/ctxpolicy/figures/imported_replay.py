"""An imported corpus replayed: each policy's mechanical ratio to FC (billed input cost, tokens,
calls) over the corpus's trajectories, agent's actions held fixed (``ctxpolicy replay``): the cost
decomposition's mechanical part, without a behavioural one (an imported corpus has no runs of the
policies themselves).

A ratio is a ratio of means over tasks, ``mean_t replay(policy) / mean_t replay(FC)``, with a 95 %
task-bootstrap interval (``ctxpolicy.metrics.compare.ratio_with_interval``), on Figure 2's rules:
resource-eligible replays only, a task counted on both sides or on neither, calls the agent's
only, cost by the config's method (``metrics.cost_method``, in local counts). This figure draws
grid.full_comparison's policies, the triggered ones at its setting; ``imported_sweep`` draws the
sweeps' configurations from the same replays (``ratio_rows``, shared). Columns of the data:
``{cost,tokens,calls}_ratio_{est,lo,hi,n_tasks}``, ``n_tasks``.

Where the corpus's source calls carry the provider's cached tokens (its measured cache hits),
the billed input is also drawn under two cache models side by side (``CACHE_MODELS``): the ideal
prefix cache (``exact``) and the same held to what the provider served on each source call
(``measured-profile``), columns ``cost_{exact,profile}_ratio_*``; where they carry none, a note
says so and the panel is left out. Layout: one row per imported (benchmark, model) pair, one
column per resource.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ctxpolicy.study import IMPORTED_TRACK, Study
from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import inputs, notes, style
from ctxpolicy.figures.catalog import IMPORTED_TABLES, REPLAY_RUNS
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.bootstrap import resample_counts
from ctxpolicy.metrics.compare import ratio_with_interval, resource_eligible
from ctxpolicy.metrics import cost_methods

STEM = "imported_replay"
# (resource, label, runs column; None: the billed input of the config's cost method, ``cost_column``)
RESOURCES = (
    ("cost", "billed input cost", None),
    ("tokens", "tokens", "total_tokens"),
    ("calls", "agent calls", "agent_calls"),  # summary calls are not the agent's (A.6.5)
)
CACHE_MODELS = ("exact", "measured-profile")  # drawn side by side where the corpus has measured hits
NO_MEASURED_HITS = (
    "no measured-profile ratio: the imported corpus's source calls carry no provider cached tokens "
    "(only the ideal cache prices the replays)."
)

PLACEHOLDER_SUMMARIES = (
    "summary policies were replayed with placeholder summaries: their ratios count sizes, not content."
)


def placeholder_summaries(replays: pd.DataFrame) -> bool:
    """Whether any replay's summaries are stand-ins (``ctxpolicy replay`` without a summarizer)."""
    return "replay_summaries" in replays and bool((replays["replay_summaries"] == "placeholder").any())


def cache_model_resources() -> tuple[tuple[str, str, str], ...]:
    """(resource, label, runs column) of each of ``CACHE_MODELS``: ``cost_exact``, ``cost_profile``."""
    chosen = [cost_methods.method(name) for name in CACHE_MODELS]
    return tuple((f"cost_{m.key}", f"billed input, {m.label}", m.billed_column) for m in chosen)


def measured_hits(replays: pd.DataFrame) -> tuple[bool, bool]:
    """Whether the measured-profile method priced any replay (its source calls carry the
    provider's cached tokens), and whether the provider served any of them from its cache."""
    profile = cost_methods.method("measured-profile")
    if profile.billed_column not in replays:
        return False, False
    priced = pd.to_numeric(replays[profile.billed_column].astype("object"), errors="coerce").notna()
    cached = pd.to_numeric(replays.get(profile.cached_column, pd.Series(0, index=replays.index)), errors="coerce")
    return bool(priced.any()), bool((cached[priced.to_numpy()] > 0).any())


def cost_column(study: Study) -> str:
    """The runs column of the config's cost method (``metrics.cost_method``; Figure 2's)."""
    return cost_methods.method(study.cost_method).billed_column


def read_replays(tables_dir: str | Path) -> pd.DataFrame:
    """The imported corpus's replay runs: ``{tables_dir}/replay/runs.parquet`` (tables_dir is
    ``{results_dir}/tables/imported``), or under ``tables_dir/imported/`` when given the tables root."""
    tables_dir = Path(tables_dir)
    for candidate in (tables_dir / "replay", tables_dir / IMPORTED_TABLES / "replay"):
        if (candidate / "runs.parquet").exists():
            return inputs.read_runs(candidate)
    return inputs.read_runs(tables_dir / Path(REPLAY_RUNS).parent)


def _task_means(runs: pd.DataFrame, column: str) -> pd.Series:
    """Per task: the mean of one column over the resource-eligible runs (A.5) that have a value."""
    eligible = resource_eligible(runs)
    values = pd.to_numeric(eligible[column].astype("object"), errors="coerce").astype(float)
    return values.groupby(eligible["task_id"].astype(str).to_numpy()).mean()


def ratio_rows(
    replays: pd.DataFrame,
    combos: list[tuple[str, str]],
    configurations: list[tuple[str, str | None]],
    *,
    n_boot: int,
    seed: int,
    cost: str,
    resources: tuple = RESOURCES,
) -> tuple[list[dict], list[str]]:
    """One row per (pair, configuration) with replays: each resource's ratio of task means to the
    FC replay (``{resource}_ratio_est``) and its task-bootstrap interval (``_lo``, ``_hi``), on
    A.5's rules: resource-eligible runs only (``compare.resource_eligible``: not time-limited,
    at least two prompt counts), and a task counts on both sides or on neither (a task whose
    mean is missing on one side is left out of both; ``{resource}_ratio_n_tasks``). ``cost`` is
    the runs column of the cost resource; ``n_tasks`` the tasks both sides replayed. The notes
    say which configuration had no replay."""
    rows: list[dict] = []
    found: list[str] = []
    for benchmark, model in combos:
        own = inputs.select(replays, benchmark=benchmark, model=model)
        fc = own[own["policy"].astype(str) == "FC"]
        if fc.empty:
            found.append(f"no FC replay of the imported corpus ({model} on {benchmark}).")
            continue
        for policy, setting in configurations:
            mine = own[own["policy"].astype(str) == policy]
            if setting is not None:
                mine = mine[mine["setting"].astype("object") == setting]
            if mine.empty:
                at = f" at the {setting} threshold" if setting else ""
                found.append(f"{policy}{at}: no replay runs ({model} on {benchmark}).")
                continue
            tasks = pd.Index(sorted(set(mine["task_id"].astype(str)) & set(fc["task_id"].astype(str))))
            counts = resample_counts(len(tasks), n_boot, seed)
            row = {"benchmark": benchmark, "model": model, "policy": policy, "setting": setting, "n_tasks": len(tasks)}
            for resource, _, column in resources:
                column = column or cost
                values = ratio_with_interval(tasks, _task_means(mine, column), _task_means(fc, column), counts)
                row.update({f"{resource}_ratio_{part}": value for part, value in values.items()})
            rows.append(row)
    if rows and placeholder_summaries(replays):
        found.append(PLACEHOLDER_SUMMARIES)
    return rows, found


def ratio_points(ax, rows: pd.DataFrame, key: str, specs: list[str], y: np.ndarray, marker: str = "o") -> None:
    """One hollow point per policy (``rows`` indexed like ``specs``, at heights ``y``) with its
    interval (``axes.interval_points``), and the FC line at 1."""
    ax_.interval_points(ax, rows, key, specs, y, marker=marker)
    ax.axvline(1.0, color="#666666", linewidth=0.6)
    ax.grid(axis="y", visible=False)


def compute(replays: pd.DataFrame, study: Study, *, n_boot: int, seed: int) -> Prepared:
    """The full comparison's policies (FC left out) at its setting, each against the FC replay."""
    setting = study.section("full_comparison")["setting"]
    configurations = [(c.policy, c.setting) for c in study.configurations("full_comparison") if c.policy != "FC"]
    combos = [(p.benchmark, p.model) for p in study.pairs(IMPORTED_TRACK)]
    found: list[str] = []
    if not combos:
        found.append("the config has no imported block: nothing to draw.")
    if replays.empty:
        found.append("no replay runs of the imported corpus (workflow/rules/imported.smk).")
        return Prepared(pd.DataFrame(), found, {"combos": combos, "setting": setting})
    priced, served = measured_hits(replays)
    resources = RESOURCES + (cache_model_resources() if priced else ())
    rows, notes_ = ratio_rows(
        replays, combos, configurations, n_boot=n_boot, seed=seed, cost=cost_column(study), resources=resources
    )
    if not priced:
        found.append(NO_MEASURED_HITS)
    elif not served:
        found.append("the provider served none of the source calls' prompt tokens from its cache.")
    meta = {"combos": combos, "setting": setting, "cost_method": study.cost_method, "cache_models": priced}
    return Prepared(pd.DataFrame(rows), found + notes_, meta)


def plot(data: Prepared, name: str = STEM):
    title = ax_.figure_title(
        name,
        f"imported corpus replayed: mechanical ratio to FC ({ax_.setting_words(data.meta)} threshold)",
    )
    combos = ax_.combos_with_data(data, data.meta.get("combos") or [])
    if not combos:
        return notes.note_figure(title, data.said())
    specs = ax_.policies_drawn(data)
    models = cache_model_resources() if data.meta.get("cache_models") else ()
    fig, grid = ax_.grid(len(combos), len(RESOURCES) + bool(models), row_height=0.2 * len(specs) + 0.7, sharey=True)
    y = np.arange(len(specs))[::-1].astype(float)
    for r, (row_axes, (benchmark, model)) in enumerate(zip(grid, combos)):
        rows = ax_.pair_rows(data.table, benchmark, model, specs)
        for ax, (resource, label, _) in zip(row_axes, RESOURCES):
            ratio_points(ax, rows, f"{resource}_ratio", specs, y)
            if r == 0:
                ax.set_title(f"{label} / FC")
        if models:  # exact above (circles), measured profile below (squares), per policy
            for (resource, _, _), offset, marker in zip(models, (0.15, -0.15), ("o", "s")):
                ratio_points(row_axes[-1], rows, f"{resource}_ratio", specs, y + offset, marker)
            if r == 0:
                row_axes[-1].set_title("by cache / FC")
        row_axes[0].set_yticks(y, style.row_labels(specs))
        row_axes[0].set_ylabel(f"{model}\n{benchmark}", fontweight="bold")
    ax_.legend_top(fig, ax_.policy_handles(specs), ncol=4, title=title)
    footer = (
        "replay of the imported trajectories (agent's actions fixed); resource-eligible runs, tasks counted on "
        f"both sides; cost: the {data.meta.get('cost_method', 'configured')} method in local counts"
        + ("; by cache: circles the ideal cache (exact), squares the measured profile." if models else ".")
    )
    return notes.finish(fig, data.said(footer))
