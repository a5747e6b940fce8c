"""The loops over a run's prefix tree, compiled (numba): building it, summing its tokens, and the two
cache walks that start from it. Pure.

A version-2 record's prompts become a tree of whole-message prefixes (``encoded_prompts``), and the
ideal cache (``cost.shared_prefix_tokens``) and Anthropic's (``cost_methods.anthropic``) are walks
up that tree, call by call. Each step depends on the ones before (a node is made where no earlier
prompt had its prefix, an entry lives from its last read), so no array operation replaces the walks;
as Python loops they were a sixth of the aggregate's time on a study's runs. Here each is one
compiled loop over integer arrays (``numba.njit``), called once per run. numba is imported and each
kernel compiled on its first call, not with this module (the figures import the metrics without
pricing a run); the machine code is kept in numba's cache (``__pycache__`` beside this file, else
the user's cache folder) and read back from there by later processes.

Arithmetic is in 64-bit integers, as the same counts over the prompts laid end to end
(``cost.exact_cached_flat``, ``anthropic.count``) are computed with numpy: token counts whose
products pass 2^63 wrap there and here alike.
"""

from __future__ import annotations

import functools

import numpy as np

_EMPTY = -1  # a free slot of ``build_tree``'s table of children


def _compiled(function):
    """``function``, compiled by numba when it is first called."""
    compiled = None

    @functools.wraps(function)
    def call(*args):
        nonlocal compiled
        if compiled is None:
            compiled = _jit(function)
        return compiled(*args)

    return call


def _jit(function):
    from numba import njit

    try:
        return njit(cache=True)(function)
    except RuntimeError:  # nowhere to write numba's cache (a read-only install and home): compiled anew a process
        return njit(function)


@_compiled
def build_tree(base_lines, keeps, added, numbers):
    """The prefix tree of a file's prompts (``encoded_prompts._tree``'s contract): ``base_lines[k]``
    (-1: none; any value not below ``k``: no earlier line), ``keeps[k]``, ``added[k]`` (how many ids
    line ``k`` adds) and ``numbers`` (the added ids' numbers, in file order). Returns (ok, parent,
    message, first, ends, lengths); ok is False where a base is no earlier line or a keep is
    negative, not 0 without a base, or longer than its base's prompt."""
    lines, size = len(base_lines), len(numbers) + 1
    parent = np.empty(size, np.int64)
    message = np.empty(size, np.int64)
    first = np.empty(size, np.int64)
    parent[0], message[0], first[0] = -1, -1, 0
    ends = np.empty(lines, np.int64)
    lengths = np.empty(lines, np.int64)
    nodes = np.empty(len(numbers), np.int64)  # the node of every added position, in file order
    starts = np.empty(lines, np.int64)  # per line, where its added positions start in ``nodes``
    slots = 1  # the children (parent, id number) -> node, in an open-addressing table
    while slots < 2 * size:
        slots *= 2
    keys_parent = np.full(slots, _EMPTY, np.int64)
    keys_number = np.empty(slots, np.int64)
    values = np.empty(slots, np.int64)
    mask = slots - 1
    count, taken = 1, 0
    for line in range(lines):
        base, kept, fresh = base_lines[line], keeps[line], added[line]
        if base < 0:
            if kept:
                return False, parent[:0], message[:0], first[:0], ends[:0], lengths[:0]
            node = 0
        elif base >= line or kept < 0 or kept > lengths[base]:
            return False, parent[:0], message[:0], first[:0], ends[:0], lengths[:0]
        elif kept == 0:
            node = 0
        elif kept == lengths[base]:
            node = ends[base]
        else:  # the base keeps that position from its own base, and so on
            at, position = base, kept - 1
            while position < keeps[at]:
                at = base_lines[at]
            node = nodes[starts[at] + position - keeps[at]]
        starts[line] = taken
        for j in range(taken, taken + fresh):
            number = numbers[j]
            slot = ((node * 0x9E3779B1) ^ (number * 0x85EBCA77)) & mask
            while keys_parent[slot] != _EMPTY and (keys_parent[slot] != node or keys_number[slot] != number):
                slot = (slot + 1) & mask
            if keys_parent[slot] == _EMPTY:
                keys_parent[slot], keys_number[slot], values[slot] = node, number, count
                parent[count], message[count] = node, number
                first[count] = first[node] if node else count
                count += 1
            node = values[slot]
            nodes[j] = node
        taken += fresh
        ends[line] = node
        lengths[line] = kept + fresh
    return True, parent[:count], message[:count], first[:count], ends, lengths


@_compiled
def path(parent, message, node):
    """The messages (``message`` of each node) on the path from the root to ``node``, in order."""
    depth, at = 0, node
    while at > 0:
        depth, at = depth + 1, parent[at]
    numbers = np.empty(depth, np.int64)
    while node > 0:
        depth -= 1
        numbers[depth], node = message[node], parent[node]
    return numbers


@_compiled
def prefix_tokens(parent, message, counts):
    """Per node, the tokens of its prefix: its parent's (an earlier node) and its last message's
    (``counts[message[node]]``)."""
    through = np.zeros(len(parent), np.int64)
    for node in range(1, len(parent)):
        through[node] = through[parent[node]] + counts[message[node]]
    return through


@_compiled
def shared_prefixes(parent, tokens, ends):
    """Per call (``ends``: the node of each call's whole prompt, in order), the tokens of the
    longest prefix an earlier call sent: its path is walked up to the first node an earlier call's
    path holds, then marked on the way up, so that each node is marked once."""
    sent = np.zeros(len(parent), np.bool_)
    sent[0] = True  # the empty prefix
    shared = np.empty(len(ends), np.int64)
    for k in range(len(ends)):
        node = ends[k]
        while not sent[node]:
            node = parent[node]
        shared[k] = tokens[node]
        node = ends[k]
        while not sent[node]:
            sent[node] = True
            node = parent[node]
    return shared


@_compiled
def breakpoint_reads(parent, tokens, first, ends, lengths, prompts, times, min_prefix, ttl):
    """Anthropic's cache over one run's tree (``cost_methods.anthropic``): per call, the server
    tokens it reads. A call reads the longest prefix on its path that an earlier call wrote and
    whose entry is alive (``ttl`` seconds from its write or latest read by ``times``; a NaN time
    never expires), walking up from its whole prompt, then writes the prefixes through its three
    breakpoints (after the first message, before the newest reply and observation, its end) that
    hold at least ``min_prefix`` server tokens."""
    written_by = np.full(len(parent), -1, np.int64)  # node -> the latest call that wrote its prefix
    read_at = np.full(len(parent), -np.inf)  # node -> time of its latest read (-inf: never read)
    cached = np.zeros(len(ends), np.int64)
    for k in range(len(ends)):
        end, length, prompt, now = ends[k], lengths[k], prompts[k], times[k]
        total = max(tokens[end], 1)
        node = end
        while node:
            writer = written_by[node]
            if writer >= 0:
                alive_since = times[writer]
                if read_at[node] > alive_since:  # a NaN on either side keeps the write's time
                    alive_since = read_at[node]
                if now != now or alive_since != alive_since or now - alive_since <= ttl:
                    cached[k] = min(tokens[node] * prompt // total, prompt)
                    read_at[node] = now
                    break
            node = parent[node]
        if length:
            least = min_prefix * total  # written from min_prefix server tokens: tokens * prompt // total
            middle = parent[parent[end]] if length >= 3 else end
            for mark in (first[end], middle, end):
                if tokens[mark] * prompt >= least:
                    written_by[mark] = k
    return cached


def warm() -> None:
    """Load every kernel (compiled, or read from numba's cache) in this process, so that worker
    processes forked from it share the machine code instead of each loading it again."""
    zero, none = np.zeros(1, np.int64), np.full(1, -1, np.int64)
    build_tree(none, zero, zero, np.zeros(0, np.int64))
    path(none, none, 0)
    prefix_tokens(none, none, zero)
    shared_prefixes(none, zero, zero)
    breakpoint_reads(none, zero, zero, zero, zero, zero, np.zeros(1), 1, 1.0)
