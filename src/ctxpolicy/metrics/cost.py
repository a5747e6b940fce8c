"""Billed input cost under a prefix cache: the counting rules the cost methods share.

C = N_fresh + discount * N_cached + w * N_written + N_summary, in units of one fresh input token
(study A.5.2; N_written, the fresh tokens a provider writes to its cache at a premium w, is zero
but for cache models that bill writes). N_fresh and N_cached split the agent calls'
server-reported prompts; summarizer input is always billed fresh; output tokens are not part of
C. The methods themselves (estimated, exact, measured and the provider cache models) are listed
once in ``ctxpolicy.metrics.cost_methods``; this module holds the rules they count with:

``estimated_cached``   the study's reconstruction from successive server-reported prompt sizes
                       and the recorded OTRC events;
``exact_cached_flat``  a prefix-cache simulation: the longest whole-message prefix call k shares
                       with any earlier agent call, measured in local cl100k_base message counts
                       and rescaled to the call's server-reported prompt.

Every count that enters C is in server tokens. Written here rather than taken from a library:
no maintained package prices prefix caching from recorded message sequences, and the estimate
is the study's own rule (docs/metrics.md, section 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ctxpolicy.metrics.segments import run_sums
from ctxpolicy.metrics import tree_kernels

DEFAULT_BLOCK = 16
DEFAULT_DISCOUNT = 0.1
LARGE_DROP_TOKENS = 1000
LARGE_DROP_SHARE = 0.25
OTRC = "OTRC"

# Random odd multipliers make the position-weighted sum below a 64-bit hash of each prefix.
_MIX = np.random.default_rng(20260101).integers(1, 2**63, size=2, dtype=np.uint64) | np.uint64(1)
_RUN_MIX = np.uint64(0xD6E8FEB86659FD93)  # odd: a run's offset, so that runs share no prefix number


def floor_block(tokens: np.ndarray | int, block: int) -> np.ndarray:
    return (np.asarray(tokens, dtype=np.int64) // block) * block


def exact_cached(
    sequences: list[np.ndarray], tokens: list[np.ndarray], prompts: np.ndarray, block: int = DEFAULT_BLOCK
) -> np.ndarray:
    """Cached tokens of each agent call from its message sequence (the ``exact`` method).

    ``sequences[k]`` holds integer message codes of agent call k in the order sent (equal
    codes = equal messages), ``tokens[k]`` their local (cl100k_base) token counts, ``prompts[k]``
    the call's server-reported prompt. The result is in server tokens (see ``exact_cached_flat``).
    """
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    if lengths.sum() == 0:
        return np.zeros(len(sequences), dtype=np.int64)
    return exact_cached_flat(np.concatenate(sequences), np.concatenate(tokens), lengths, prompts, block)


def exact_cached_flat(
    codes: np.ndarray,
    tokens: np.ndarray,
    lengths: np.ndarray,
    prompts: np.ndarray,
    block: int = DEFAULT_BLOCK,
    *,
    prefixes: np.ndarray | None = None,
    call: np.ndarray | None = None,
) -> np.ndarray:
    """``exact_cached`` on the calls' sequences laid end to end (``lengths[k]`` codes each).

    A prefix of call k is cached when any earlier call sent the same prefix. The set of such
    prefixes is closed under shortening, so the number of call k's prefixes seen before is the
    length of its longest shared prefix. Prefixes are compared by a 64-bit hash of
    (code, position) terms summed along the sequence (``prefix_codes``; ``prefixes``: those
    codes, already computed); calls are laid out in order, so the first occurrence of a prefix
    belongs to the earliest call that sent that prefix (``call``: each position's call, already
    computed).

    The shared prefix is found and measured in local tokens (L_shared of the call's L_total);
    it is then rescaled to the server's tokenizer as floor(P_k * L_shared / L_total), floored to
    whole blocks, so that cached and fresh are both server counts (never more than P_k).
    """
    n = len(lengths)
    prompts = np.asarray(prompts, dtype=np.int64)
    if n == 0 or lengths.sum() == 0:
        return np.zeros(n, dtype=np.int64)
    prefixes = prefix_codes(codes, lengths) if prefixes is None else prefixes
    call = np.repeat(np.arange(n), lengths) if call is None else call

    shared = call[_first_occurrence(prefixes)] < call
    # per call, the sums of its positions' tokens (whole numbers: the sums of a cumulative sum)
    return rescaled(run_sums(np.where(shared, tokens, 0), lengths), run_sums(tokens, lengths), prompts, block)


def rescaled(shared_tokens: np.ndarray, local_tokens: np.ndarray, prompts: np.ndarray, block: int) -> np.ndarray:
    """A shared prefix of ``shared_tokens`` local tokens of a call's ``local_tokens``, in server
    tokens: floor(P_k * L_shared / L_total), never more than P_k, floored to whole blocks."""
    prompts = np.asarray(prompts, dtype=np.int64)
    cached = np.asarray(shared_tokens, dtype=np.int64) * prompts // np.maximum(local_tokens, 1)
    return floor_block(np.minimum(cached, prompts), block)


def shared_prefix_tokens(trees) -> tuple[np.ndarray, np.ndarray]:
    """``exact_cached_flat``'s counts over prefix trees (``cost_methods.base.PrefixTree``, one a
    run): per agent call, the local tokens of its longest prefix an earlier agent call of its run
    sent, and of its whole prompt. The prefixes earlier calls sent are the nodes on their paths:
    a call's path is walked up to the first such node, then marked on the way up, so that each
    node is marked once and the work goes with the tree's nodes, not with the prompts' positions
    (a compiled loop a run, ``tree_kernels.shared_prefixes``)."""
    shared = [tree_kernels.shared_prefixes(tree.parent, tree.tokens, tree.ends) for tree in trees]
    local = [tree.tokens[tree.ends] for tree in trees]
    if len(trees) == 1:
        return shared[0], local[0]
    none = np.zeros(0, np.int64)
    return np.concatenate([none, *shared]), np.concatenate([none, *local])


def prefix_hashes(codes: np.ndarray, lengths: np.ndarray, runs: np.ndarray | None = None) -> np.ndarray:
    """For each position of the calls' sequences laid end to end, a 64-bit hash of the call's
    prefix through it (equal hashes, equal whole-message prefixes, up to collisions). ``runs``:
    the calls belong to several runs, ``runs[r]`` calls each, and a prefix's hash holds its run
    too (a term of the run's added to the first term of each of its calls)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    # mix(((code + 1) * m0 ^ (position + 1) * m1) * m0), computed in place (uint64, wrapping)
    terms = np.asarray(codes).astype(np.uint64)
    terms += np.uint64(1)
    terms *= _MIX[0]
    position = np.arange(1, len(terms) + 1, dtype=np.uint64)
    position -= np.repeat(starts.astype(np.uint64), lengths)
    position *= _MIX[1]
    terms ^= position
    terms *= _MIX[0]
    # splitmix64's finalizer: the sum of the terms alone is near linear in the codes, and prefixes
    # of codes a few low bits apart (ids one character apart) summed to the same hash
    terms ^= terms >> np.uint64(30)
    terms *= np.uint64(0xBF58476D1CE4E5B9)
    terms ^= terms >> np.uint64(27)
    terms *= np.uint64(0x94D049BB133111EB)
    terms ^= terms >> np.uint64(31)
    if runs is not None and len(runs) > 1:
        run_of_call = np.repeat(np.arange(1, len(runs) + 1, dtype=np.uint64), runs)
        sent = lengths > 0
        terms[starts[sent]] += run_of_call[sent] * _RUN_MIX
    return _segmented_cumsum(terms, lengths)


def prefix_codes(codes: np.ndarray, lengths: np.ndarray, runs: np.ndarray | None = None) -> np.ndarray:
    """``prefix_hashes`` numbered 0, 1, 2, ... in order of first appearance: equal numbers,
    equal whole-message prefixes (the exact and Anthropic simulations share them). ``runs``:
    the calls belong to several runs, ``runs[r]`` calls each; equal prefixes of different runs
    then get different numbers."""
    import pandas as pd

    numbers, _ = pd.factorize(prefix_hashes(codes, lengths, runs))
    return numbers


def _first_occurrence(numbers: np.ndarray) -> np.ndarray:
    """For each element of ``numbers`` (numbered in order of first appearance, ``prefix_codes``),
    the position of the first element equal to it."""
    is_new = np.concatenate(([True], numbers[1:] > np.maximum.accumulate(numbers)[:-1]))
    return np.flatnonzero(is_new)[numbers]


def _segmented_cumsum(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Cumulative sum restarting at each segment (uint64, wrapping on purpose)."""
    total = np.cumsum(values, dtype=np.uint64)
    if not len(total):  # segments all empty: nothing to restart
        return total
    starts = np.cumsum(lengths) - lengths
    before = np.where(starts > 0, total[np.maximum(starts - 1, 0)], np.uint64(0))
    total -= np.repeat(before, lengths)
    return total


def unchanged_prefix(events: Sequence[Mapping]) -> tuple[int, int] | None:
    """Where one step's compression events left the history intact, in local tokens.

    Returns (U, T): U the tokens at the head of the history that no event of the step changed
    (the least ``unchanged_prefix_tokens`` of the events: a later stage works on the earlier
    stage's output, whose head up to the earlier change is still the original), T the tokens of
    the history before the first event (its ``total_tokens_before``). None without events, or
    when an event does not say (records from before ``unchanged_prefix_tokens`` existed).
    Raises ValueError naming the field when a value is not an integer >= 0.
    """
    if not events:
        return None
    for event in events:
        if not isinstance(event, Mapping):
            raise ValueError(f"event is {event!r}, not an object")
    if any(event.get("unchanged_prefix_tokens") is None for event in events):
        return None
    unchanged = min(_token_count(event, "unchanged_prefix_tokens") for event in events)
    return unchanged, _token_count(events[0], "total_tokens_before")


def _token_count(event: Mapping, name: str) -> int:
    value = event.get(name)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"event field {name} is {value!r}, not an integer >= 0")
    return value


def has_otrc(events: object) -> bool:
    """Whether a step's compression events include an OTRC stage (the only primitive whose change
    the estimate places by position; anything that is not a list of events has none)."""
    return isinstance(events, list) and any(isinstance(e, Mapping) and e.get("primitive") == OTRC for e in events)


def estimated_cached(
    prompts: np.ndarray,
    otrc: np.ndarray | None = None,
    block: int = DEFAULT_BLOCK,
    *,
    unchanged_tokens: np.ndarray | None = None,
    tokens_before: np.ndarray | None = None,
    tokens_after: np.ndarray | None = None,
    runs: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The study's reconstruction (A.5.2) of each agent call's cached tokens.

    ``prompts``: the server-reported prompt sizes P_1, P_2, ... of the run's agent calls.
    ``otrc[k]``: an OTRC event was recorded at agent call k (``has_otrc`` of its events).
    ``unchanged_tokens[k]``, ``tokens_before[k]``: that step's (U, T) from ``unchanged_prefix``
    (local counts), or -1 where unknown; ``tokens_after[k]``: A_k, the local count of the history
    call k sent (``est_tokens_after``), or -1. With S = P_1, for call k > 1, first rule that
    applies:

      1. large reduction, P_k <= P_{k-1} - max(1000, 0.25 P_{k-1}), unless an OTRC event at k
         says where it changed the history (rule 2 places it): cached = min(S, P_k);
      2. an OTRC event at k: the cleared message placed in the prompt it was cleared in, call k's
         own: cached = min(P_k, P_{k-1}, floor(U * P_k / A_k)) (U and A_k both local counts of
         the history call k sent, so U / A_k is the share of P_k before the cleared message);
         where A_k is unknown, floor(U * P_{k-1} / T), T the local count before the event (it
         holds the newest reply and tool output, which P_{k-1} does not: an overestimate);
         without (U, T) (records older than the field) the cleared message is placed right after
         the stable prefix: cached = min(S, P_k);
      3. growth or no change, P_k >= P_{k-1}: cached = P_{k-1};
      4. a small unexplained reduction: cached = min(S, P_k).

    Every cached count is floored to whole ``block``-token blocks; call 1 has nothing cached.
    TR, TRC and summary stages get no position rule: their steps fall under rules 1, 3 and 4.
    Returns (cached, rule) with rule one of RULES per call. ``runs``: the calls are those of
    several runs laid end to end, ``runs[r]`` calls each (each run counted on its own).
    """
    p = np.asarray(prompts, dtype=np.int64)
    n = len(p)
    rule = np.full(n, "growth", dtype=object)
    if n == 0:
        return np.zeros(0, dtype=np.int64), rule
    sizes = np.array([n]) if runs is None else np.asarray(runs, dtype=np.int64)
    sizes = sizes[sizes > 0]
    firsts = np.cumsum(sizes) - sizes
    is_otrc = np.zeros(n, dtype=bool) if otrc is None else np.asarray(otrc, dtype=bool)
    unknown = np.full(n, -1, dtype=np.int64)
    u = unknown if unchanged_tokens is None else np.asarray(unchanged_tokens, dtype=np.int64)
    t = unknown if tokens_before is None else np.asarray(tokens_before, dtype=np.int64)
    a = unknown if tokens_after is None else np.asarray(tokens_after, dtype=np.int64)
    placed = (u >= 0) & (t > 0)
    in_own_prompt = placed & (a > 0)
    prev = np.concatenate((np.zeros(1, p.dtype), p[:-1]))
    prev[firsts] = 0
    # an OTRC step whose event says where it changed the history is placed by its event, however
    # far its prompt fell: the large-reduction rule is for changes of unknown position
    placed_event = is_otrc & placed
    large = (p <= prev - np.maximum(LARGE_DROP_TOKENS, LARGE_DROP_SHARE * prev)) & ~placed_event
    by_event = is_otrc & ~large
    growth = ~large & ~by_event & (p >= prev)
    small = ~large & ~by_event & ~growth
    stable = np.minimum(np.repeat(p[firsts], sizes), p)  # S: the run's first prompt
    # floor(s * P_{k-1}) in integers, so that a prefix ending on a block boundary keeps its block
    reused = np.minimum(u, t) * prev // np.where(placed, t, 1)
    own = np.minimum(np.minimum(u, a) * p // np.where(in_own_prompt, a, 1), prev)
    event_cached = np.where(in_own_prompt, np.minimum(p, own), np.where(placed, np.minimum(p, reused), stable))
    cached = floor_block(np.select([large, by_event, growth], [stable, event_cached, prev], stable), block)
    rule[large], rule[by_event], rule[small] = "large_reduction", "otrc", "small_reduction"
    cached[firsts], rule[firsts] = 0, "first"
    return cached, rule


RULES = ("first", "large_reduction", "otrc", "growth", "small_reduction")


@dataclass(frozen=True)
class Billed:
    fresh: int
    cached: int
    summary: int
    billed_input: float
    written: int = 0  # of the fresh tokens, those written to the cache (cache models that bill writes)

    def as_dict(self) -> dict:
        out = {"fresh": self.fresh, "cached": self.cached, "summary": self.summary, "billed_input": self.billed_input}
        return {**out, "written": self.written} if self.written else out


def billed(
    agent_prompts: np.ndarray,
    agent_cached: np.ndarray,
    summary_input: int,
    discount: float = DEFAULT_DISCOUNT,
    *,
    written: np.ndarray | None = None,
    write_premium: float = 0.0,
) -> Billed:
    """C = N_fresh + discount * N_cached + write_premium * N_written + N_summary over one run's
    calls (``written``: per call, the fresh tokens written to the cache, at most the fresh ones)."""
    prompts = np.asarray(agent_prompts, dtype=np.int64)
    cached = np.minimum(np.asarray(agent_cached, dtype=np.int64), prompts)
    n_cached = int(cached.sum())
    n_fresh = int(prompts.sum()) - n_cached
    n_written = 0 if written is None else int(np.minimum(np.asarray(written, dtype=np.int64), prompts - cached).sum())
    cost = n_fresh + discount * n_cached + write_premium * n_written + int(summary_input)
    return Billed(n_fresh, n_cached, int(summary_input), cost, n_written)


DISAGREEMENT_MARGIN = 0.10
"""How far (relative) another method's billed input may be from the reference before ``ctxpolicy
cost`` warns: the reference is the measured bill where the server reported cached tokens on every
call, else the exact simulation (docs/metrics.md, "Which cost to trust")."""


def disagreements(billed_input: Mapping[str, float | None], margin: float = DISAGREEMENT_MARGIN) -> list[str]:
    """One line per method whose billed input is more than ``margin`` from the reference's.

    ``billed_input``: method -> billed input (None where the method cannot be computed)."""
    reference = "measured" if billed_input.get("measured") is not None else "exact"
    base = billed_input.get(reference)
    if base is None:
        return []
    lines = []
    for method, value in billed_input.items():
        if method == reference or value is None:
            continue
        gap = abs(value - base) / base if base else (0.0 if value == base else float("inf"))
        if gap > margin:
            lines.append(
                f"{method} billed input {value:,.1f} is {gap:.0%} from the {reference} {base:,.1f} "
                f"(more than {margin:.0%})"
            )
    return lines
