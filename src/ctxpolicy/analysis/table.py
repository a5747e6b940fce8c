"""The events table (``events.parquet``): one row per compression step of every run (its columns
here, its rows from ``analysis.audit``)."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from ctxpolicy.analysis.anchors import KINDS
from ctxpolicy.atomic import atomic_write_bytes

EVENTS = "events.parquet"

IDENTITY = (
    "cell",
    "track",
    "benchmark",
    "model",
    "policy",
    "primitive",
    "trigger",
    "depth",
    "threshold_setting",
    "summarizer",
    "task_id",
    "attempt",
)
COUNTS = (
    "anchors_before",
    "anchors_at_risk",
    "anchors_kept",
    "anchors_summarised",
    "anchors_lost",
    *(f"lost_{k}" for k in KINDS),
    "constraints_at_risk",
    "constraints_kept",
    "constraints_preserved",
    "constraints_lost",
    "constraints_contradicted",
    "removed_outputs",
    "reacq_commands",
    "reacq_of_lost",
    "retrieval_after",
    "commands_after",
    "steps_after",
)
COLUMNS = (
    "run_dir",
    *IDENTITY,
    "outcome",
    "event",
    "call_index",
    "step",
    "primitives",
    "event_depth",
    "n_stages",
    "summary_calls",
    "window_tokens_before",
    "total_tokens_before",
    "total_tokens_after",
    *COUNTS,
    "steps_to_reacq",
    "judge_model",
    "judge_endpoint",
    "judge_template_sha256",
    "lost_anchors",
)


def empty_row_types() -> Mapping[str, str]:
    """pandas dtypes of the columns, so an empty table still has its schema."""
    ints = set(COUNTS) | {"event", "call_index", "step", "n_stages", "summary_calls", "attempt"}
    return {c: ("Int64" if c in ints else "Float64" if c in ("depth", "event_depth") else "object") for c in COLUMNS}


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
