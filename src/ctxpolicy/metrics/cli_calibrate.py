"""Derive tight/primary/loose thresholds from the FC runs of one model and benchmark.

Reads every complete run under the --runs cell directories (runs that cannot be read are
listed on stderr and left out), takes each run's peak context (largest server-reported
agent prompt) and writes the 5th/15th/25th percentiles, rounded to the nearest --round tokens,
with the distribution, to the thresholds file (atomically). Every FC run's peak counts (the
study's A.4); with --config, the study's ``grid.calibration.exclude_time_limited`` may leave
the time-limited runs out (all of them are used, with a warning on stderr and in the file's
`warnings`, when every run is time-limited; ctxpolicy.metrics.calibrate.select_peaks), and the
pair's ``round`` is the default of --round. The file records the rule (`calibrated_from`).
The file's `counts` says whose prompt counts the
peaks are: `server` (our own runs), or an imported run's `imported.counts` (`provider`, or
`local` cl100k counts where the source has no per-call usage), `mixed` when the runs differ;
`runs_by_counts` counts the runs read of each kind, and counts other than the server's are a
warning.

With --preset, writes the thresholds file of a `source: preset` entry of the config instead
(--config, --benchmark, --model; ctxpolicy.metrics.calibrate.preset_thresholds): the same layout,
so that Th cells read one kind of file whatever the source.

examples:
  ctxpolicy calibrate --config config/config.yaml --runs results/runs/local/qwen05b/FC \\
      --out results/thresholds/local/qwen05b.json
  ctxpolicy calibrate --preset --config config/paper.yaml --benchmark swebench --model qwen \\
      --out results/thresholds/swebench/qwen.json
"""

from __future__ import annotations

import sys
from pathlib import Path


from ctxpolicy.errors import UsageError
from ctxpolicy.threshold_settings import SETTINGS

ERROR_PREFIX = "calibrate: "  # cli.main starts our error lines with it


class CalibrateError(UsageError, ValueError):
    """Runs or a preset that give no thresholds: one line, exit code 2."""


def add_arguments(parser) -> None:
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    from ctxpolicy.cli_args import add_config, add_out, add_runs

    add_runs(parser, "FC cell directories (repeatable)", required=False)
    add_out(parser, "thresholds JSON file to write", required=True)
    parser.add_argument(
        "--round",
        dest="round_to",
        type=int,
        default=None,
        help="rounding unit in tokens (default: the pair's `round` in --config, else 1000; e.g. 100 for small models)",
    )
    add_config(parser, "study config: its calibration rule and rounding (with --runs), its preset (--preset)")
    preset = parser.add_argument_group("the config's preset instead of runs")
    preset.add_argument(
        "--preset", action="store_true", help="write the preset thresholds of --benchmark and --model from --config"
    )
    preset.add_argument("--benchmark", help="benchmark name from the config")
    preset.add_argument("--model", help="model name from the config")


def main(args) -> int:
    if getattr(args, "preset", False):
        return write_preset(args)
    if not args.runs:
        raise CalibrateError("give --runs CELL_DIR (FC runs to calibrate from), or --preset")
    return calibrate(args)


def write_preset(args) -> int:
    from ctxpolicy.atomic import atomic_write_json
    from ctxpolicy.metrics.calibrate import preset_thresholds, sweep_warnings
    from ctxpolicy.study import Pair, load_study

    missing = [f"--{name}" for name in ("config", "benchmark", "model") if getattr(args, name, None) is None]
    if missing or args.runs:
        raise CalibrateError(
            f"--preset takes --config, --benchmark and --model, not --runs (missing: {', '.join(missing) or 'none'})"
        )
    source = load_study(args.config).threshold_source(Pair(args.model, args.benchmark))  # ConfigError: exit 2
    try:
        data = preset_thresholds(source, args.benchmark, args.model)
    except ValueError as exc:
        raise CalibrateError(f"{args.config}: {exc}") from None
    data["warnings"] = sweep_warnings(data)
    atomic_write_json(args.out, data, indent=1)
    for warning in data["warnings"]:
        print(f"calibrate: WARNING: {args.out}: {warning}", file=sys.stderr)
    settings = ", ".join(f"{name} {data[name]}" for name in SETTINGS)
    print(f"preset {args.benchmark}/{args.model}: {settings} -> {args.out}")
    return 0


def prompt_counts(run: dict) -> str:
    """Whose prompt counts a run's peak context is: ``server`` (our own runs: the model server's),
    else an imported run's ``imported.counts`` (``provider``, ``local`` or ``mixed``)."""
    imported = run.get("imported") or {}
    return str(imported.get("counts") or "server")


def calibrate(args) -> int:
    import json

    from ctxpolicy.atomic import atomic_write_text
    from ctxpolicy.metrics.calibrate import DEFAULT_ROUND, select_peaks, sweep_warnings, thresholds_from_peaks
    from ctxpolicy.metrics.records import RecordError, find_run_dirs, read_run
    from ctxpolicy.rundir import RUN_JSON
    from ctxpolicy.study import Pair, load_study

    try:
        run_dirs = find_run_dirs(args.runs)
    except RecordError as exc:
        raise CalibrateError(str(exc)) from None
    study = load_study(args.config) if getattr(args, "config", None) else None  # ConfigError: exit 2
    runs, identities, counts = [], set(), {}
    for run_dir in run_dirs:
        try:
            record = read_run(run_dir)
        except RecordError as exc:
            print(f"left out: {exc}", file=sys.stderr)
            continue
        row = record.row
        if row["policy"] != "FC":
            raise CalibrateError(f"{run_dir}/run.json: field identity.policy is {row['policy']!r}, not 'FC'")
        if row["peak_prompt_tokens"] is not None:
            runs.append((row["time_limited"], row["peak_prompt_tokens"]))
            identities.add((row["benchmark"], row["model"]))
            kind = prompt_counts(json.loads((Path(run_dir) / RUN_JSON).read_text(encoding="utf-8")))
            counts[kind] = counts.get(kind, 0) + 1
    if len(identities) > 1:
        raise CalibrateError(f"runs mix (benchmark, model) pairs {sorted(identities)}")
    if not identities:
        raise CalibrateError("no FC run with a server-reported prompt count under --runs")
    ((benchmark, model),) = identities
    exclude = bool(study and study.calibration_excludes_time_limited)
    round_to = args.round_to or (
        study.threshold_rounding(Pair(model, benchmark), DEFAULT_ROUND) if study else DEFAULT_ROUND
    )
    peaks, choice = select_peaks(runs, exclude_time_limited=exclude)
    try:
        result = {**thresholds_from_peaks(peaks, round_to), **choice}
    except ValueError as exc:
        raise CalibrateError(str(exc)) from None
    result["benchmark"], result["model"] = benchmark, model
    result["counts"] = next(iter(counts)) if len(counts) == 1 else "mixed"
    result["runs_by_counts"] = dict(sorted(counts.items()))
    if result["counts"] != "server":
        result["warnings"] = [
            *result["warnings"],
            f"peak contexts from {result['counts']} prompt counts (imported runs: "
            "`local` = cl100k counts where the source has no per-call usage)",
        ]
    result["warnings"] = [*result["warnings"], *sweep_warnings(result)]
    atomic_write_text(args.out, json.dumps(result, indent=2))
    for warning in result["warnings"]:
        print(f"calibrate: WARNING: {args.out}: {warning}", file=sys.stderr)
    left_out = (
        f" ({choice['time_limited_runs']} time-limited left out)"
        if exclude and choice["time_limited_runs"] and not choice["warnings"]
        else ""
    )
    print(
        f"{len(peaks)} FC runs{left_out}: tight {result['tight']}, primary {result['primary']}, "
        f"loose {result['loose']} -> {args.out}"
    )
    return 0
