"""Render time and page size of the trajectory page of a long run, and the browser's time to run it.

    .venv/bin/python benchmarks/bench_view.py [--steps 250] [--prompt-tokens 100000] [--repeat 3]

Writes a synthetic FC run of STEPS agent calls whose prompts reach PROMPT_TOKENS tokens, and its
replay through OTRC+TR (events on most steps); prints, for each page, the median render time
(reading the records, pricing the calls, rendering), the page size, and the time from navigation
start to ``data-ready`` in headless Chromium (the page's ``data-ready-ms``; the browser's own
start-up, timed on a blank page, is shown apart). Targets (docs/view.md): under 2 s to render on 2 idle cores, under 2 s to ``data-ready``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from ctxpolicy.testing.views import write_large_run
from ctxpolicy.view.browser import chromium, open_page
from ctxpolicy.view.pages import write_run_page


def _browser_s(page: Path) -> tuple[float, float | None]:
    """Wall time of a headless Chromium that loads the page, and the page's own time from navigation
    start to ``data-ready`` (its ``data-ready-ms``; None on a page without it)."""
    began = time.perf_counter()
    opened = open_page(page)
    elapsed = time.perf_counter() - began
    if not re.search(r'<body[^>]* data-ready="\d+"', opened.dom) or opened.console:
        raise SystemExit(f"{page}: no data-ready, or console output: {opened.console}")
    ready = re.search(r'data-ready-ms="(\d+)"', opened.dom)
    return elapsed, int(ready[1]) / 1000 if ready else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=250)
    parser.add_argument("--prompt-tokens", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp:
        tmp = Path(tmp)
        began = time.perf_counter()
        runs = write_large_run(tmp / "runs", steps=args.steps, prompt_tokens=args.prompt_tokens)
        print(f"wrote {args.steps}-step runs in {time.perf_counter() - began:.1f} s")
        blank = tmp / "blank.html"
        blank.write_text('<!doctype html><body data-ready="1"></body>')
        startup = _browser_s(blank)[0] if chromium() else None
        if startup is not None:
            print(f"chromium start-up (blank page): {startup:.2f} s")
        for name, run in runs.items():
            out = tmp / f"{name}.html"
            times = []
            for _ in range(args.repeat):
                began = time.perf_counter()
                write_run_page(run, out, "estimated")
                times.append(time.perf_counter() - began)
            size = out.stat().st_size
            line = (
                f"{name:8s} render {statistics.median(times):.2f} s (median of {args.repeat}), page {size / 1e6:.2f} MB"
            )
            if startup is not None:
                wall, ready = _browser_s(out)
                line += f", data-ready {ready:.2f} s after navigation (browser wall {wall:.2f} s)"
            print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
