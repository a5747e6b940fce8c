"""What a study run left behind, in a few lines: printed by scripts/study.sh at the end.

    python workflow/scripts/study_summary.py [--config config/config.yaml]

Cells done (those with cell.json) of the config's grid, runs by outcome, the warnings recorded
on the way (cells where most runs hit the wall-time limit, thresholds calibrated from
time-limited runs), the figures and tables written, and every figure drawn with a
"missing data" note. A figure's notes are read from FIGURES_DIR/<stem>.notes.json (a JSON list
of strings, written by the figure's notebook) or from a `notes` list in its provenance sidecar.
Reads files only; exit 0 whatever it finds (the Snakemake exit status is the verdict).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from ctxpolicy.config import ConfigError
from ctxpolicy.figures.catalog import targets_for
from ctxpolicy.study import Pair, Study, load_study, study_of


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


def summarize(study: Study) -> list[str]:
    study = study_of(study)
    results = Path(study.results_dir)
    cells = list(study.cells)
    outcomes: Counter = Counter()
    warnings: list[str] = []
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
            warnings += [f"{path}: {w}" for w in _strings(record.get("warnings"))]
    runs = ", ".join(f"{k} {v}" for k, v in outcomes.most_common()) or "none"
    lines = [f"cells done: {done} of {len(cells)}", f"runs: {sum(outcomes.values())} ({runs})"]
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
    lines.append(f"warnings: {len(warnings)}")
    lines += [f"  {w}" for w in warnings]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="config/config.yaml")
    args = parser.parse_args(argv)
    try:
        config = load_study(args.config)
    except ConfigError as exc:
        print(f"study summary: {exc}")
        return 0
    print(f"== study summary ({args.config})")
    for line in summarize(config):
        print(f"   {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
