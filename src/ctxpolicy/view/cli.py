"""Write self-contained HTML pages of run records: a run's trajectory page, or a cell's index.

  ctxpolicy view --runs RUN_DIR [--against RUN_DIR] [--cost-method M] [--out PAGE]
  ctxpolicy view --runs CELL_DIR [--cost-method M] [--out INDEX] [--index-only] [--embed-runs]
  ctxpolicy view --runs CELL_DIR [CELL_DIR ...] --out-dir DIR [--index-only] [--embed-runs]

A run page shows the timeline of calls (prompt, cached and fresh tokens under the cost method,
latency, command and return code), every compression event with what it changed, the messages of
any call, the verdict and the submission. ``--against`` lays a second run of the same task beside
it, aligned by step. A directory that is no run directory (a cell, or any folder above runs) gives
an index of its complete runs, with each run's page written into ``runs/`` beside it unless
``--index-only``; every other run directory (incomplete, unreadable, an open proxy conversation,
a record no page can be built from) is listed on the index and on stderr as "left out: PATH:
reason", as aggregate, audit and cost --runs list them. ``--out-dir DIR`` takes one or several
folders (the workflow's pages of a group of cells, in one process) and writes each one's index as
``DIR/NAME/index.html``. A single run that does not count is shown
with a warning naming why. Pages open from disk: no server, no network (docs/view.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxpolicy.study import Study

ERROR_PREFIX = "view: "  # cli.main starts our error lines with it
DEFAULT_OUT_RUN = "{name}.html"
DEFAULT_OUT_INDEX = "{name}/index.html"


def add_arguments(parser) -> None:
    from ctxpolicy.cli_args import add_config, add_out, add_runs

    from ctxpolicy.metrics.cost_methods import names

    add_runs(parser, "a run directory, or a cell (or any folder of runs)")
    parser.add_argument("--against", type=Path, default=None, help="a second run of the same task, shown side by side")
    parser.add_argument(
        "--cost-method",
        choices=names(),
        default=None,
        help="how cached tokens are counted (default: the config's metrics.cost_method, else estimated)",
    )
    parser.add_argument(
        "--price",
        metavar="MODEL",
        default=None,
        help="a model of litellm's price map (e.g. gpt-4o): dollars beside the tokens (default: metrics.price)",
    )
    add_config(parser, "the study config (for metrics.cost_method and metrics.price)")
    add_out(parser, "the page (default RUN.html, or CELL/index.html for a folder of runs)")
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="for one or several folders of runs: each one's index at DIR/NAME/index.html",
    )
    parser.add_argument("--index-only", action="store_true", help="for a folder of runs: write the index page only")
    parser.add_argument(
        "--embed-runs",
        action="store_true",
        help="for a folder of runs: put the run pages inside the index too, so that its links open "
        "where the index is shown alone (the Snakemake report)",
    )


def _study(args) -> Study | None:
    """The study of --config (its cost method and price), or None without one."""
    if args.config is None:
        return None
    from ctxpolicy.study import load_study

    return load_study(args.config)


def _method(args, study: Study | None) -> str:
    from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD

    if args.cost_method:
        return args.cost_method
    return study.cost_method if study is not None else DEFAULT_METHOD


def _price(args, study: Study | None) -> str | None:
    """--price, else the config's ``metrics.price``; checked against litellm's map."""
    from ctxpolicy.errors import UsageError
    from ctxpolicy.metrics.prices import PriceError, price_card

    price = getattr(args, "price", None)
    if price is None and study is not None:
        price = study.price
    if price is not None:
        try:
            price_card(price)
        except PriceError as exc:  # a price the user gave: bad input, naming close matches
            raise UsageError(str(exc)) from exc
    return price


def main(args) -> int:
    from ctxpolicy.view.pages import write_against_page, write_index, write_run_page
    from ctxpolicy.view.source import ViewInputError

    if args.out_dir is not None or len(args.runs) > 1:
        return _main_folders(args)
    target = args.runs[0]
    study = _study(args)
    method = _method(args, study)
    price = _price(args, study)
    if not target.is_dir():
        raise ViewInputError(f"{target}: no such directory")
    if (target / "run.json").exists():
        from ctxpolicy.rundir import incomplete_reason

        reason = incomplete_reason(target)
        if reason is not None:  # shown as it stands (a conversation in progress, a run killed), flagged
            print(f"view: warning: {target}: {reason}", file=sys.stderr)
        out = args.out or Path(DEFAULT_OUT_RUN.format(name=target.name))
        if args.against is not None:
            written = write_against_page(target, args.against, out, method, price)
        else:
            written = write_run_page(target, out, method, price)
    else:
        if args.against is not None:
            raise ViewInputError(f"--against: {target} is no run directory (it holds no run.json)")
        out = args.out or Path(DEFAULT_OUT_INDEX.format(name=target.resolve().name))
        written, left_out = write_index(
            target, out, method, run_pages=not args.index_only, embed=args.embed_runs, price=price
        )
        for problem in left_out:  # the same report as aggregate's, audit's and cost --runs'
            print(f"view: left out: {problem}", file=sys.stderr)
    print(written)
    return 0


def _main_folders(args) -> int:
    """Folders of runs (--out-dir): each one's index at DIR/NAME/index.html, one process for all."""
    from ctxpolicy.rundir import RUN_JSON
    from ctxpolicy.view.pages import write_index
    from ctxpolicy.view.source import ViewInputError

    if args.out_dir is None:
        raise ViewInputError(
            f"--runs: {len(args.runs)} folders: give --out-dir DIR (each index at DIR/NAME/index.html)"
        )
    if args.out is not None:
        raise ViewInputError("--out and --out-dir: give one (--out-dir for folders of runs)")
    if args.against is not None:
        raise ViewInputError("--against takes one run directory in --runs, not folders with --out-dir")
    names = [folder.resolve().name for folder in args.runs]
    shared = sorted({name for name in names if names.count(name) > 1})
    if shared:
        raise ViewInputError(f"--runs: folders of the same name would share an index: {', '.join(shared)}")
    for folder in args.runs:
        if not folder.is_dir():
            raise ViewInputError(f"{folder}: no such directory")
        if (folder / RUN_JSON).exists():
            raise ViewInputError(f"{folder}: a run directory; with --out-dir each --runs is a folder of runs")
    study = _study(args)
    method, price = _method(args, study), _price(args, study)
    for folder, name in zip(args.runs, names):
        written, left_out = write_index(
            folder,
            args.out_dir / DEFAULT_OUT_INDEX.format(name=name),
            method,
            run_pages=not args.index_only,
            embed=args.embed_runs,
            price=price,
        )
        for problem in left_out:
            print(f"view: left out: {problem}", file=sys.stderr)
        print(written)
    return 0
