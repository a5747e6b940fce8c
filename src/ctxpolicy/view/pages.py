"""The view's side effects: read run directories, render, write each page atomically."""

from __future__ import annotations

import os
from pathlib import Path

from ctxpolicy.atomic import atomic_write_text
from ctxpolicy.rundir import CELL_JSON, RUN_JSON, LeftOut, read_tree
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


def write_index(
    root: Path, out: Path, method: str, *, run_pages: bool = True, embed: bool = False, price: str | None = None
) -> tuple[Path, list[LeftOut]]:
    """The index of every complete run under ``root`` (``rundir.read_tree``: ``workspace/`` and
    ``stale/`` never searched), and unless ``run_pages`` is false each run's page in ``runs/`` beside
    it. Every other run directory (incomplete, unreadable, an open proxy conversation, or a record
    the page cannot be built from) is left out, listed on the index with its reason and returned
    (path, reason). A cell (it holds ``cell.json``) without a run record gets an empty index; any
    other folder without one is an error. ``embed``: the run pages go inside the index too, so its
    links open where it is shown alone. ``price``: a price card's model, for dollars."""
    root, out = Path(root), Path(out)
    tree = read_tree(root)
    if not tree.runs and not tree.left_out and not (root / CELL_JSON).is_file():
        raise ViewInputError(f"{root}: no run directories (none holds a {RUN_JSON}) and no {CELL_JSON}")
    if run_pages:
        (out.parent / RUN_PAGES).mkdir(parents=True, exist_ok=True)  # the workflow's runs/ output, even empty
    rows, pages = [], {}
    for run_dir in list(tree.runs):
        try:
            built = build_run(load_run(run_dir), method, price=price)
        except ViewInputError as exc:
            tree.leave_out(run_dir, _reason(str(exc), run_dir))
            continue
        except (
            ValueError,
            TypeError,
            KeyError,
            AttributeError,
            OSError,
            RecursionError,
        ) as exc:  # a shape no check foresaw
            tree.leave_out(run_dir, f"cannot be shown ({type(exc).__name__})")
            continue
        row = run_summary(built)
        row["name"] = str(run_dir.relative_to(root))
        row["href"], row["embedded"] = None, False
        if run_pages:
            name = page_name(root, run_dir)
            html = render_run(built)
            atomic_write_text(out.parent / name, html)
            row["href"] = name
            if embed:
                pages[name], row["embedded"] = html, True
        rows.append(row)
    title = f"Runs of {os.path.relpath(root) if not root.is_absolute() else root.name}"
    left = [{"name": _name(root, p.path), "reason": p.reason} for p in tree.left_out]
    return atomic_write_text(out, render_index(title, method, rows, left, pages)), tree.left_out


def _name(root: Path, run_dir: Path) -> str:
    try:
        return str(run_dir.relative_to(root)) or "."
    except ValueError:
        return str(run_dir)


def _reason(message: str, run_dir: Path) -> str:
    """A ``ViewInputError``'s reason without the run's own path in front (the line names it)."""
    prefix = f"{run_dir}/"
    return message[len(prefix) :] if message.startswith(prefix) else message
