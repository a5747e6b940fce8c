"""Provider cache models as cost methods, each worked by hand on a three-call conversation."""

from __future__ import annotations

import numpy as np
import pytest

from ctxpolicy.metrics import cost_methods
from ctxpolicy.metrics.cost import billed
from ctxpolicy.metrics.cost_methods import RunCalls, Sequences, SourceCalls

SIZES = {"s": 1000, "a": 300, "b": 500}


def calls_of(prompts, sequences, sizes, start=None, source=None):
    codes = {m: i for i, m in enumerate(sizes)}
    seq = Sequences.of(
        [np.array([codes[m] for m in s]) for s in sequences], [np.array([sizes[m] for m in s]) for s in sequences]
    )
    return RunCalls(
        np.array(prompts), start=None if start is None else np.array(start, float), sequences=seq, source=source
    )


def counts(method, calls, block=16):
    return cost_methods.method(method).counts(calls, block)


def test_openai_serves_nothing_under_1024_tokens_then_128_token_increments():
    # prompts equal their local counts. Call 2 shares s = 1000 < 1024: nothing. Call 3 shares
    # s, a = 1300: 1024 + floor(276 / 128) * 128 = 1280 (the exact cache would give 1296).
    calls = calls_of([1000, 1300, 1800], [["s"], ["s", "a"], ["s", "a", "b"]], SIZES)
    assert counts("openai", calls).cached.tolist() == [0, 0, 1280]
    assert counts("exact", calls).cached.tolist() == [0, 992, 1296]
    assert counts("openai", calls).written is None  # OpenAI bills no cache writes


ANTHROPIC = {"s": 1100, "a": 200, "b": 300, "c": 400}


@pytest.mark.parametrize(
    ("gap", "cached", "written"), [(100, [0, 1100, 1600], [1100, 500, 400]), (400, [0, 1100, 0], [1100, 500, 2000])]
)
def test_anthropic_reads_live_breakpoints_and_bills_writes(gap, cached, written):
    # breakpoints: end of the system prompt, end of the previous observation, end of the prompt.
    # Call 1 [s] writes s (1100 >= 1024). Call 2 [s a b] 60 s later reads s and writes s a b
    # (1600): 500 written. Call 3 [s a b c] reads s a b if it starts within 5 minutes of that
    # write (gap 100 s); after 400 s every entry has expired: nothing cached, all 2000 written.
    calls = calls_of(
        [1100, 1600, 2000], [["s"], ["s", "a", "b"], ["s", "a", "b", "c"]], ANTHROPIC, start=[0, 60, 60 + gap]
    )
    got = counts("anthropic", calls)
    assert got.cached.tolist() == cached and got.written.tolist() == written
    method = cost_methods.method("anthropic")
    bill = billed(calls.prompts, got.cached, 0, 0.1, written=got.written, write_premium=method.write_premium)
    fresh = sum([1100, 1600, 2000]) - sum(cached)
    assert bill.billed_input == pytest.approx(fresh + 0.1 * sum(cached) + 0.25 * sum(written))
    if gap == 100:  # C = 2000 fresh + 0.1 * 2700 cached + 0.25 * 2000 written
        assert bill.billed_input == pytest.approx(2770.0)


def test_anthropic_caches_no_prefix_under_1024_tokens_and_without_times_nothing_expires():
    small = {"s": 600, "a": 200, "b": 300}
    calls = calls_of([600, 800, 1100], [["s"], ["s", "a"], ["s", "a", "b"]], small)
    got = counts("anthropic", calls)
    # no prefix reaches 1,024 tokens until call 3's whole prompt (written, never read)
    assert got.cached.tolist() == [0, 0, 0] and got.written.tolist() == [0, 0, 1100]
    calls = calls_of([1100, 1600, 2000], [["s"], ["s", "a", "b"], ["s", "a", "b", "c"]], ANTHROPIC)
    assert counts("anthropic", calls).cached.tolist() == [0, 1100, 1600]


def test_measured_profile_caps_each_call_at_what_the_provider_served_on_the_source():
    # replayed calls in local counts (prompt = local): the ideal cache serves 0, 500, 800.
    # The source sent 550, 880, 1100 server tokens (500, 800, 1000 local) and the provider served
    # 0, 275, 880 of them: 0, 275 * 800 / 880 = 250, 880 * 1000 / 1100 = 800 local tokens.
    # Served: min(ideal, cap) = 0, 250 -> 240 (16-token blocks), 800.
    sizes = {"s": 500, "a": 300, "b": 200}
    source = SourceCalls(np.array([550, 880, 1100]), np.array([0, 275, 880.0]), np.array([500, 800, 1000]))
    calls = calls_of([500, 800, 1000], [["s"], ["s", "a"], ["s", "a", "b"]], sizes, source=source)
    assert counts("measured-profile", calls).cached.tolist() == [0, 240, 800]
    assert counts("exact", calls).cached.tolist() == [0, 496, 800]
    # a source with another number of calls, or a call without the provider's count: no profile
    short = SourceCalls(np.array([550, 880]), np.array([0, 275.0]), np.array([500, 800]))
    assert (
        counts(
            "measured-profile", calls_of([500, 800, 1000], [["s"], ["s", "a"], ["s", "a", "b"]], sizes, source=short)
        )
        is None
    )
    unknown = SourceCalls(source.prompts, np.array([0, np.nan, 880]), source.local)
    assert (
        counts(
            "measured-profile", calls_of([500, 800, 1000], [["s"], ["s", "a"], ["s", "a", "b"]], sizes, source=unknown)
        )
        is None
    )


@pytest.mark.parametrize("seed", range(5))
def test_anthropic_counts_the_same_whether_every_call_is_in_time_or_the_calls_are_walked(seed):
    # calls seconds apart all read their longest prefix within its write's lifetime (counted at
    # once); one more call an hour later, repeating the first prompt, finds its entries expired and
    # makes the count walk every call in order: the earlier calls' counts must not change.
    rng = np.random.default_rng(seed)
    sizes = {m: int(rng.integers(100, 900)) for m in "sabcdefghij"}
    sequences, prompt = [], ["s"]
    for _ in range(12):
        prompt = prompt + list(rng.choice(list("abcdefghij"), size=2))
        if rng.random() < 0.3:  # a compression: a message dropped from the middle
            prompt = prompt[:1] + prompt[2:]
        sequences.append(prompt)
    prompts = [sum(sizes[m] for m in s) + int(rng.integers(0, 50)) for s in sequences]
    start = np.cumsum(rng.integers(1, 30, size=len(sequences))).tolist()
    in_time = counts("anthropic", calls_of(prompts, sequences, sizes, start=start))
    walked = counts(
        "anthropic",
        calls_of([*prompts, prompts[0]], [*sequences, sequences[0]], sizes, start=[*start, start[-1] + 3600]),
    )
    assert walked.cached[:-1].tolist() == in_time.cached.tolist() and walked.cached[-1] == 0
    assert walked.written[:-1].tolist() == in_time.written.tolist()
    assert in_time.cached[1:].any()  # the runs do read the cache
