"""Version-2 prompts (``prompt``: base, keep, add) read in bulk, for the aggregate.

A version-2 ``calls.jsonl`` (``rundir.PromptEncoder``, what every writer of ours writes) gives each
prompt as the first ``keep`` ids of an earlier line's prompt followed by the ids it adds, so a
run names a few hundred ids while its prompts hold thousands of positions. ``rundir.resolve_prompts``
rebuilds every prompt as a list of strings; here each distinct id is numbered once and the
prompts become paths in a tree of whole-message prefixes, built from the ids the lines add (the
cost methods that start from the ideal cache walk that tree, ``cost_methods.base.PrefixTree``).
The prompts laid end to end, a position per message, are made only when asked for (``at``): each
line's positions copied from its base line's (already resolved: a base is an earlier line),
followed by the numbers of the ids it adds. ``expand`` returns None for any file it does not read
this way (a line with ``message_ids``, a line without a prompt, a base that is no earlier line, a
bad keep or add, indexes out of order); the reader then takes its general path, which names what
is wrong. Pure.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from ctxpolicy.metrics import call_ids, tree_kernels
from ctxpolicy.rundir import MESSAGE_IDS, PROMPT


@dataclass(frozen=True)
class EncodedPrompts:
    """Every call's prompt, in file order, as a path in a tree of whole-message prefixes: node 0
    is the empty prompt, every other node a prompt's prefix through one more message than its
    parent's. Equal prefixes are one node, so the tree has a node per distinct prefix (about as
    many as the ids the lines add), where the prompts laid end to end have a position per message."""

    ids: list[str]  # the distinct message ids, in order of first appearance
    lengths: np.ndarray  # each call's number of messages
    parent: np.ndarray  # per node, its parent (-1 for node 0)
    message: np.ndarray  # per node, its last message as a position in ``ids`` (-1 for node 0)
    first: np.ndarray  # per node, its ancestor one message long (itself, at that depth; 0 for node 0)
    ends: np.ndarray  # per call, the node of its whole prompt
    encoding: tuple[list[int], list[int], np.ndarray]  # base lines (-1: none), keeps, added ids' numbers

    @functools.cached_property
    def at(self) -> np.ndarray:
        """Each call's prompt laid end to end: a position in ``ids`` per message (``_resolve``)."""
        return _resolve(self.lengths, *self.encoding)

    def prompt(self, call: int) -> list[str]:
        """Call ``call``'s prompt as message ids, read up its path in the tree."""
        return [self.ids[k] for k in tree_kernels.path(self.parent, self.message, self.ends[call]).tolist()]

    def longest(self, calls: list[int]) -> list[str]:
        """The prompt of the first call of ``calls`` holding the most messages ([] for no calls)."""
        if not calls:
            return []
        sizes = self.lengths[calls]
        return self.prompt(calls[int(np.argmax(sizes))])

    def agent_positions(self, agent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The agent calls' prompts laid end to end: positions into ``ids``, the call (in file
        order) of each message, and each agent call's number of messages."""
        call = np.repeat(np.arange(len(self.lengths)), self.lengths)
        keep = agent[call]
        return self.at[keep], call[keep], self.lengths[agent]

    def keys(self) -> np.ndarray:
        """A 64-bit code per id: the version-1 reader's key where every id has the contract's 16
        characters (``call_ids.id_keys``), so both versions give the same codes; else its number."""
        keys = call_ids.id_keys(self.ids)
        return keys if keys is not None else np.arange(len(self.ids), dtype=np.uint64)


def expand(calls: list) -> EncodedPrompts | None:
    """The prompts of ``calls`` (parsed lines in file order), or None where a line is not a
    well-formed version-2 line, its index is not above the line before's, or its base is no
    earlier line. Checked a field at a time over all lines (each ``map`` one C loop)."""
    try:
        prompts = list(map(_PROMPT, calls))
        indexes = list(map(_INDEX, calls))
        bases, keeps, adds = map(list, zip(*map(_PARTS, prompts))) if calls else ([], [], [])
    except (KeyError, TypeError):  # not an object, no prompt, a prompt without base, keep or add
        return None
    if (
        not set(map(type, indexes)) <= {int}
        or any(map(dict.__contains__, calls, repeat(MESSAGE_IDS)))
        or not set(map(type, keeps)) <= {int}
        or not set(map(type, adds)) <= {list}
        or not set(map(type, bases)) <= {int, type(None)}
        or not set(map(type, chain.from_iterable(adds))) <= {str}
    ):
        return None
    return encode(indexes, bases, keeps, adds)


def encode(
    indexes: list[int], bases: list[int | None], keeps: list[int], adds: list[list[str]]
) -> EncodedPrompts | None:
    """The prompts of lines whose fields already have their types (``expand``'s checks, or a
    decoder's: ``typed_lines``): index, and the prompt's base, keep and add. None where an index is
    not above the line before's, a base is no earlier line, or a keep is negative, not 0 without
    a base, or longer than its base's prompt (``_tree`` checks the last three as it goes)."""
    if not all(map(operator.lt, indexes, indexes[1:])):
        return None
    n = len(indexes)
    line_of = dict(zip(indexes, range(n)))
    line_of[None] = -1  # no base
    base_lines = list(map(line_of.get, bases, repeat(n)))  # n: no line has that index
    added = list(chain.from_iterable(adds))
    ids = list(dict.fromkeys(added))
    number = dict(zip(ids, range(len(ids))))
    numbers = np.fromiter(map(number.__getitem__, added), np.int64, len(added))
    tree = _tree(base_lines, keeps, list(map(len, adds)), numbers)
    if tree is None:
        return None
    *tree, lengths = tree
    return EncodedPrompts(ids, lengths, *tree, (base_lines, keeps, numbers))


_PROMPT, _INDEX = operator.itemgetter(PROMPT), operator.itemgetter("index")
_PARTS = operator.itemgetter("base", "keep", "add")


def _resolve(lengths: np.ndarray, base_lines: list[int], keeps: list[int], added: np.ndarray) -> np.ndarray:
    """Each position's id number, line by line: a line's kept positions copied from its base
    line's (an earlier line, already resolved), its added ones from ``added`` (in order). Two
    slice copies a line: the copies are C loops, so the time goes with the lines, not with the
    positions (pointer doubling over every position took twice as long on a study's runs)."""
    value = np.empty(int(lengths.sum()), dtype=np.int64)
    offsets = (np.cumsum(lengths) - lengths).tolist()
    taken = 0
    for start, length, base, kept in zip(offsets, lengths.tolist(), base_lines, keeps):
        if kept:
            value[start : start + kept] = value[offsets[base] : offsets[base] + kept]
        fresh = length - kept
        value[start + kept : start + length] = added[taken : taken + fresh]
        taken += fresh
    return value


def _tree(base_lines: list[int], keeps: list[int], added: list[int], numbers: np.ndarray):
    """The prefix tree of the lines' prompts (``EncodedPrompts``): (parent, message, first, ends,
    lengths), each an int64 array, or None where a line's base (-1: none) is no earlier line or its
    keep is negative, not 0 without a base, or longer than its base's prompt.

    A line's kept positions are its base line's, so its path runs through the node at its base's
    position ``keep - 1``: the base's whole prompt where it keeps all of it, else found by following
    bases while the position is a kept one. Each id it adds is one step down, to the child of the
    current node for that id, made where no earlier prompt had that prefix. The work goes with the
    ids the lines add, not with their positions; the loop is compiled (``tree_kernels.build_tree``)."""
    try:
        arrays = [np.array(values, dtype=np.int64).reshape(len(values)) for values in (base_lines, keeps, added)]
    except OverflowError:  # a keep beyond 64 bits is longer than any base's prompt
        return None
    ok, *tree = tree_kernels.build_tree(*arrays, numbers)
    return tree if ok else None
