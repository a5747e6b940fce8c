"""``ctxpolicy compare``'s text view: a table a person reads in a terminal.

The default columns fit 120 characters; ``--columns`` names others (``all`` for every one). Each
header says its unit or that it is a ratio to the baseline (``/ FC``); numbers are rounded for
reading (rates in percent, differences in percentage points, ratios to two decimals). Full
precision stays in ``--json`` and ``--csv``. Pure: a table in, text out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_COLUMNS = (
    "policy",
    "setting",
    "summarizer",
    "n",
    "resolve",
    "baseline_resolve",
    "resolve_delta",
    "tokens",
    "cost",
)
WIDTH = 120  # the default view's promise, checked by tests/test_metrics_compare_cli.py


def _label(value) -> str:
    return "-" if value is None or value != value or value == "" else str(value)


def _pct(value) -> str:
    return "-" if value != value else f"{100 * value:.1f}"


def _interval(key: str, scale: float = 1.0, digits: int = 2) -> Callable[[dict], str]:
    def render(row: dict) -> str:
        est, lo, hi = (row[f"{key}_{s}"] for s in ("est", "lo", "hi"))
        if est != est:
            return "-"
        return f"{scale * est:.{digits}f} [{scale * lo:.{digits}f}, {scale * hi:.{digits}f}]"

    return render


@dataclass(frozen=True)
class Column:
    header: str  # "{b}" stands for the baseline's name
    render: Callable[[dict], str]
    needs: str | None = None  # a table column without which the column is not offered


COLUMNS: dict[str, Column] = {
    "benchmark": Column("benchmark", lambda r: _label(r["benchmark"])),
    "model": Column("model", lambda r: _label(r["model"])),
    "policy": Column("policy", lambda r: _label(r["policy"])),
    "setting": Column("setting", lambda r: _label(r["setting"])),
    "summarizer": Column("summarizer", lambda r: _label(r["summarizer"])),
    "n": Column("tasks", lambda r: str(r["n_tasks"])),
    "resolve": Column("resolve (%)", lambda r: _pct(r["resolve_rate"])),
    "baseline_resolve": Column("{b} resolve (%)", lambda r: _pct(r["baseline_resolve_rate"])),
    "resolve_delta": Column("Δ resolve (pp)", _interval("resolve_delta", 100, 1)),
    "tokens": Column("tokens / {b}", _interval("tokens_ratio")),
    "latency": Column("latency / {b}", _interval("latency_ratio")),
    "cost": Column("cost / {b}", _interval("cost_ratio")),
    "calls_change": Column("calls Δ (%)", _interval("calls_change", 100, 1)),
    "solved": Column("solved (tasks)", lambda r: str(r["solved"])),
    "baseline_solved": Column("{b} solved (tasks)", lambda r: str(r["baseline_solved"])),
    "gains": Column("gains (tasks)", lambda r: str(r["gains"])),
    "losses": Column("losses (tasks)", lambda r: str(r["losses"])),
    "left_out": Column("left out (tasks)", lambda r: str(r["left_out_tasks"])),
    "cost_mechanical": Column("cost mechanical / {b}", _interval("cost_mechanical"), "cost_mechanical_est"),
    "cost_behavioural": Column("cost behavioural (×)", _interval("cost_behavioural"), "cost_mechanical_est"),
}


def parse_columns(text: str) -> tuple[str, ...]:
    """``--columns``: names separated by commas, or ``all``; ValueError naming an unknown one."""
    if text.strip() == "all":
        return tuple(COLUMNS)
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if name not in COLUMNS]
    if unknown or not names:
        raise ValueError(
            f"--columns {text!r}: unknown {', '.join(unknown) or '(empty)'}; allowed: all, {', '.join(COLUMNS)}"
        )
    return names


def text_table(table, *, baseline: str, note: str, columns: tuple[str, ...] = DEFAULT_COLUMNS) -> str:
    """The aligned view of a comparison table: ``note`` first, then one block per (benchmark,
    model) under a ``# benchmark / model`` line unless those are columns themselves; in the
    default view the summarizer column only where some cell has a summarizer."""
    rows = table.to_dict("records")
    chosen = [
        name
        for name in columns
        if (COLUMNS[name].needs is None or COLUMNS[name].needs in table)
        and not (
            name == "summarizer" and columns == DEFAULT_COLUMNS and all(_label(r["summarizer"]) == "-" for r in rows)
        )
    ]
    grouped = "benchmark" not in chosen and "model" not in chosen
    header = [COLUMNS[name].header.format(b=baseline) for name in chosen]
    blocks: dict[tuple, list[list[str]]] = {}
    for row in rows:
        key = (_label(row["benchmark"]), _label(row["model"])) if grouped else ()
        blocks.setdefault(key, []).append([COLUMNS[name].render(row) for name in chosen])
    lines = [header, *(line for block in blocks.values() for line in block)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def aligned(line: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip()

    text = [note]
    for key, block in blocks.items():
        if grouped:
            text.append(f"# {key[0]} / {key[1]}")
        text += [aligned(header), *(aligned(line) for line in block)]
    return "\n".join(text) + "\n"
