"""The tables ``ctxpolicy compare`` prints, computed from a runs table already read: the comparison
against the baseline (with the decomposition and dollars where they apply), the quoted views,
Figure 3's depth-win counts and the cost-models view. Pure functions of data frames and a
``Selection``; reading the tables, checking the arguments and writing the output stay in
``metrics.cli_compare``.

Bad input (nothing to compare, a column missing, a price unknown) is a ``CompareError`` (exit
code 2) whose message starts with ``Selection.source``, the table's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxpolicy.errors import UsageError

if TYPE_CHECKING:  # pandas is imported where a table is computed: `ctxpolicy compare --help` stays light
    import pandas as pd

    from ctxpolicy.metrics.depth_wins import DepthWins

# (benchmark, model) -> the ids (BENCHMARK/MODEL/SLUG) of the cells a study's design compares
DesignCells = Callable[[str, str], set[str]]

TRACKS = ("full", "sweep", "summarizer")
DOLLAR_COLUMNS = ("price_model", "dollars_per_run", "baseline_dollars_per_run")
# the quoted views and the runs-table columns each needs
QUOTED_COLUMNS = {
    "calls": ("agent_latency_s",),
    "summary-share": ("summary_latency_s",),
    "shared-tokens": ("total_tokens",),
    "compressions": ("compressions",),
}


class CompareError(UsageError, ValueError):
    """Bad arguments or a table that gives nothing to compare: one line, exit code 2."""


@dataclass(frozen=True)
class Selection:
    """What is compared: the pairs (``benchmark``/``model``, None: every one in the table), the
    ``track``'s cells, the threshold ``setting`` (None: all), against ``baseline``, with
    ``attempts`` planned (None: the table's), under ``cost_method``, with ``resamples`` bootstrap
    resamples from ``seed``. ``source`` names the table in messages."""

    source: str
    track: str = "full"
    benchmark: str | None = None
    model: str | None = None
    setting: str | None = None
    baseline: str = "FC"
    attempts: int | None = None
    cost_method: str = "estimated"
    resamples: int = 10_000
    seed: int = 0


def combos(runs: pd.DataFrame, benchmark: str | None, model: str | None) -> list[tuple[str, str]]:
    """The table's (benchmark, model) pairs, sorted, those named only."""
    pairs = runs[["benchmark", "model"]].astype("object").drop_duplicates()
    return sorted(
        (b, m)
        for b, m in pairs.itertuples(index=False)
        if (benchmark is None or b == benchmark) and (model is None or m == model)
    )


def _own(runs: pd.DataFrame, benchmark: str, model: str) -> pd.DataFrame:
    return runs[(runs["benchmark"].astype("object") == benchmark) & (runs["model"].astype("object") == model)]


def comparison(
    runs: pd.DataFrame,
    select: Selection,
    *,
    design: DesignCells | None = None,
    metric: Callable | None = None,
) -> tuple[pd.DataFrame, int]:
    """Each cell of the selection against the baseline, and the planned attempts used (the
    selection's, else the table's largest attempt number): ``metric``'s rows (default
    ``compare.compare_to_baseline``; or another function of its signature, such as
    ``metrics.sensitivity.cost_sensitivity``). With a study's ``design`` the cells compared are
    its design's for the pair (``study_cells``), not those the table's track column names."""
    import pandas as pd

    from ctxpolicy.metrics.compare import attempts_in_table, compare_to_baseline, study_runs

    attempts = select.attempts or attempts_in_table(study_runs(runs))
    for column, value in (("benchmark", select.benchmark), ("model", select.model)):
        known = sorted(map(str, runs[column].dropna().unique()))
        if value is not None and value not in known:
            raise CompareError(f"{select.source}: no runs with {column} {value!r} (the table has: {', '.join(known)})")
    frames = []
    for benchmark, model in combos(runs, select.benchmark, select.model):
        own = _own(runs, benchmark, model)
        track = select.track
        if design is not None:  # the study names the cells itself
            own, track = study_cells(own, design(benchmark, model)), None
        elif select.track == "sweep":
            own, track = sweep_runs(own), None
        try:
            table = (metric or compare_to_baseline)(
                own,
                model=model,
                benchmark=benchmark,
                baseline=select.baseline,
                baseline_setting=select.setting,
                attempts=attempts,
                cost_method=select.cost_method,
                track=track,
                n_boot=select.resamples,
                seed=select.seed,
            )
        except ValueError as exc:
            raise CompareError(f"{select.source}: {exc}") from None
        if not table.empty and select.setting is not None:
            values = table["setting"].astype("object")
            table = table[values.isna() | (values == select.setting)]
        frames.append(table)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if table.empty:
        raise CompareError(
            f"{select.source}: no {select.track}-track cells to compare"
            + (f" at setting {select.setting!r}" if select.setting else "")
        )
    return table, attempts


def with_dollars(table: pd.DataFrame, runs: pd.DataFrame, select: Selection, price: str) -> pd.DataFrame:
    """Each row's mean dollars per resource-eligible run at ``price``'s litellm prices under the
    comparison's cost method, and its baseline's (``metrics.prices.run_dollars``)."""
    from ctxpolicy.metrics import cost_methods
    from ctxpolicy.metrics.compare import resource_eligible
    from ctxpolicy.metrics.prices import PriceError, price_card, run_dollars

    try:
        card = price_card(price)
    except PriceError as exc:
        raise CompareError(str(exc)) from None
    eligible = resource_eligible(runs)
    dollars = run_dollars(eligible, cost_methods.method(select.cost_method), card)
    pair = eligible["benchmark"].astype(str) + "/" + eligible["model"].astype(str)
    by_cell = dollars.groupby([pair, eligible["cell"].astype(str)]).mean()
    base = eligible["policy"].astype(str) == select.baseline
    by_baseline = dollars[base.to_numpy()].groupby(pair[base.to_numpy()]).mean()
    keys = table["benchmark"].astype(str) + "/" + table["model"].astype(str)
    return table.assign(
        price_model=card.model,
        dollars_per_run=[by_cell.get((k, str(c))) for k, c in zip(keys, table["cell"])],
        baseline_dollars_per_run=[by_baseline.get(k) for k in keys],
    )


def with_decomposition(
    table: pd.DataFrame, runs: pd.DataFrame, replays: pd.DataFrame, select: Selection
) -> pd.DataFrame:
    """The decomposition columns (``metrics.decomposition``) joined by cell, from ``replays`` (the
    replay runs of a runs table; none: ``table`` as it is). The caller says why a cost method that
    cannot price replays gives none (``decomposition.UNPRICEABLE``)."""
    import pandas as pd

    from ctxpolicy.metrics.decomposition import decompose

    if replays.empty:
        return table
    parts = [
        decompose(
            runs,
            replays,
            model=model,
            benchmark=benchmark,
            cost_method=select.cost_method,
            track=select.track,
            n_boot=select.resamples,
            seed=select.seed,
        )
        for benchmark, model in combos(runs, select.benchmark, select.model)
    ]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return table
    split = pd.concat(parts, ignore_index=True).drop(columns=["policy", "setting"])
    return table.merge(split, on=["benchmark", "model", "cell"], how="left")


def sweep_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """One pair's sweep as Figure 3 reads it: the sweep-track cells, the full comparison's cells of
    the same primitive and trigger (the shared primary D = 0.5 cells) and FC, on the sweep tasks."""
    import numpy as np

    from ctxpolicy.metrics.compare import FC

    track = runs["track"].astype("object")
    sweep = runs[(track == "sweep").to_numpy()]
    kinds = set(zip(sweep["primitive"].astype(str), sweep["trigger"].astype(str)))
    pairs = zip(runs["primitive"].astype("object"), runs["trigger"].astype("object"))
    shared = (track == "full").to_numpy() & np.array([(str(p), str(t)) in kinds for p, t in pairs], dtype=bool)
    keep = (track == "sweep").to_numpy() | shared | (runs["policy"].astype("object") == FC).to_numpy()
    tasks = set(sweep["task_id"].astype(str))
    return runs[keep & runs["task_id"].astype(str).isin(tasks).to_numpy()]


def sweep_cells(own: pd.DataFrame, policies: list[str], settings: list[str]) -> dict:
    """Figure 3's rows from a table without a study (``metrics.sweep.all_attempts_summary``'s
    ``cells``): per setting and policy, the sweep-track cell, else the full comparison's shared
    cell (the primary D = 0.5 one, or a policy without a threshold); FC's cell as the reference."""
    track = own["track"].astype("object")
    policy = own["policy"].astype("object")
    setting = own["setting"].astype("object")
    rows = []
    for wanted in settings:
        for name in policies:
            for from_track in ("sweep", "full"):
                mask = (track == from_track) & (policy == name) & (setting.isna() | (setting == wanted))
                cells = sorted(set(own.loc[mask.to_numpy(), "cell"].astype(str)))
                if cells:
                    rows.append((wanted, name, cells[0]))
                    break
    fc = sorted(set(own.loc[(policy == "FC").to_numpy(), "cell"].astype(str)))
    return {"fc": fc[0] if fc else None, "rows": rows}


def depth_win_counts(runs: pd.DataFrame, select: Selection, attempts: int) -> list[tuple[str, str, DepthWins]]:
    """Per pair: Figure 3's depth-win counts (``metrics.depth_wins``) over its sweep."""
    from ctxpolicy.metrics.depth_wins import depth_wins
    from ctxpolicy.metrics.sweep import all_attempts_summary
    from ctxpolicy.threshold_settings import SETTINGS

    out = []
    for benchmark, model in combos(runs, select.benchmark, select.model):
        own = sweep_runs(_own(runs, benchmark, model))
        if own.empty or not (own["track"].astype("object") == "sweep").any():
            continue
        values = set(own["setting"].dropna().astype(str))
        settings = [s for s in SETTINGS if s in values and (select.setting is None or s == select.setting)]
        policies = sorted(set(own["policy"].astype(str)) - {"FC"})
        summary = all_attempts_summary(own, sweep_cells(own, policies, settings), select.cost_method, attempts=attempts)
        out.append((benchmark, model, depth_wins(summary)))
    return out


def quoted_table(runs: pd.DataFrame, select: Selection, view: str) -> pd.DataFrame:
    """The table of one quoted view (``QUOTED_COLUMNS``: calls, summary-share, shared-tokens,
    compressions; ``metrics.quoted``), every pair of the selection."""
    import pandas as pd

    from ctxpolicy.metrics import quoted
    from ctxpolicy.metrics.compare import attempts_in_table, study_runs

    missing = [c for c in QUOTED_COLUMNS[view] if c not in runs]
    if missing:
        raise CompareError(
            f"{select.source}: --view {view} needs column {', '.join(missing)} (re-run ctxpolicy aggregate)"
        )
    attempts = select.attempts or attempts_in_table(study_runs(runs))
    frames = []
    for benchmark, model in combos(runs, select.benchmark, select.model):
        own = _own(runs, benchmark, model)
        track = select.track
        if select.track == "sweep":
            own, track = sweep_runs(own), None
        common = {"model": model, "benchmark": benchmark, "track": track}
        boot = {"n_boot": select.resamples, "seed": select.seed}
        try:
            if view == "calls":
                table = quoted.calls_latency(own, **common, attempts=attempts, **boot)
            elif view == "summary-share":
                table = quoted.summary_share(own, **common, attempts=attempts)
            elif view == "shared-tokens":
                table = quoted.shared_tokens(own, **common, attempts=attempts, **boot)
            else:
                table = quoted.compressions_shared(own, **common, attempts=attempts)
        except ValueError as exc:
            raise CompareError(f"{select.source}: {exc}") from None
        if not table.empty and select.setting is not None:
            values = table["setting"].astype("object")
            table = table[(values.isna() | (values == select.setting)).to_numpy()]
        frames.append(table)
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if table.empty:
        raise CompareError(f"{select.source}: no {select.track}-track cells for --view {view}")
    return table


def study_cells(own: pd.DataFrame, ids: set[str]) -> pd.DataFrame:
    """The runs of the cells ``ids`` (a study's design cells for the track and the FC reference), by
    cell id (every run of another track, e.g. replay runs, is kept for the decomposition)."""
    run_ids = own["benchmark"].astype(str) + "/" + own["model"].astype(str) + "/" + own["cell"].astype(str)
    study_tracks = own["track"].astype(str).isin(["calibration", "full", "sweep", "summarizer"])
    return own[(run_ids.isin(ids) | ~study_tracks).to_numpy()]
