"""What a study run left behind, in a few lines: printed by scripts/study.sh at the end.

    python workflow/scripts/study_summary.py [--config config/config.yaml]

Cells done (those with cell.json) of the config's grid, runs by outcome, the warnings recorded
on the way (cells where most runs hit the wall-time limit, thresholds calibrated from
time-limited runs), the figures and tables written, and every figure drawn with a
"missing data" note, and where the cells' trajectory pages are. A figure's notes are read from FIGURES_DIR/<stem>.notes.json (a JSON list
of strings, written by the figure's notebook) or from a `notes` list in its provenance sidecar.
Reads files only; exit 0 whatever it finds (the Snakemake exit status is the verdict).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from ctxpolicy.study.config import ConfigError
from ctxpolicy.figures.catalog import targets_for
from ctxpolicy.metrics.calibrate import sweep_warnings
from ctxpolicy.study import Pair, Study, load_study


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _strings(value) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def figure_notes(output: Path) -> list[str]:
    """The missing-data notes a figure recorded (notes file or provenance sidecar)."""
    notes = _strings(_json(output.with_name(f"{output.stem}.notes.json")))
    sidecar = _json(output.with_name(output.name + ".prov.json"))
    if isinstance(sidecar, dict):
        notes += [n for n in _strings(sidecar.get("notes")) if n not in notes]
    return notes


def threshold_line(benchmark: str, model: str, record: dict) -> str:
    """Whether the pair's sweep sweeps: distinct settings, each below at least one FC peak."""
    values = ", ".join(f"{s} {record.get(s)}" for s in ("tight", "primary", "loose"))
    verdict = "no (see warnings)" if sweep_warnings(record) else "yes"
    return f"thresholds {benchmark}/{model}: {values}; distinct and each below an FC peak: {verdict}"


def summarize(study: Study) -> list[str]:
    results = Path(study.results_dir)
    cells = list(study.cells)
    outcomes: Counter = Counter()
    warnings: list[str] = []
    lines_thresholds: list[str] = []
    done = 0
    for cell in cells:
        record = _json(cell.run_root(results) / "cell.json")
        if not isinstance(record, dict):
            continue
        done += 1
        outcomes.update({str(k): int(v) for k, v in (record.get("outcomes") or {}).items()})
        warnings += [f"{cell.run_root(results)}: {w}" for w in _strings(record.get("warnings"))]
    for benchmark, model in sorted({(c.benchmark, c.model) for c in cells if c.setting}):
        path = study.thresholds_file(Pair(model, benchmark))
        record = _json(path)
        if isinstance(record, dict):
            recorded = _strings(record.get("warnings"))
            warnings += [f"{path}: {w}" for w in recorded]
            warnings += [f"{path}: {w}" for w in sweep_warnings(record) if w not in recorded]
            lines_thresholds.append(threshold_line(benchmark, model, record))
    runs = ", ".join(f"{k} {v}" for k, v in outcomes.most_common()) or "none"
    lines = [f"cells done: {done} of {len(cells)}", f"runs: {sum(outcomes.values())} ({runs})", *lines_thresholds]
    outputs = [Path(p) for spec in targets_for(study).values() for p in spec["outputs"]]
    written = [p for p in outputs if p.exists()]
    missing = [str(p) for p in outputs if not p.exists()]
    lines.append(
        f"figures and tables written: {len(written)} of {len(outputs)}"
        + (f" (missing: {', '.join(missing[:6])}{', ...' if len(missing) > 6 else ''})" if missing else "")
    )
    noted = {}
    for path in written:
        notes = figure_notes(path)
        key = str(path.with_suffix(""))
        if notes and key not in noted:  # one line per figure, not per format
            noted[key] = notes
    lines.append(f"drawn with a missing-data note: {len(noted)}")
    lines += [f"  {figure}: {' | '.join(notes)}" for figure, notes in sorted(noted.items())]
    lines += trajectory_pages(study, cells)
    lines.append(f"warnings: {len(warnings)}")
    lines += [f"  {w}" for w in warnings]
    return lines


def trajectory_pages(study: Study, cells: list) -> list[str]:
    """Where each cell's trajectory index is (the view rules, results/view/), in one or two lines."""
    root = Path(study.results_dir) / "view"
    indexes = [root / c.benchmark / c.model / c.slug / "index.html" for c in cells]
    written = [p for p in indexes if p.is_file()]
    if not written:
        switch = "on" if study.view_in_all else "off: view.in_all is false"
        return [f"trajectory pages: none ({switch}; ctxpolicy view --runs CELL_DIR writes them)"]
    return [f"trajectory pages: {len(written)} of {len(cells)} cells under {root}/; open {written[0]}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    args = parser.parse_args(argv)
    try:
        study = load_study(args.config)
    except ConfigError as exc:
        print(f"study summary: {exc}")
        return 0
    print(f"== study summary ({args.config})")
    for line in summarize(study):
        print(f"   {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
