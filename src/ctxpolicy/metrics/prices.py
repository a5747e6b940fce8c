"""Price cards: what each kind of token costs a model, from litellm's price map (pure reads).

A price card is a model's dollars per token for fresh input, cached input (a cache read), cache
writes and output, taken from litellm's map of model prices (``litellm.model_cost``) as litellm
loads it offline (``LITELLM_LOCAL_MODEL_COST_MAP=True``: the JSON file shipped in the litellm
package). The file is read directly where it is found, because importing litellm takes many
seconds; otherwise litellm is imported with the offline flag set. Never a price table of ours.
A model the map lacks is a ``PriceError`` naming the closest names (difflib). A missing cache
price falls back to the fresh input price (the provider bills no discount and no write premium).
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError

MAP_FILE = "model_prices_and_context_window_backup.json"  # what litellm.model_cost loads offline
NOT_MODELS = {"sample_spec"}


class PriceError(CtxpolicyError, ValueError):
    pass


@dataclass(frozen=True)
class PriceCard:
    """Dollars per token of one model."""

    model: str
    input: float
    cached_input: float
    cache_write: float
    output: float

    @property
    def read_discount(self) -> float:
        """A cached token's price relative to a fresh one (the cost formula's discount)."""
        return self.cached_input / self.input if self.input else 1.0

    @property
    def write_premium(self) -> float:
        """What a cache write costs beyond a fresh token, relative to a fresh one."""
        return self.cache_write / self.input - 1.0 if self.input else 0.0

    def dollars(self, fresh: int, cached: int, written: int, output: int) -> float:
        """The bill of ``fresh`` input tokens (``written`` of them written to the cache), ``cached``
        ones read from it and ``output`` tokens."""
        written = min(written, fresh)
        return (
            (fresh - written) * self.input
            + written * self.cache_write
            + cached * self.cached_input
            + output * self.output
        )

    def breakdown(self, fresh: int, cached: int, written: int, output: int) -> dict[str, float]:
        """The dollars of each kind of token, and their total."""
        written = min(written, fresh)
        parts = {
            "fresh_input": (fresh - written) * self.input,
            "cached_input": cached * self.cached_input,
            "cache_writes": written * self.cache_write,
            "output": output * self.output,
        }
        return {**parts, "total": sum(parts.values())}


@functools.lru_cache(maxsize=1)
def model_cost() -> dict:
    """litellm's price map, offline."""
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / MAP_FILE
        if path.is_file():
            return json.loads(path.read_text(encoding="utf-8"))
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm  # slow: only where the map file is not where litellm keeps it

    return dict(litellm.model_cost)


def _price(entry: dict, key: str) -> float | None:
    value = entry.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def price_card(model: str) -> PriceCard:
    """The price card of ``model`` (a name of litellm's map, e.g. ``gpt-4o``,
    ``claude-sonnet-4-5``, ``openrouter/anthropic/claude-sonnet-4``); ``PriceError`` otherwise."""
    costs = model_cost()
    entry = costs.get(model) if model not in NOT_MODELS else None
    if not isinstance(entry, dict) or _price(entry, "input_cost_per_token") is None:
        names = [name for name in costs if name not in NOT_MODELS]
        close = difflib.get_close_matches(model, names, n=5, cutoff=0.6)
        hint = f"; close matches: {', '.join(close)}" if close else ""
        why = "has no input price per token" if isinstance(entry, dict) else "is not in litellm's price map"
        raise PriceError(f"price model {model!r} {why}{hint}")
    fresh = _price(entry, "input_cost_per_token")
    output = _price(entry, "output_cost_per_token")
    read = _price(entry, "cache_read_input_token_cost")
    write = _price(entry, "cache_creation_input_token_cost")
    return PriceCard(
        model=model,
        input=fresh,
        cached_input=fresh if read is None else read,
        cache_write=fresh if not write else write,
        output=0.0 if output is None else output,
    )


def run_dollars(runs, method, card: PriceCard):
    """Each run's dollars at ``card``'s prices under one cost method (a ``cost_methods`` entry),
    from the runs table: its fresh (less written), written and cached input, summarizer input as
    fresh, and its completion tokens as output. NaN where the method could not price the run."""
    import pandas as pd

    def column(name: str):
        return pd.to_numeric(runs[name], errors="coerce") if name in runs else pd.Series(0.0, index=runs.index)

    written = column(method.written_column) if method.writes else pd.Series(0.0, index=runs.index)
    fresh = column(method.fresh_column) - written + column("summary_input")
    return (
        fresh * card.input
        + written * card.cache_write
        + column(method.cached_column) * card.cached_input
        + column("completion_tokens") * card.output
    )
