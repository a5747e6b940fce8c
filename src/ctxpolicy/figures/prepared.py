"""The data of one figure: a tidy table plus notes on what the config or the runs lack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class Prepared:
    table: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.table.empty

    def note_text(self) -> str:
        return " ".join(self.notes)
