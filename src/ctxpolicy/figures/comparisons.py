"""Calls into ``ctxpolicy.metrics`` per (benchmark, model) of a grid block.

Figures never compute statistics themselves: each function here selects the runs a
figure is about and hands them to the metrics room, then labels the result with the
benchmark and model. A (benchmark, model) without runs becomes a note, not an error.

The runs behind a number are named by cell ids (``BENCHMARK/MODEL/SLUG``, the table's
``benchmark``, ``model`` and ``cell`` columns): a track's numbers for a pair come from the
cells of its design (``ctxpolicy.study.Study.design``, shared cells included) and the pair's
FC reference, never from filtering the table on policy or setting strings, so a figure gives
the same numbers from the whole runs table as from its scope's table.
"""

from __future__ import annotations

import pandas as pd

from ctxpolicy.figures import inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.metrics.compare import compare_to_baseline
from ctxpolicy.study import Pair, Study

IDENTITY = ("benchmark", "model", "policy", "setting", "summarizer", "cell", "primitive", "trigger", "depth")


def run_cell_ids(runs: pd.DataFrame) -> pd.Series:
    """Each run's cell id ``BENCHMARK/MODEL/SLUG`` from the table's cell columns."""
    if runs.empty:
        return pd.Series([], index=runs.index, dtype="object")
    return runs["benchmark"].astype(str) + "/" + runs["model"].astype(str) + "/" + runs["cell"].astype(str)


def select_cells(runs: pd.DataFrame, cells) -> pd.DataFrame:
    """The runs of the given cells (``ctxpolicy.study.grid.Cell``s or ids), by cell id."""
    ids = {c if isinstance(c, str) else c.id for c in cells}
    return runs[run_cell_ids(runs).isin(ids).to_numpy()]


def design_runs(
    runs: pd.DataFrame, study: Study, track: str, pair: Pair, cohort: str | None = None, *, reference: bool = True
) -> pd.DataFrame:
    """The runs behind a track's numbers for one pair: its design's cells and the FC reference
    (``Study.design_cells``), on a cohort's planned tasks where ``cohort`` is given (the sweeps use the
    sweep subset, which the shared main-cohort cells also cover)."""
    own = select_cells(runs, study.design_cells(track, pair, reference=reference))
    if cohort and study.has_cohort(pair.benchmark, cohort):
        own = restrict_tasks(own, set(study.cohort_tasks(pair.benchmark, cohort)))
    return own


def compare_against_fc(
    runs: pd.DataFrame, *, model: str, benchmark: str, n_boot: int, seed: int, attempts: int, cost_method: str
) -> pd.DataFrame:
    """One row per non-FC cell under ``ctxpolicy compare``'s keys: the one comparison that
    `ctxpolicy compare` prints too, so a number in a figure and the same number there are equal."""
    return compare_to_baseline(
        runs, model=model, benchmark=benchmark, attempts=attempts, cost_method=cost_method, n_boot=n_boot, seed=seed
    )


def cost_label(method: str) -> str:
    """Axis label of a billed-cost ratio, naming the cost method."""
    return f"billed input cost / FC ({method})"


def resource_gaps(own: pd.DataFrame, table: pd.DataFrame, model: str, benchmark: str) -> list[str]:
    """Why resource ratios are missing for a (benchmark, model): no eligible FC run at all, or
    the policies whose ratios came out undefined."""
    from ctxpolicy.metrics.compare import resource_eligible
    from ctxpolicy.metrics.outcomes import time_limited

    if table.empty or "tokens_ratio_est" not in table:
        return []
    fc = own[own["policy"].astype(str) == style.FC]
    if len(fc) and resource_eligible(fc).empty:
        timed_out = bool(time_limited(fc).all())
        return [notes.why_no_eligible_fc(model, benchmark, all_time_limited=timed_out)]
    undefined = table.loc[table["tokens_ratio_est"].isna(), "policy"].astype(str)
    return [notes.why_ratios_undefined(style.order_policies(undefined), model, benchmark)] if len(undefined) else []


def pair_combos(
    study: Study, block_name: str, pairs: list[tuple[str, str]] | None
) -> tuple[list[tuple[str, str]], list[str]]:
    """The (benchmark, model) combos of a grid block that a figure draws: all of them in config
    order (``pairs`` None), or the given (model, benchmark) pairs in the order given, with a note
    for each pair the block does not have (``inputs.parse_pairs`` reads the notebook parameter)."""
    combos = inputs.combos(study, block_name)
    if pairs is None:
        return combos, []
    chosen, said = [], []
    for model, benchmark in pairs:
        if (benchmark, model) in combos:
            chosen.append((benchmark, model))
        else:
            said.append(f"{model}/{benchmark} is not a pair of the config's grid.{block_name} block.")
    return chosen, said


def policies_of(study: Study, block_name: str) -> list[str]:
    """The policy specs of a grid block's cells (``ctxpolicy.study`` is the authority), FC left out."""
    return style.order_policies(c.policy for c in study.cells_of(block_name) if c.policy != style.FC)


def cohort_tasks(study: Study, benchmark: str, cohort: str | None) -> set[str] | None:
    """Task ids the study plans for a cohort (``Study.cohort_tasks``: the file, cut by
    ``cohort_limit``), or None when the config names no such cohort. A cohort file that is named
    but missing or unreadable is an error (``ConfigError`` naming it), never "every task"."""
    if not study.has_cohort(benchmark, cohort):
        return None
    return set(study.cohort_tasks(benchmark, cohort))


def restrict_tasks(runs: pd.DataFrame, tasks: set[str] | None) -> pd.DataFrame:
    return runs if tasks is None else runs[runs["task_id"].astype(str).isin(tasks)]


def runs_of(runs: pd.DataFrame, study: Study, benchmark: str, model: str, cohort: str | None = None) -> pd.DataFrame:
    """One (benchmark, model)'s runs, restricted to a cohort's tasks when the config names the
    cohort (sweep figures use the sweep subset, which the main cohort's runs also cover)."""
    own = inputs.select(runs, benchmark=benchmark, model=model)
    return own if cohort is None else restrict_tasks(own, cohort_tasks(study, benchmark, cohort))


def compare_full_comparison(
    runs: pd.DataFrame,
    study: Study,
    *,
    n_boot: int,
    seed: int,
    metric=None,
    pairs: list[tuple[str, str]] | None = None,
    combos: list[tuple[str, str]] | None = None,
) -> Prepared:
    """``compare_block`` over the full comparison, at its threshold setting, for its policies;
    ``pairs`` (model, benchmark) restricts it to some pairs (None: all), ``combos`` (benchmark,
    model) gives the pairs' order when a figure has already chosen them (``pair_combos``)."""
    setting = study.section("full_comparison")["setting"]
    if combos is None:
        combos = pair_combos(study, "full_comparison", pairs)[0]
    data = compare_block(
        inputs.select_pairs(runs, pairs),
        study,
        "full_comparison",
        n_boot=n_boot,
        seed=seed,
        combos=combos,
        setting=setting,
        policies=policies_of(study, "full_comparison"),
        metric=metric,
    )
    data.meta["setting"] = setting
    return data


def compare_block(
    runs: pd.DataFrame,
    study: Study,
    block_name: str,
    *,
    n_boot: int,
    seed: int,
    combos: list[tuple[str, str]] | None = None,
    setting: str | None = None,
    cohort: str | None = None,
    policies: list[str] | None = None,
    own_summarizer: bool = True,
    metric=None,
) -> Prepared:
    """``compare_against_fc`` (``compare_to_baseline`` against FC; or another function with the same
    signature, ``metric``) for each (benchmark, model) of a block, one row per cell: the runs of
    the block's design cells and the FC reference (``design_runs``, by cell id), on ``cohort``'s
    tasks where given. ``own_summarizer`` keeps only cells where the agent summarizes for itself.
    ``n`` is the tasks and attempts of those runs where they are few (``notes.sample_size``)."""
    method = study.cost_method
    metric = metric or compare_against_fc
    combos = combos if combos is not None else inputs.combos(study, block_name)
    frames, said, compared = [], [], []
    if not combos:
        said.append(f"the config has no grid.{block_name} block with models and benchmarks.")
    for benchmark, model in combos:
        own = design_runs(runs, study, block_name, Pair(model, benchmark), cohort)
        if own.empty:
            said.append(notes.why_no_runs(model, benchmark))
            continue
        if not (own["policy"].astype(str) == style.FC).any():
            said.append(notes.why_no_fc(model, benchmark))
            continue
        table = metric(
            own,
            model=model,
            benchmark=benchmark,
            n_boot=n_boot,
            seed=seed,
            attempts=study.attempts,
            cost_method=method,
        )
        compared.append(own)
        if table.empty:
            said.append(f"no compressed-policy runs for {model} on {benchmark}.")
            continue
        table = table[table["policy"].astype(str) != style.FC]
        if own_summarizer and "summarizer" in table:
            table = table[table["summarizer"].isna()]
        if policies is not None:
            table = table[table["policy"].astype(str).isin(policies)]
        if setting is not None:
            table = table[inputs.setting_matches(table["setting"], setting)]
        if table.empty:
            said.append(f"no compressed-policy runs for {model} on {benchmark}.")
            continue
        said += resource_gaps(own, table, model, benchmark)
        frames.append(table.assign(benchmark=benchmark, model=model))
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    n = notes.sample_size(compared, cohort_said(cohort))
    return Prepared(out, said, {"combos": combos, "cost_method": method}, n=n)


def cohort_said(cohort: str | None) -> str:
    """How the n of a figure drawn on one cohort names it (``notes.sample_size``'s ``what``)."""
    return "" if cohort is None else f" ({cohort} cohort)"
