"""The cost simulations over arrays: breakpoints placed for all calls at once, prefix numbers
shared by the exact and Anthropic simulations, each checked against a count by hand."""

from __future__ import annotations

import numpy as np

from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.cost import exact_cached_flat, prefix_codes
from ctxpolicy.metrics.cost_methods import RunCalls, Sequences
from ctxpolicy.metrics.cost_methods.anthropic import breakpoint_positions


def test_breakpoints_fall_after_the_first_message_the_previous_observation_and_the_last():
    # calls of 1, 2, 3 and 5 messages laid end to end from positions 0, 1, 3 and 6
    assert sorted(breakpoint_positions(np.array([1, 2, 3, 5])).tolist()) == [0, 0, 1, 2, 3, 3, 5, 6, 8, 10]
    assert breakpoint_positions(np.array([0, 2])).tolist() == [0, 1]  # a prompt of no messages has none


def test_a_call_without_messages_is_priced_by_the_anthropic_cache():
    # call 2 sends nothing (0 tokens): no breakpoint, nothing cached or written; call 3 reads call 1's prefix
    sequences = Sequences.of(
        [np.array([0]), np.array([], dtype=np.int64), np.array([0, 1])],
        [np.array([1100]), np.array([], dtype=np.int64), np.array([1100, 300])],
    )
    calls = RunCalls(np.array([1100, 0, 1400]), sequences=sequences)
    got = cost_methods.method("anthropic").counts(calls, 16)
    assert got.cached.tolist() == [0, 0, 1100] and got.written.tolist() == [1100, 0, 300]


def test_prefix_numbers_say_which_whole_message_prefixes_are_equal():
    # [a b] [a b c] [a c]: prefixes a, ab, a, ab, abc, a, ac
    codes, lengths = np.array([0, 1, 0, 1, 2, 0, 2]), np.array([2, 3, 2])
    assert prefix_codes(codes, lengths).tolist() == [0, 1, 0, 1, 2, 0, 3]
    tokens = np.array([100, 50, 100, 50, 30, 100, 30])
    # call 2 shares a b (150 of 180 tokens), call 3 shares a (100 of 130)
    assert exact_cached_flat(codes, tokens, lengths, np.array([150, 180, 130]), 1).tolist() == [0, 150, 100]
