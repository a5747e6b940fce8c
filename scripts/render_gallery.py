"""Render the figure galleries of docs/figures.md.

    .venv/bin/python scripts/render_gallery.py synthetic [--task-cap N] [--only STEM ...]
                                                                          # docs/figures/synthetic/
    .venv/bin/python scripts/render_gallery.py synthetic --out DIR        # every file, kept in DIR
    .venv/bin/python scripts/render_gallery.py local FIGURES_DIR          # docs/figures/local/

``synthetic``: builds the paper-shaped synthetic data set (``ctxpolicy.testing.paper``, the first
N tasks of every cohort, 3 attempts), runs every main figure target's notebook on it with the
parameters the workflow gives it for config/synthetic-paper.yaml (papermill, as the workflow
does), records each picture's provenance sidecar, and keeps the PNGs and sidecars. Every picture
carries the "synthetic data" mark. ``--only`` renders those targets alone and replaces only
their pictures, leaving the rest of the gallery as it is. ``--out DIR`` renders the tables too and
keeps every file the notebooks write (``.data.csv``, ``.notes.json``, ``.csv``, ``.md``, ``.tex``,
PDF, PNG) in DIR, leaving the gallery alone: render into one folder before a change and into
another after it, and compare the two.

``local``: copies the PNGs, the Markdown tables and their ``.prov.json`` sidecars of a local study that
``bash scripts/study.sh`` made (its ``figures/`` folder) into docs/figures/local/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GALLERY = ROOT / "docs" / "figures"
BOOT = 1000


def _papermill(spec: dict, tables: Path, config: Path, out: Path, executed: Path) -> None:
    params = json.dumps({**spec["params"], "n_boot": BOOT})
    subprocess.run(
        [
            sys.executable,
            "-m",
            "papermill",
            "--no-progress-bar",
            "-k",
            "python3",
            spec["notebook"],
            str(executed),
            "-p",
            "tables_dir",
            str(tables),
            "-p",
            "config_path",
            str(config),
            "-p",
            "out_dir",
            str(out),
            "-y",
            params,
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    pictures = [str(out / Path(p).name) for p in spec["outputs"] if p.endswith(".png")]
    if pictures:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ctxpolicy",
                "provenance",
                "record",
                *pictures,
                "--config",
                str(config),
                "--notebook",
                str(executed),
                "--inputs",
                str(tables / "runs.parquet"),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )


def synthetic(task_cap: int, only: list[str] | None = None, keep: Path | None = None) -> Path:
    from ctxpolicy.figures.catalog import targets_for
    from ctxpolicy.figures.inputs import read_study
    from ctxpolicy.testing.paper import build_tables, make_paper_dataset

    target = GALLERY / "synthetic"
    with tempfile.TemporaryDirectory(prefix="ctxpolicy-gallery-") as tmp:
        data = Path(tmp) / "data"
        config = make_paper_dataset(data, task_cap=task_cap, processes=2)
        tables = build_tables(data, processes=2, audit_attempts=1)
        targets = targets_for(read_study(config))
        unknown = sorted(set(only or ()) - set(targets))
        if unknown:
            raise SystemExit(f"render_gallery: no figure target {', '.join(unknown)}")
        specs = [
            s
            for name, s in targets.items()
            if s["variant_of"] is None
            and (keep or any(p.endswith(".png") for p in s["outputs"]))
            and (not only or name in only)
        ]
        out, executed = Path(tmp) / "figures", Path(tmp) / "notebooks"
        executed.mkdir()
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(
                pool.map(
                    lambda s: _papermill(
                        s,
                        tables,
                        config,
                        out,
                        executed / Path(s["notebook"]).name.replace(".ipynb", f"-{s['params'].get('name', '')}.ipynb"),
                    ),
                    specs,
                )
            )
        if keep:
            _replace(keep, sorted(out.iterdir()), whole=False)
            return keep
        _replace(target, sorted(out.glob("*.png")) + sorted(out.glob("*.png.prov.json")), whole=not only)
    return target


def local(figures_dir: Path) -> Path:
    found = [
        p
        for pattern in ("*.png", "*.png.prov.json", "table*.md", "table*.md.prov.json")
        for p in sorted(figures_dir.glob(pattern))
    ]
    if not found:
        raise SystemExit(f"render_gallery: no PNG in {figures_dir} (run bash scripts/study.sh first)")
    target = GALLERY / "local"
    _replace(target, found)
    return target


def _replace(target: Path, files: list[Path], whole: bool = True) -> None:
    if whole:
        shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copy2(path, target / path.name)
    print(f"{len(files)} files -> {target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="gallery", required=True)
    syn = sub.add_parser("synthetic", help="the paper-shaped synthetic renders")
    syn.add_argument("--task-cap", type=int, default=25, help="tasks per cohort (default 25)")
    syn.add_argument("--only", nargs="+", metavar="STEM", help="render these figure targets alone")
    syn.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="keep every file of every main target (tables too) in DIR, not the gallery",
    )
    loc = sub.add_parser("local", help="a local study's renders")
    loc.add_argument("figures_dir", type=Path)
    args = parser.parse_args(argv)
    if args.gallery == "synthetic":
        if args.out and args.out.exists() and any(args.out.iterdir()):
            parser.error(f"--out {args.out}: not empty (give a new folder)")
        synthetic(args.task_cap, args.only, args.out.resolve() if args.out else None)
    else:
        local(args.figures_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
