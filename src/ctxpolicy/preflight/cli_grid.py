"""Print the expanded experiment grid of a config: cells and runs per benchmark, model and track.

The config is checked exactly as the workflow checks it (the study, its figure targets, an
imported corpus's files), so a config that passes here is one Snakemake accepts.

With --json, print {"summary": [...], "cells": [...]} instead, one record per cell with its
id (BENCHMARK/MODEL/SLUG, what `ctxpolicy run-cell --cell` takes), slug, run directory root and
run count.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ERROR_PREFIX = "ctxpolicy grid: "  # cli.main starts our error lines with it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_config

    add_config(parser, "study config (default: %(default)s)", default=Path("config/config.yaml"))
    parser.add_argument("--json", action="store_true", help="print the cells as JSON")


def main(args: argparse.Namespace) -> int:
    from ctxpolicy.preflight import check_workflow

    study = check_workflow(args.config).study  # a ConfigError: exit code 2, reported by cli.main
    summary = study.summary()
    records = [study.cell_record(c) for c in study.cells] if args.json else []
    if args.json:
        json.dump({"config": str(args.config), "summary": summary, "cells": records}, sys.stdout, indent=1)
        print()
        return 0
    print(format_table(summary, attempts=study.attempts))
    return 0


def format_table(summary: list[dict], attempts: int) -> str:
    header = ("benchmark", "model", "track", "cells", "runs")
    rows = [tuple(str(r[k]) for k in header) for r in summary]
    rows.append(("total", "", "", str(sum(r["cells"] for r in summary)), str(sum(r["runs"] for r in summary))))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    align = lambda row: "  ".join(v.rjust(w) if i >= 3 else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths)))  # noqa: E731
    lines = [
        align(header),
        "  ".join("-" * w for w in widths),
        *map(align, rows[:-1]),
        "  ".join("-" * w for w in widths),
        align(rows[-1]),
        f"runs = cohort tasks x {attempts} attempt(s); calibration = the FC cells, which are also "
        "the FC reference of the full comparison; sweeps leave out the full comparison's cells",
    ]
    return "\n".join(line.rstrip() for line in lines)
