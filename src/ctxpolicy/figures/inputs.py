"""What a notebook reads: the study (once, from the config file), the run and call tables, and
the pairs it draws.

A missing table is not an error here: it comes back empty, and the figure says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ctxpolicy.metrics import records
from ctxpolicy.study import Study, load_study

# The tables' columns as ``ctxpolicy aggregate`` writes them; a column an older table lacks is added empty.
RUN_COLUMNS = records.RUN_COLUMNS  # the registry's own cost methods; readers ask run_columns()
CALL_COLUMNS = (*records.CALL_RUN_COLUMNS, *records.CALL_COLUMNS)


def read_study(path: str | Path) -> Study:
    """The study a notebook draws (``ctxpolicy.study.load_study``: validated, its grid checked):
    read once, in the notebook's first cell, and handed to every figure function."""
    return load_study(path)


def _read_table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame({c: pd.Series(dtype="object") for c in columns})
    table = pd.read_parquet(path)
    for c in columns:
        if c not in table.columns:
            table[c] = pd.NA
    return table


def read_runs(tables_dir: str | Path) -> pd.DataFrame:
    return _read_table(Path(tables_dir) / "runs.parquet", records.run_columns())


def read_calls(tables_dir: str | Path) -> pd.DataFrame:
    return _read_table(Path(tables_dir) / "calls.parquet", (*records.CALL_RUN_COLUMNS, *records.call_columns()))


def combos(study: Study, block_name: str) -> list[tuple[str, str]]:
    """(benchmark, model) pairs of a grid block, model-major in config order (``Study.pairs``)."""
    return [(p.benchmark, p.model) for p in study.pairs(block_name)]


def parse_pairs(text: str | None) -> list[tuple[str, str]] | None:
    """The ``pairs`` notebook parameter: ``"qwen/swebench,qwen/terminalbench"`` → [(model,
    benchmark), ...]; an empty string means every pair (None); ``"none"`` means no pair at all
    (a numbered figure the grid has no data for: it draws a one-line note)."""
    text = (text or "").strip()
    if not text:
        return None
    if text == "none":
        return []
    pairs = []
    for item in text.split(","):
        model, sep, benchmark = item.strip().partition("/")
        if not sep or not model or not benchmark or "/" in benchmark:
            raise ValueError(f"pairs: {item.strip()!r} is not MODEL/BENCHMARK (in {text!r})")
        pairs.append((model, benchmark))
    return pairs


def select_pairs(table: pd.DataFrame, pairs: list[tuple[str, str]] | None) -> pd.DataFrame:
    """The rows of the given (model, benchmark) pairs; all rows when ``pairs`` is None."""
    if pairs is None or table.empty:
        return table if pairs is None else table.iloc[0:0]
    wanted = set(pairs)
    keys = zip(table["model"].astype("object"), table["benchmark"].astype("object"))
    return table[[k in wanted for k in keys]]


def select(runs: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """Rows where every given column equals the value (``None`` values are ignored)."""
    mask = pd.Series(True, index=runs.index)
    for column, value in where.items():
        if value is not None:
            mask &= runs[column].astype("object") == value
    return runs[mask]


def setting_matches(settings: pd.Series, wanted: str | None) -> pd.Series:
    """True where a cell's threshold setting is ``wanted`` or the policy has none."""
    values = settings.astype("object")
    if wanted is None:
        return pd.Series(True, index=settings.index)
    return values.isna() | (values == wanted) | (values == "none")
