"""Figure 6: prompt tokens per model call for two runs of one task, FC and a TR policy.

The task and run are the config's ``figure6`` (``task_id``, ``attempt``: the study's caption
names scikit-learn 13142, run 1) when both policies ran that task; otherwise, with a note, the
task whose FC run is longest among the tasks both ran (ties broken by task id). A ``task_id``
given to ``compute`` overrides both.
"""

from __future__ import annotations


import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ctxpolicy.figures import axes as ax_
from ctxpolicy.figures import inputs, notes, style
from ctxpolicy.figures.prepared import Prepared
from ctxpolicy.study import Study

SUMMARY_COLOR = "#AA3377"


def pick_policy(study: Study, runs: pd.DataFrame) -> str | None:
    candidates = [p for p in study.section("full_comparison")["policies"] if style.primitive_of(p) == "TR"]
    candidates += sorted({p for p in runs["policy"].dropna().astype(str) if style.primitive_of(p) == "TR"})
    present = set(runs["policy"].dropna().astype(str))
    return next((p for p in candidates if p in present), None)


def compute(
    runs: pd.DataFrame,
    calls: pd.DataFrame,
    study: Study,
    *,
    model: str = "",
    benchmark: str = "",
    task_id: str = "",
    pairs: list[tuple[str, str]] | None = None,
) -> Prepared:
    """``pairs``: the first (model, benchmark) pair is drawn unless ``model`` and ``benchmark`` are
    given (``[]``: no pair, the figure says so); else the full comparison's first pair."""
    combos = inputs.combos(study, "full_comparison")
    if pairs is not None and not (model and benchmark):
        if not pairs:
            return Prepared(pd.DataFrame(), ["no model/benchmark pair was asked for (pairs: none)."])
        model, benchmark = pairs[0]
    if not (model and benchmark):
        if not combos:
            return Prepared(pd.DataFrame(), ["the config has no full comparison."])
        benchmark, model = benchmark or combos[0][0], model or combos[0][1]
    own = inputs.select(runs, benchmark=benchmark, model=model)
    setting = study.section("full_comparison")["setting"]
    policy = pick_policy(study, own)
    meta = {"benchmark": benchmark, "model": model, "policy": policy}
    if policy is None:
        return Prepared(pd.DataFrame(), [f"no TR runs for {model} on {benchmark}."], meta)
    fc = own[own["policy"].astype(str) == style.FC]
    tr = own[
        (own["policy"].astype(str) == policy)
        & inputs.setting_matches(own["setting"], setting)
        & own["summarizer"].isna()
    ]
    shared = sorted(set(fc["task_id"].astype(str)) & set(tr["task_id"].astype(str)))
    said: list[str] = []
    attempt = None
    if not task_id:  # the config's figure6 names the study's task and run, if it has runs of both
        named = study.figure6_run()
        if named is not None and named[0] in shared:
            task_id, attempt = named
        elif named is not None:
            said.append(
                f"figure6's task {named[0]} has no run of both FC and {policy} ({model}, {benchmark}): "
                "drawn instead is the task whose FC run is longest."
            )
    if task_id:
        shared = [t for t in shared if t == task_id]
    if not shared:
        why = f"task {task_id} was not run by both" if task_id else "no task was run by both"
        return Prepared(pd.DataFrame(), [f"{why} FC and {policy} ({model}, {benchmark})."], meta)
    fc_first = fc[fc["task_id"].astype(str).isin(shared)].sort_values(["task_id", "attempt"])
    fc_first = fc_first.drop_duplicates("task_id")
    longest = fc_first.sort_values(["agent_calls", "task_id"], ascending=[False, True]).iloc[0]
    task = str(longest["task_id"])
    chosen = {style.FC: longest, policy: tr[tr["task_id"].astype(str) == task].sort_values("attempt").iloc[0]}
    if attempt is not None:  # that attempt on both sides where both have it, else each side's first
        sides = ((style.FC, fc), (policy, tr))
        pair = {s: r[(r["task_id"].astype(str) == task) & (r["attempt"] == attempt)] for s, r in sides}
        if all(len(p) for p in pair.values()):
            chosen = {s: p.iloc[0] for s, p in pair.items()}
        else:
            said.append(f"figure6's run {attempt} of {task} is missing on one side: each side's first run is drawn.")
    frames = []
    for spec, run in chosen.items():
        c = calls[calls["run_dir"].astype(str) == str(run["run_dir"])].sort_values("index")
        frames.append(c.assign(policy=spec, threshold_tokens=run.get("threshold_tokens")))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    meta.update(task_id=task, attempts={s: int(r["attempt"]) for s, r in chosen.items()})
    found = said + ([] if not table.empty else [f"calls.parquet has no calls for task {task}."])
    return Prepared(table, found, meta)


def plot(data: Prepared, name: str = "fig6"):
    title = f"{style.figure_name(name)}: prompt tokens per model call"
    if data.empty:
        return notes.note_figure(title, data.notes)
    specs = [style.FC, data.meta["policy"]]
    fig, grid = ax_.grid(2, 1, row_height=1.5, sharex=True, sharey=True)
    for ax, spec in zip(grid[:, 0], specs):
        rows = data.table[data.table["policy"] == spec].reset_index(drop=True)
        colors = [SUMMARY_COLOR if k == "summary" else style.policy_color(spec) for k in rows["kind"]]
        ax.bar(range(1, len(rows) + 1), rows["prompt_tokens"].astype(float), width=0.8, color=colors, linewidth=0)
        fired = rows.index[rows["n_events"].fillna(0).astype(int) > 0]
        if len(fired):
            ax.plot(
                fired + 1,
                rows.loc[fired, "prompt_tokens"].astype(float),
                linestyle="none",
                marker="v",
                color="black",
                markersize=3,
                label="compression",
            )
        threshold = pd.to_numeric(rows["threshold_tokens"], errors="coerce").dropna()
        if len(threshold):
            ax.axhline(float(threshold.iloc[0]), color="#666666", linestyle="--", linewidth=0.7)
        shown = style.policy_label(spec) + (
            f", {style.threshold_label(None if spec == style.FC else 'primary', float(threshold.iloc[0]))} threshold"
            if len(threshold)
            else ""
        )
        run = (data.meta.get("attempts") or {}).get(spec)
        at = f", run {run}" if run is not None else ""
        ax.set_title(
            f"{shown} — {data.meta['task_id']}{at} ({data.meta['model']} · {data.meta['benchmark']})", loc="left"
        )
        ax.set_ylabel("prompt tokens")
    grid[-1, 0].set_xlabel("model call")
    handles = [Patch(color=style.policy_color(s), label=style.policy_label(s)) for s in specs]
    handles += [
        Patch(color=SUMMARY_COLOR, label="summary call"),
        Line2D([], [], linestyle="none", marker="v", color="black", markersize=3, label="compression event"),
        Line2D([], [], linestyle="--", color="#666666", label="threshold"),
    ]
    ax_.legend_top(fig, handles)
    return notes.finish(fig, data.notes)
