"""The data of one figure: a tidy table, notes on what the config or the runs lack, and the n
behind it where it is small."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class Prepared:
    table: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # other tables the figure draws besides ``table`` (e.g. Figure 3's frequency curves), by part
    extra: dict[str, pd.DataFrame] = field(default_factory=dict)
    # the tasks and attempts behind the figure where they are few (``notes.sample_size``), else None
    n: str | None = None

    @property
    def empty(self) -> bool:
        return self.table.empty

    def note_text(self) -> str:
        return " ".join(self.notes)

    def said(self, *first: str) -> list[str]:
        """What the figure's footnote says (``notes.finish``): ``first`` (e.g. a footer), the
        notes, then the n where it is small."""
        return [*first, *self.notes, *([self.n] if self.n else [])]

    def numbers(self) -> pd.DataFrame:
        """Every number the figure draws, as one table (``{stem}.data.csv``): ``table`` and, when
        the figure draws more than one table, each of ``extra`` with a ``part`` column saying which."""
        parts = [(name, frame) for name, frame in self.extra.items() if frame is not None and not frame.empty]
        if not parts:
            return _flat(self.table)
        frames = [_flat(self.table).assign(part="main")] if not self.table.empty else []
        frames += [_flat(frame).assign(part=name) for name, frame in parts]
        out = pd.concat(frames, ignore_index=True)
        return out[["part", *[c for c in out.columns if c != "part"]]]


def _flat(table: pd.DataFrame) -> pd.DataFrame:
    """Lists (e.g. the tasks gained) as ``;``-joined text, so the CSV reads back the same."""
    if table.empty:
        return table
    out = table.copy()
    for column in out.columns:
        values = out[column].astype(object)  # a categorical column maps its categories, not its values
        if any(isinstance(v, (list, tuple, set)) for v in values):
            out[column] = values.map(lambda v: ";".join(map(str, v)) if isinstance(v, (list, tuple, set)) else v)
    return out
