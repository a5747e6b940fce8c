"""The one interface every cost method implements, and the calls it reads (pure).

A cost method says how many of each agent call's prompt tokens a provider serves from its cache
(``cached``) and how many it writes to it at a premium (``written``, a subset of the fresh ones);
``ctxpolicy.metrics.cost.billed`` turns those counts into C = N_fresh + d N_cached + w N_written
+ N_summary. What a method needs from a run (``needs``) decides whether it can price the run:
a run without message sequences has no ``exact`` count, one without server-reported cached
tokens no ``measured`` bill. The methods themselves are listed once, in
``ctxpolicy.metrics.cost_methods.TABLE``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ctxpolicy.metrics.segments import run_sums

# what a method may need beyond prompt sizes: each is a field of RunCalls that may be missing
SEQUENCES = "sequences"  # the calls' message sequences (codes, local token counts)
REPORTED = "reported_cached"  # the server-reported cached tokens of every agent call
TIMES = "start"  # call start times (a method that needs them still prices a run without them)
SOURCE = "source"  # the source run's agent calls, for a replay (or the run itself)
NEEDS = (SEQUENCES, REPORTED, TIMES, SOURCE)


@dataclass(frozen=True)
class Sequences:
    """The agent calls' message sequences laid end to end: ``lengths[k]`` codes per call (equal
    codes, equal messages) and each code's local token count."""

    codes: np.ndarray
    tokens: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, sequences: list, tokens: list) -> Sequences:
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))

        def flat(parts: list) -> np.ndarray:
            if not len(parts) or not lengths.sum():
                return np.zeros(0, np.int64)
            return np.concatenate(parts).astype(np.int64)

        return cls(flat(sequences), flat(tokens), lengths)

    def split(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        bounds = np.cumsum(self.lengths)[:-1]
        return np.split(self.codes, bounds), np.split(self.tokens, bounds)


@dataclass(frozen=True)
class PrefixTree:
    """One run's agent prompts as paths in a tree of whole-message prefixes (what a version-2
    record's encoding gives, ``metrics.encoded_prompts``): node 0 is the empty prompt, every other
    node one message longer than its parent, equal prefixes one node. The methods that start from
    the ideal cache walk it (``metrics.cost.shared_prefix_tokens``, ``anthropic``), a few hundred
    nodes a run where the prompts laid end to end hold thousands of positions."""

    parent: np.ndarray  # per node, its parent (-1 for node 0); int64, as every array here
    tokens: np.ndarray  # per node, the local tokens of its prefix (its messages' counts summed)
    first: np.ndarray  # per node, its ancestor one message long (0 for node 0)
    ends: np.ndarray  # per agent call, the node of its whole prompt
    lengths: np.ndarray  # per agent call, its number of messages
    positions: Callable[[], Sequences]  # the same prompts laid end to end, made when a method reads them


class PrefixTrees:
    """Several runs' ``PrefixTree``s, in the runs' order, read as their ``Sequences`` laid end to
    end: ``lengths`` at once, ``codes`` and ``tokens`` made (once) when a method reads them."""

    def __init__(self, trees: list[PrefixTree]) -> None:
        self.trees = trees
        self.lengths = trees[0].lengths if len(trees) == 1 else np.concatenate([t.lengths for t in trees])

    @functools.cached_property
    def _laid_out(self) -> Sequences:
        parts = [tree.positions() for tree in self.trees]
        if len(parts) == 1:
            return parts[0]
        return Sequences(
            *(np.concatenate([getattr(p, name) for p in parts]) for name in ("codes", "tokens")), self.lengths
        )

    @property
    def codes(self) -> np.ndarray:
        return self._laid_out.codes

    @property
    def tokens(self) -> np.ndarray:
        return self._laid_out.tokens

    def local_tokens(self) -> np.ndarray:
        """Per agent call, the local tokens of its whole prompt."""
        return np.concatenate([tree.tokens[tree.ends] for tree in self.trees]).astype(np.int64, copy=False)


@dataclass(frozen=True)
class SourceCalls:
    """A replay's source run as the measured profile reads it, one entry per agent call: the
    provider's prompt and cached tokens (NaN where not reported) and the local count of the prompt."""

    prompts: np.ndarray
    reported_cached: np.ndarray
    local: np.ndarray


@dataclass(frozen=True)
class RunCalls:
    """One run's agent calls, in order, as every cost method reads them (one entry per call)."""

    prompts: np.ndarray  # server-reported prompt tokens (int)
    reported_cached: np.ndarray | None = None  # float, NaN where the server did not report
    otrc: np.ndarray | None = None  # bool: an OTRC event at this call
    unchanged: np.ndarray | None = None  # local tokens no event changed (-1 unknown)
    before: np.ndarray | None = None  # local tokens of the history before the first event (-1)
    after: np.ndarray | None = None  # local tokens of the history sent (est_tokens_after; -1)
    start: np.ndarray | None = None  # float seconds, NaN where unknown
    sequences: Sequences | PrefixTrees | None = None
    source: SourceCalls | None = None
    # several runs' agent calls laid end to end, ``runs[r]`` calls each (None: one run); only a
    # method with ``count_runs`` is handed such calls (``cost_methods.count_runs``)
    runs: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompts", np.asarray(self.prompts, dtype=np.int64))
        object.__setattr__(self, "_memo", {})

    def ideal_shared(self) -> np.ndarray:
        """Each call's longest whole-message prefix shared with an earlier call, rescaled to its
        server prompt and not floored to blocks (``metrics.cost.exact_cached_flat`` with block 1),
        computed once per run for every method that starts from the ideal cache."""
        from ctxpolicy.metrics.cost import exact_cached_flat, rescaled, shared_prefix_tokens

        if "ideal" not in self._memo:
            s = self.sequences
            if isinstance(s, PrefixTrees):
                shared, local = shared_prefix_tokens(s.trees)
                self._memo["ideal"] = rescaled(shared, local, self.prompts, 1)
            else:
                self._memo["ideal"] = exact_cached_flat(
                    s.codes, s.tokens, s.lengths, self.prompts, 1, prefixes=self.prefix_codes(), call=self.call_of()
                )
        return self._memo["ideal"]

    def local_tokens(self) -> np.ndarray:
        """Per call, the local tokens of its whole prompt (its messages' counts summed)."""
        s = self.sequences
        return s.local_tokens() if isinstance(s, PrefixTrees) else run_sums(s.tokens, s.lengths)

    def prefix_codes(self) -> np.ndarray:
        """Per position of the sequences, its whole-message prefix as a number (equal numbers,
        equal prefixes; ``metrics.cost.prefix_codes``), computed once per run."""
        from ctxpolicy.metrics.cost import prefix_codes

        if "prefixes" not in self._memo:
            s = self.sequences
            self._memo["prefixes"] = prefix_codes(s.codes, s.lengths, None if self.runs is None else self.runs)
        return self._memo["prefixes"]

    def call_of(self) -> np.ndarray:
        """Per position of the sequences, the call it belongs to, computed once per run."""
        if "call" not in self._memo:
            self._memo["call"] = np.repeat(np.arange(len(self.sequences.lengths)), self.sequences.lengths)
        return self._memo["call"]

    def __len__(self) -> int:
        return len(self.prompts)

    def has(self, need: str) -> bool:
        value = getattr(self, need)
        if need == REPORTED:
            return value is not None and len(self) > 0 and not np.isnan(np.asarray(value, dtype=float)).any()
        if need == TIMES:
            return True  # optional: a method that reads times falls back where they are missing
        return value is not None

    def filled(self, name: str, fill) -> np.ndarray:
        value = getattr(self, name)
        return np.full(len(self), fill) if value is None else np.asarray(value)


@dataclass(frozen=True)
class Counts:
    """A method's per-call counts, server tokens: cached, and written (a subset of the fresh)."""

    cached: np.ndarray
    written: np.ndarray | None = None

    def written_or_zero(self) -> np.ndarray:
        return np.zeros(len(self.cached), dtype=np.int64) if self.written is None else self.written


@dataclass(frozen=True)
class CostMethod:
    """One cost method: its name (config ``metrics.cost_method``, ``--cost-method``), its column
    key (``billed_{key}``, ``fresh_{key}``, ``cached_{key}`` in the runs table; ``cached_{key}`` in
    the calls table unless ``call_column`` says otherwise), a short label and a one-line
    description, what it needs from a run, the write premium of its written tokens (in fresh-token
    units: 0.25 for a write billed at 1.25 a fresh token) and the function that counts."""

    name: str
    key: str
    label: str
    description: str
    count: object  # (RunCalls, block) -> Counts | None
    needs: tuple[str, ...] = ()
    writes: bool = False
    write_premium: float = 0.0
    call_column: str | None = field(default=None)
    compared: bool = False  # ``ctxpolicy cost`` warns where it is far from the reference bill
    # ``count`` for several runs at once (``RunCalls.runs``), every run having what ``needs`` names
    # but REPORTED: the cached counts as floats, NaN for the calls of a run it cannot price; None:
    # the method is counted run by run
    count_runs: object | None = None

    def counts(self, calls: RunCalls, block: int) -> Counts | None:
        """The per-call counts, or None where the run lacks what the method needs."""
        if len(calls) == 0:
            return Counts(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64) if self.writes else None)
        if not all(calls.has(need) for need in self.needs):
            return None
        return self.count(calls, block)

    @property
    def billed_column(self) -> str:
        return f"billed_{self.key}"

    @property
    def fresh_column(self) -> str:
        return f"fresh_{self.key}"

    @property
    def cached_column(self) -> str:
        return f"cached_{self.key}"

    @property
    def written_column(self) -> str:
        return f"written_{self.key}"

    @property
    def run_columns(self) -> tuple[str, ...]:
        """This method's runs-table columns, in order."""
        return (
            self.billed_column,
            self.fresh_column,
            self.cached_column,
            *((self.written_column,) if self.writes else ()),
        )

    @property
    def calls_columns(self) -> tuple[str, ...]:
        """This method's calls-table columns (none where the calls table holds them already)."""
        if self.call_column is not None:
            return ()
        return (self.cached_column, *((self.written_column,) if self.writes else ()))


def run_calls_of(
    agent_calls: list[dict], sequences: Sequences | None = None, source: SourceCalls | None = None
) -> RunCalls:
    """``RunCalls`` from one run's agent calls as ``calls.jsonl`` lines (dicts, in order): prompt
    and cached tokens, start times, ``est_tokens_after`` and each step's compression events;
    ``source``, a replay's source calls (default: the run is its own source)."""
    from ctxpolicy.metrics.cost import has_otrc, unchanged_prefix

    def number(call: dict, key: str, missing: float) -> float:
        value = call.get(key)
        return missing if value is None else float(value)

    where = [unchanged_prefix(c.get("events") or []) or (-1, -1) for c in agent_calls]
    if source is None:
        prompts = np.array([number(c, "prompt_tokens", 0) for c in agent_calls], dtype=np.float64)
        local = np.array([number(c, "est_tokens_after", np.nan) for c in agent_calls], dtype=np.float64)
        source = SourceCalls(
            prompts,
            np.array([number(c, "cached_tokens", np.nan) for c in agent_calls], dtype=np.float64),
            np.where(np.isnan(local), prompts, local),
        )
    return RunCalls(
        np.array([c.get("prompt_tokens") or 0 for c in agent_calls], dtype=np.int64),
        reported_cached=np.array([number(c, "cached_tokens", np.nan) for c in agent_calls], dtype=np.float64),
        otrc=np.array([has_otrc(c.get("events")) for c in agent_calls], dtype=bool),
        unchanged=np.array([w[0] for w in where], dtype=np.int64),
        before=np.array([w[1] for w in where], dtype=np.int64),
        after=np.array([number(c, "est_tokens_after", -1) for c in agent_calls], dtype=np.int64),
        start=np.array([number(c, "start", np.nan) for c in agent_calls], dtype=np.float64),
        sequences=sequences,
        source=source,
    )
