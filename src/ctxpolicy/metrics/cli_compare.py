"""Print the comparison behind the figures: each policy cell against a baseline (FC by default).

One row per (benchmark, model, policy, setting, summarizer) with n_tasks, resolve_rate,
baseline_resolve_rate, resolve_delta {est, lo, hi}, tokens_ratio, latency_ratio, cost_ratio and
calls_change (each {est, lo, hi, n_tasks}), solved, baseline_solved, gains, losses and
left_out_tasks; with replay runs (in the table or --replay TABLE) also the cost decomposition:
for cost, tokens and calls the mechanical ratio (replayed policy / replayed FC), the actual ratio
and the behavioural factor (actual / mechanical), each {est, lo, hi} (docs/analysis.md).
Replay and proxy runs never count for resolve rates. Rates and their difference are fractions
in --json/--csv (the plain table prints percentages); ratios are plain ratios; calls_change is
the relative change (0.25 = 25 % more calls). The numbers are those of
ctxpolicy.metrics.compare.compare_to_baseline, the same the figures draw. Definitions:
docs/metrics.md, section 5.

--view picks another table, one of the numbers the study's observations quote (docs/metrics.md,
section 5.6), each on the successful attempts of the tasks both FC and the policy solve (task
means first, A.5's step rule): calls (agent calls and per-call latency relative to FC),
summary-share (summary calls' share of the agent's time for SU, S, SU-p, S-p), shared-tokens
(total tokens relative to FC), compressions (compressions per run); depth-wins (Figure 3's
depth-win counts); cost-models (the cost_sensitivity figure's numbers: each cell's billed input
relative to the baseline under every cost method, and under --cost-method at cache-read
discounts 0.1, 0.25, 0.5 and 1 (no cache), with the break-even discount d*; "none": no crossing
in [0, 1]). With
--track sweep the comparison includes the full comparison's cells of the swept primitives (the
shared primary D = 0.5 cells) on the sweep tasks, and the plain table ends with the depth-win
counts.

examples:
  ctxpolicy compare --table results/tables/runs.parquet
  ctxpolicy compare --table results/tables/full/runs.parquet --view calls --csv
  ctxpolicy compare --table results/tables/sweep/runs.parquet --track sweep --setting tight --json
  ctxpolicy compare --table runs.parquet --benchmark swebench --model qwen --cost-method exact --csv
  ctxpolicy compare --config config/paper.yaml --table results/tables/runs.parquet --track sweep

Which runs are compared: with --config, the cells of the study's design for --track (shared
cells included: the full comparison's primary D = 0.5 cells in the sweep, the calibration FC as
the reference; ctxpolicy.study.Study.design_cells), selected by cell id, and the study's
attempts and cost method are the defaults of --attempts and --cost-method; without it, the
cells the table's `cell` and `track` columns name.
"""

from __future__ import annotations

import sys
from pathlib import Path

from typing import TYPE_CHECKING

from ctxpolicy.metrics.compare_views import DOLLAR_COLUMNS, TRACKS, CompareError, DesignCells, Selection

if TYPE_CHECKING:
    from ctxpolicy.study import Study

VIEWS = ("comparison", "calls", "summary-share", "shared-tokens", "compressions", "depth-wins", "cost-models")
ERROR_PREFIX = "compare: "  # cli.main starts our error lines with it


def add_arguments(parser) -> None:
    from ctxpolicy.metrics.bootstrap import DEFAULT_RESAMPLES
    from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD
    from ctxpolicy.metrics.cost_methods import names

    from ctxpolicy.cli_args import TABLE_METAVAR, add_config, add_table, deprecated_alias

    table = add_table(parser, "the runs table (runs.parquet, from ctxpolicy aggregate)", dest="runs")
    deprecated_alias(parser, "--runs", replacement=table)
    parser.add_argument("--benchmark", help="only this benchmark (default: every one in the table)")
    parser.add_argument("--model", help="only this model (default: every one in the table)")
    parser.add_argument("--track", default="full", help=f"the cells compared: {' | '.join(TRACKS)} (default full)")
    parser.add_argument("--setting", help="only cells at this threshold setting, threshold-free ones included")
    parser.add_argument(
        "--view", default="comparison", help=f"the table printed: {' | '.join(VIEWS)} (default comparison)"
    )
    parser.add_argument("--baseline", default="FC", help="the baseline policy spec (default FC)")
    parser.add_argument(
        "--attempts",
        type=int,
        default=None,
        help="planned attempts per task (default: the table's largest attempt number)",
    )
    parser.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"task-bootstrap resamples (default {DEFAULT_RESAMPLES})",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument(
        "--cost-method",
        default=None,
        help=f"the cost_ratio's method: {' | '.join(names())} (default: --config's metrics.cost_method, "
        f"else {DEFAULT_METHOD})",
    )
    add_config(
        parser, "the study config: its cells (by id), attempts and cost method (default: the table's cell columns)"
    )
    parser.add_argument(
        "--price",
        metavar="MODEL",
        default=None,
        help="a model of litellm's price map (e.g. gpt-4o): mean dollars per run beside the ratios "
        "(default: --config's metrics.price)",
    )
    parser.add_argument(
        "--replay",
        type=Path,
        default=None,
        metavar=TABLE_METAVAR,
        help="a runs table of replay runs (ctxpolicy replay, then aggregate): adds the cost "
        "decomposition columns; replay-track runs in --table are used without it",
    )
    parser.add_argument(
        "--columns",
        default=None,
        metavar="NAMES",
        help="the text view's columns, comma-separated, or all (default: a view that fits 120 columns; "
        "names: see docs/metrics.md)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="a JSON list of objects")
    output.add_argument("--csv", action="store_true", help="CSV, interval statistics flattened")

    def one_line_error(message: str):  # argparse's usage block would make it several lines
        print(f"compare: {message}", file=sys.stderr)
        raise SystemExit(2)

    parser.error = one_line_error


def compare(args, metric=None):
    """The comparison table for the arguments (CompareError for bad input): ``metric``'s rows
    (default ``compare_to_baseline``, with the decomposition and dollars where they apply; or
    another function of its signature, ``metrics.sensitivity.cost_sensitivity``), computed by
    ``metrics.compare_views``. Resolves ``args.cost_method`` (the flag, else the study's)."""
    from ctxpolicy.metrics import compare_views, cost_methods

    study = None
    if getattr(args, "config", None):
        from ctxpolicy.study import load_study

        study = load_study(args.config)  # a ConfigError: exit code 2, "compare: ..."
    if args.track not in TRACKS:
        raise CompareError(f"--track is {args.track!r}; allowed: {', '.join(TRACKS)}")
    if args.cost_method is None:  # the study's, checked when it was loaded
        args.cost_method = study.cost_method if study else cost_methods.DEFAULT
    else:
        try:
            cost_methods.method(args.cost_method)  # the registry's one check of a method name
        except cost_methods.UnknownMethodError:
            raise CompareError(
                f"--cost-method is {args.cost_method!r}; allowed: {', '.join(cost_methods.names())}"
            ) from None
    if args.attempts is not None and args.attempts < 1 or args.resamples < 1:
        raise CompareError(f"--attempts and --resamples must be >= 1: got {args.attempts}, {args.resamples}")
    runs = _read_runs(args.runs)
    select = selection(args, study)
    design = _design_cells(study, args.track) if study else None
    table, attempts = compare_views.comparison(runs, select, design=design, metric=metric)
    if metric is not None:
        return table, attempts
    table = _with_decomposition(table, runs, args, select)
    price = getattr(args, "price", None) or (study.price if study else None)
    if price is not None:
        table = compare_views.with_dollars(table, runs, select, price)
    return table, attempts


def selection(args, study: Study | None = None) -> Selection:
    """What the arguments select (``compare_views.Selection``): no --attempts, the study's; no
    --cost-method, the default."""
    from ctxpolicy.metrics.cost_methods import DEFAULT

    return Selection(
        source=str(args.runs),
        track=args.track,
        benchmark=args.benchmark,
        model=args.model,
        setting=args.setting,
        baseline=args.baseline,
        attempts=args.attempts or (study.attempts if study else None),
        cost_method=args.cost_method or DEFAULT,
        resamples=args.resamples,
        seed=args.seed,
    )


def _design_cells(study: Study, track: str) -> DesignCells:
    """The ids of the cells the study's design compares for ``track``, per (benchmark, model):
    its design cells and the pair's FC reference (``Study.design_cells``)."""
    from ctxpolicy.study import Pair

    section = {"full": "full_comparison", "sweep": "sweeps", "summarizer": "summarizer"}[track]
    return lambda benchmark, model: {c.id for c in study.design_cells(section, Pair(model, benchmark))}


def _with_decomposition(table, runs, args, select: Selection):
    """The decomposition columns where replays exist: the --replay table's, else the runs table's
    replay-track runs; a note instead for a cost method that cannot price replays."""
    from ctxpolicy.metrics.compare_views import with_decomposition
    from ctxpolicy.metrics.decomposition import MEASURED_NOTE, UNPRICEABLE, replay_runs

    replays = replay_runs(_read_runs(args.replay) if getattr(args, "replay", None) else runs)
    if replays.empty:
        return table
    if args.cost_method == UNPRICEABLE:
        print(f"compare: note: {MEASURED_NOTE}", file=sys.stderr)
        return table
    return with_decomposition(table, runs, replays, select)


def _read_runs(path: Path):
    import pandas as pd

    try:
        runs = pd.read_parquet(path)
    except FileNotFoundError:
        raise CompareError(f"{path}: no such file") from None
    except Exception as exc:  # pyarrow raises several types for a file that is not parquet
        raise CompareError(f"{path}: not a readable parquet table ({type(exc).__name__})") from None
    needed = ("benchmark", "model", "policy", "cell", "task_id", "attempt", "resolved", "outcome", "track")
    missing = [c for c in needed if c not in runs]
    if missing:
        raise CompareError(f"{path}: not a runs table (no column {', '.join(missing)})")
    return runs


def dollar_lines(table) -> str:
    """The text view's dollars: per row, its mean dollars per run and its baseline's."""
    import math

    shown = lambda v: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"${v:,.4f}"  # noqa: E731
    model = table["price_model"].iloc[0]
    lines = [f"\n# dollars per run at {model}'s litellm prices (the cost method's cached tokens)"]
    for row in table.to_dict("records"):
        setting = row.get("setting")
        name = f"{row['benchmark']} / {row['model']} / {row['policy']}" + (
            f" @ {setting}" if isinstance(setting, str) else ""
        )
        lines.append(f"{name}: {shown(row['dollars_per_run'])} (baseline {shown(row['baseline_dollars_per_run'])})")
    return "\n".join(lines) + "\n"


def plain_table(table, *, attempts: int, baseline: str, cost_method: str, columns: str | None = None) -> str:
    """The text view (``metrics.compare_text``): the note lines, then the chosen columns."""
    from ctxpolicy.metrics.compare import solved_threshold
    from ctxpolicy.metrics.compare_text import DEFAULT_COLUMNS, parse_columns, text_table
    from ctxpolicy.metrics.cost_methods import method

    note = (
        f"# against {baseline}; {attempts} planned attempts per task; solved = at least "
        f"{solved_threshold(attempts)} of {attempts} successes; intervals: 95 % task bootstrap\n"
        f"# cost method: {cost_method} ({method(cost_method).description})"
    )
    chosen = DEFAULT_COLUMNS if columns is None else parse_columns(columns)
    return text_table(table, baseline=baseline, note=note, columns=chosen)


def _check_columns(columns: str | None) -> None:
    from ctxpolicy.metrics.compare_text import parse_columns

    if columns is not None:
        try:
            parse_columns(columns)
        except ValueError as exc:
            raise CompareError(str(exc)) from None


def main(args) -> int:
    import json

    from ctxpolicy.metrics.compare import compare_columns, compare_records
    from ctxpolicy.metrics.decomposition import decomposition_columns, decomposition_record

    args.view = getattr(args, "view", "comparison")
    if args.view not in VIEWS:
        raise CompareError(f"--view is {args.view!r}; allowed: {', '.join(VIEWS)}")
    if args.view != "comparison":
        return _print_view(args)
    _check_columns(getattr(args, "columns", None))
    table, attempts = compare(args)
    table = table.sort_values(
        ["benchmark", "model", "policy", "setting", "summarizer"],
        key=lambda c: c.astype("object").fillna("").astype(str),
        kind="stable",
    )
    split = "cost_mechanical_est" in table
    if args.json:
        records = compare_records(table)
        if split:
            for record, row in zip(records, table.to_dict("records")):
                record["decomposition"] = decomposition_record(row)
        if "dollars_per_run" in table:
            for record, row in zip(records, table.to_dict("records")):
                record.update({k: row[k] for k in DOLLAR_COLUMNS})
        print(json.dumps(records, indent=1))
    elif args.csv:
        dollars = list(DOLLAR_COLUMNS) if "dollars_per_run" in table else []
        table[compare_columns() + (decomposition_columns() if split else []) + dollars].to_csv(sys.stdout, index=False)
    else:
        sys.stdout.write(
            plain_table(
                table,
                attempts=attempts,
                baseline=args.baseline,
                cost_method=args.cost_method,
                columns=getattr(args, "columns", None),
            )
        )
        if "dollars_per_run" in table:
            sys.stdout.write(dollar_lines(table))
        if args.track == "sweep":
            from ctxpolicy.metrics.compare_views import depth_win_counts

            for benchmark, model, wins in depth_win_counts(_read_runs(args.runs), selection(args), attempts):
                sys.stdout.write(f"\n# {benchmark} / {model}\n" + "\n".join(wins.lines()) + "\n")
    return 0


def _print_view(args) -> int:
    import json

    import pandas as pd

    from ctxpolicy.metrics.compare_views import depth_win_counts, quoted_table

    if args.view == "depth-wins":
        from ctxpolicy.metrics.compare import attempts_in_table, study_runs

        runs = _read_runs(args.runs)
        attempts = args.attempts or attempts_in_table(study_runs(runs))
        found = depth_win_counts(runs, selection(args), attempts)
        if not found:
            raise CompareError(f"{args.runs}: no sweep-track cells for --view depth-wins")
        if args.json or args.csv:
            records = [{"benchmark": b, "model": m, **r} for b, m, wins in found for r in wins.records()]
            if args.json:
                print(json.dumps(records, indent=1))
            else:
                pd.DataFrame(records).to_csv(sys.stdout, index=False)
        else:
            for benchmark, model, wins in found:
                sys.stdout.write(f"# {benchmark} / {model}\n" + "\n".join(wins.lines()) + "\n")
        return 0
    if args.view == "cost-models":
        return _print_cost_models(args)
    table = quoted_table(_read_runs(args.runs), selection(args), args.view)
    return _write_table(args, table, lambda: view_text(table, args.view))


def _print_cost_models(args) -> int:
    from ctxpolicy.metrics.sensitivity import cost_sensitivity

    table, _ = compare(args, metric=cost_sensitivity)
    return _write_table(args, table, lambda: cost_models_text(table))


def _write_table(args, table, text) -> int:
    """A view's table as --json (null for NaN), --csv or its plain text (``text()``)."""
    import json

    if args.json:
        records = table.astype("object").where(table.notna(), None).to_dict("records")
        print(json.dumps(records, indent=1, default=float))
    elif args.csv:
        table.to_csv(sys.stdout, index=False)
    else:
        sys.stdout.write(text())
    return 0


def cost_models_text(table) -> str:
    """``--view cost-models`` as aligned text: per cell, each cost method's ratio (those some cell
    has), the ratio at each discount under the table's method, and its break-even discount d*."""
    import math

    from ctxpolicy.metrics import cost_methods
    from ctxpolicy.metrics.sensitivity import DISCOUNTS, discount_ratio

    def ratio(row, key):
        value = row[f"{key}_est"]
        if value != value:
            return "-"
        return f"{value:.2f} [{row[key + '_lo']:.2f}, {row[key + '_hi']:.2f}]"

    method = str(table["cost_ratio_method"].iloc[0])
    names = [m.name for m in cost_methods.methods() if table[f"cost_ratio_{m.name}_est"].notna().any()]
    keys = [(n, f"cost_ratio_{n}") for n in names] + [(f"{method} d={d:g}", discount_ratio(d)) for d in DISCOUNTS]
    header = ["benchmark", "model", "policy", "setting", "n", *[k for k, _ in keys], "d*"]
    lines = [header]
    for row in table.to_dict("records"):
        setting = row.get("setting")
        even = row[f"break_even_{method}"]
        lines.append(
            [str(row["benchmark"]), str(row["model"]), str(row["policy"]), setting if isinstance(setting, str) else "-"]
            + [str(row["n_tasks"])]
            + [ratio(row, key) for _, key in keys]
            + ["none" if even is None or math.isnan(even) else f"{even:.2f}"]
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    note = (
        f"# billed input / {table['baseline'].iloc[0]}, intervals: 95 % task bootstrap; d: cache-read discount "
        f"({method}; 1 = no cache); d*: where the bill equals the baseline's (none: no crossing in [0, 1])\n"
    )
    return note + "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines) + "\n"


def view_text(table, view: str) -> str:
    """A --view table as aligned text: ratios as plain ratios with their interval, shares in percent."""

    def cell(row, key):
        value = row[key]
        if key.endswith("_est"):
            base = key[: -len("_est")]
            if value != value:
                return "-"
            return f"{value:.2f} [{row[base + '_lo']:.2f}, {row[base + '_hi']:.2f}] n={row[base + '_n_tasks']}"
        if key == "summary_share":
            return "-" if value != value else f"{100 * value:.1f}%"
        if isinstance(value, float):
            return "-" if value != value else f"{value:.2f}"
        return "-" if value is None else str(value)

    keys = {
        "calls": ["calls_ratio_est", "per_call_latency_ratio_est"],
        "summary-share": ["summary_share", "shared_solved_tasks", "solved_runs", "summary_s", "agent_time_s"],
        "shared-tokens": ["tokens_ratio_est", "shared_solved_tasks"],
        "compressions": ["compressions_per_run", "shared_solved_tasks"],
    }[view]
    header = ["benchmark", "model", "policy", "setting", *[k.removesuffix("_est") for k in keys]]
    lines = [header] + [
        [str(r["benchmark"]), str(r["model"]), str(r["policy"]), cell(r, "setting")] + [cell(r, k) for k in keys]
        for r in table.to_dict("records")
    ]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines) + "\n"
