"""The cost methods, listed once (``TABLE``): every reader of cost methods derives from it.

The config's ``metrics.cost_method`` check, ``ctxpolicy cost``, ``compare --cost-method``, the
runs and calls tables' columns, the decomposition, the figures' method lists, ``imported_replay``
and ``view`` ask this module; a new method is one module (a ``CostMethod``, ``base``) and one row
here. ``method(name)`` is the one validation of a method name. ``registered`` adds a method for
the length of a ``with`` block (tests).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.metrics.cost_methods import anthropic, estimated, exact, measured, openai, profile
from ctxpolicy.metrics.cost_methods.base import (
    CostMethod,
    Counts,
    PrefixTree,
    PrefixTrees,
    RunCalls,
    Sequences,
    SourceCalls,
)

TABLE: list[CostMethod] = [
    estimated.METHOD,
    exact.METHOD,
    measured.METHOD,
    openai.METHOD,
    anthropic.METHOD,
    profile.METHOD,
]
DEFAULT = "estimated"  # the schema's default for metrics.cost_method

__all__ = [
    "TABLE",
    "DEFAULT",
    "CostMethod",
    "Counts",
    "PrefixTree",
    "PrefixTrees",
    "RunCalls",
    "Sequences",
    "SourceCalls",
]


class UnknownMethodError(CtxpolicyError, ValueError):
    pass


def methods() -> tuple[CostMethod, ...]:
    return tuple(TABLE)


def names() -> tuple[str, ...]:
    return tuple(m.name for m in TABLE)


def method(name: str) -> CostMethod:
    """The method called ``name``; ``UnknownMethodError`` naming the allowed ones otherwise."""
    for entry in TABLE:
        if entry.name == name:
            return entry
    raise UnknownMethodError(f"cost method {name!r} unknown; allowed: {', '.join(names())}")


def billed_columns() -> dict[str, str]:
    """Method name -> its runs-table billed column."""
    return {m.name: m.billed_column for m in TABLE}


def run_columns() -> tuple[str, ...]:
    return tuple(c for m in TABLE for c in m.run_columns)


def calls_columns() -> tuple[str, ...]:
    return tuple(c for m in TABLE for c in m.calls_columns)


def descriptions() -> dict[str, str]:
    return {m.name: m.description for m in TABLE}


def count_all(calls: RunCalls, block: int) -> dict[str, Counts | None]:
    """Every method's per-call counts of one run (None where a method cannot price it)."""
    return {m.name: m.counts(calls, block) for m in TABLE}


def _check(entry: CostMethod) -> None:
    taken = {m.name for m in TABLE} | {m.key for m in TABLE}
    if entry.name in taken or entry.key in taken:
        raise ValueError(f"cost method {entry.name!r} (key {entry.key!r}) is already registered")


@contextmanager
def registered(entry: CostMethod) -> Iterator[CostMethod]:
    """``entry`` in the table for the block's length (a throwaway method in a test)."""
    _check(entry)
    TABLE.append(entry)
    try:
        yield entry
    finally:
        TABLE.remove(entry)
