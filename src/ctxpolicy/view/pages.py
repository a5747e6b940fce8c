"""The view's side effects: read run directories, render, write each page atomically."""

from __future__ import annotations

import os
from pathlib import Path

from ctxpolicy.atomic import atomic_write_text
from ctxpolicy.rundir import CELL_JSON, RUN_JSON, find_run_dirs
from ctxpolicy.view.model import build_against, build_run, run_summary
from ctxpolicy.view.render import render_against, render_index, render_run
from ctxpolicy.view.source import ViewInputError, load_run


def write_run_page(run_dir: Path, out: Path, method: str, price: str | None = None) -> Path:
    built = build_run(load_run(run_dir), method, price=price)
    return atomic_write_text(Path(out), render_run(built))


def write_against_page(run_dir: Path, other: Path, out: Path, method: str, price: str | None = None) -> Path:
    if not (Path(other) / RUN_JSON).exists():
        raise ViewInputError(f"--against: {other} is no run directory (it holds no run.json)")
    left, right = build_run(load_run(run_dir), method, price=price), build_run(load_run(other), method, price=price)
    against = build_against(left, right)
    return atomic_write_text(Path(out), render_against(left, right, against))


RUN_PAGES = "runs"  # the folder beside an index that holds its runs' pages


def page_name(root: Path, run_dir: Path) -> str:
    """A run's page, relative to its index: ``runs/`` and the run's path below the folder as one name."""
    return f"{RUN_PAGES}/" + "__".join(run_dir.relative_to(root).parts) + ".html"


def write_index(root: Path, out: Path, method: str, *, run_pages: bool = True, price: str | None = None) -> Path:
    """The index of every run under ``root`` (``workspace/`` and ``stale/`` never searched), and
    unless ``run_pages`` is false each run's page in ``runs/`` beside it. A cell (it holds
    ``cell.json``) without a run record gets an empty index; any other folder without one is an error."""
    root, out = Path(root), Path(out)
    runs = find_run_dirs(root, (RUN_JSON,))
    if not runs and not (root / CELL_JSON).is_file():
        raise ViewInputError(f"{root}: no run directories (none holds a {RUN_JSON}) and no {CELL_JSON}")
    if run_pages:
        (out.parent / RUN_PAGES).mkdir(parents=True, exist_ok=True)  # the workflow's runs/ output, even empty
    rows = []
    for run_dir in runs:
        built = build_run(load_run(run_dir), method, price=price)
        row = run_summary(built)
        row["name"] = str(run_dir.relative_to(root))
        row["href"] = None
        if run_pages:
            name = page_name(root, run_dir)
            atomic_write_text(out.parent / name, render_run(built))
            row["href"] = name
        rows.append(row)
    title = f"Runs of {os.path.relpath(root) if not root.is_absolute() else root.name}"
    return atomic_write_text(out, render_index(title, method, rows))
