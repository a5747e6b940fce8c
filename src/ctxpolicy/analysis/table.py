"""The events table (``events.parquet``): one row per compression step of every run."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from ctxpolicy.analysis.audit import COLUMNS, empty_row_types
from ctxpolicy.atomic import atomic_write_bytes

EVENTS = "events.parquet"


def frame(rows: Iterable[dict]) -> pd.DataFrame:
    types = empty_row_types()
    table = pd.DataFrame(list(rows), columns=list(COLUMNS))
    return table.astype({c: t for c, t in types.items() if c in table.columns})


def write_events(table: pd.DataFrame, path: str | Path) -> Path:
    buffer = io.BytesIO()
    table.to_parquet(buffer, index=False)
    return atomic_write_bytes(Path(path), buffer.getvalue())


def read_events(tables_dir: str | Path) -> pd.DataFrame:
    """``{tables_dir}/events.parquet``, or an empty table with its columns when it is missing."""
    path = Path(tables_dir) / EVENTS
    if not path.exists():
        return frame([])
    return pd.read_parquet(path)
