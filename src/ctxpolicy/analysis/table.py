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


def check_rows(rows: list[dict]) -> None:
    """Raise as ``frame(rows)`` would when a value does not fit its column; the frame is only
    built when some value is not plainly of its column's type (an int within int64, or None, in
    an integer column; an int, float or None in a float column): a run's rows usually are, and
    building a frame per run was a tenth of the audit's time."""
    types = empty_row_types()
    ints = [c for c, t in types.items() if t == "Int64"]
    floats = [c for c, t in types.items() if t == "Float64"]
    for row in rows:
        for name in ints:
            value = row.get(name)
            if value is not None and not (type(value) is int and _INT64[0] <= value <= _INT64[1]):
                frame(rows)
                return
        for name in floats:
            value = row.get(name)
            if value is not None and type(value) not in (int, float):
                frame(rows)
                return


_INT64 = (-(2**63), 2**63 - 1)


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
