"""Billed input cost: exact, estimated and measured cached tokens (values worked out by hand)."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.metrics import cli_cost
from ctxpolicy.metrics.cost import billed, estimated_cached, exact_cached, unchanged_prefix

TOKENS = {"s": 100, "t": 50, "a": 30, "o": 20, "x": 25, "b": 10}


def run_exact(sequences, prompts, block=16):
    codes = {m: i for i, m in enumerate(TOKENS)}
    return exact_cached([np.array([codes[m] for m in seq], dtype=np.int64) for seq in sequences],
                        [np.array([TOKENS[m] for m in seq], dtype=np.int64) for seq in sequences],
                        np.array(prompts), block).tolist()


def test_exact_counts_longest_whole_message_prefix_with_any_earlier_call():
    sequences = [["s", "t"],                 # first call: nothing cached
                 ["s", "t", "a", "o"],       # shares s,t = 150 tokens -> 144 in 16-token blocks
                 ["s", "x", "o"],            # after compression: shares only s = 100 -> 96
                 ["s", "t", "a", "o", "b"],  # shares s,t,a,o with call 1 (not the previous call) = 200 -> 192
                 ["s", "t"]]                 # shares 150 -> 144, but the server saw only 120 tokens
    assert run_exact(sequences, [160, 210, 140, 230, 120]) == [0, 144, 96, 192, 120]


def test_exact_block_size_is_a_parameter():
    assert run_exact([["s", "t"], ["s", "t", "a"]], [160, 190], block=1) == [0, 150]
    assert run_exact([["s", "t"], ["s", "t", "a"]], [160, 190], block=64) == [0, 128]


def test_exact_counts_whole_messages_only():
    # call 1 shares s but differs in its second message: the partial match inside t counts nothing
    assert run_exact([["s", "t", "a"], ["s", "a", "t"]], [200, 200], block=1) == [0, 100]


def brute_force_cached(sequences, tokens, prompts, block):
    out = []
    for k, seq in enumerate(sequences):
        best = 0
        for earlier in sequences[:k]:
            n = 0
            while n < min(len(seq), len(earlier)) and seq[n] == earlier[n]:
                n += 1
            best = max(best, sum(tokens[k][:n]))
        out.append(min(best // block * block, prompts[k]))
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=7), min_size=1, max_size=6), st.sampled_from([1, 4, 16]))
def test_exact_matches_a_brute_force_longest_common_prefix(sequences, block):
    tokens = [[3 + 5 * code for code in seq] for seq in sequences]
    prompts = [sum(t) + 7 for t in tokens]
    got = exact_cached([np.array(s, dtype=np.int64) for s in sequences],
                       [np.array(t, dtype=np.int64) for t in tokens], np.array(prompts), block)
    assert got.tolist() == brute_force_cached(sequences, tokens, prompts, block)


def test_estimate_follows_growth_drops_and_events():
    prompts = [300, 900, 2300, 1000, 1100, 1050, 1500]
    events = [0, 0, 0, 0, 0, 0, 1]
    cached, kind = estimated_cached(np.array(prompts), np.array(events, dtype=bool), block=16)
    # growth caches the previous prompt (floor to 16): 300 -> 288, 900 -> 896, 1000 -> 992;
    # the drop 2300 -> 1000 (1300 >= max(1000, 575)) and the small drop 1100 -> 1050 and the event
    # all fall back to the stable prefix, the first prompt 300 -> 288.
    assert cached.tolist() == [0, 288, 896, 288, 992, 288, 288]
    assert kind.tolist() == ["first", "growth", "growth", "large_drop", "growth", "small_drop", "event"]


def trc_event(unchanged, before, first_changed=5, **fields):
    event = {"primitive": "TRC", "trigger": "Th", "depth": 0.5, "window_tokens_before": before - 400,
             "window_tokens_after": 900, "total_tokens_before": before, "total_tokens_after": 1300,
             "target_tokens": 1000, "messages_removed": 0, "messages_cleared": 3, "summary_tokens": 0,
             "first_changed_index": first_changed, "unchanged_prefix_tokens": unchanged, "fallback": None}
    event.update(fields)
    return event


def estimate_from_steps(prompts, steps, block=16):
    """The estimate as the run tables compute it, from each agent call's list of events."""
    where = [unchanged_prefix(events) or (-1, -1) for events in steps]
    return estimated_cached(np.array(prompts), np.array([bool(e) for e in steps]), block,
                            unchanged_tokens=np.array([w[0] for w in where]),
                            tokens_before=np.array([w[1] for w in where]))


def test_estimate_charges_fresh_from_the_cleared_message_on():
    prompts = [300, 900, 2300, 2500, 1400, 1600, 2000, 1500]
    steps = [[], [], [], [], [trc_event(1200, 2400)], [], [], [trc_event(2160, 2400)]]
    cached, kind = estimate_from_steps(prompts, steps)
    # call 4: TRC cleared from the message after 1200 of the 2400 local tokens before it, so
    # s = 1200 / 2400 = 0.5 of the previous prompt is reused: min(1400, 0.5 * 2500 = 1250) -> 1248
    # (the stable-prefix rule would have said 288). Call 5 grows: floor16(1400) = 1392.
    # call 7: s = 2160 / 2400 = 0.9 of 2000 = 1800, but the prompt is only 1500 -> 1488.
    assert cached.tolist() == [0, 288, 896, 2288, 1248, 1392, 1600, 1488]
    assert kind.tolist() == ["first", "growth", "growth", "growth", "event", "growth", "growth", "event"]


def test_estimate_of_stacked_events_takes_the_earliest_change_against_the_first_history():
    # OTRC leaves 2000 of 2400 tokens intact, then TR (on OTRC's output, 2300 tokens) keeps only
    # the 600-token head: s = min(2000, 600) / 2400 = 0.25 of the previous prompt 2500 = 625 -> 624
    steps = [[], [trc_event(2000, 2400, primitive="OTRC"), trc_event(600, 2300, primitive="TR")]]
    assert unchanged_prefix(steps[1]) == (600, 2400)
    cached, _ = estimate_from_steps([2500, 2000], steps)
    assert cached.tolist() == [0, 624]


def test_estimate_keeps_a_prefix_on_a_block_boundary():
    # s = 1100 / 1500 of 4800 is exactly 3520 = 220 blocks (in floating point 3519.99..., which
    # would lose the last block): integer arithmetic keeps it
    cached, _ = estimate_from_steps([4800, 4000], [[], [trc_event(1100, 1500)]])
    assert cached.tolist() == [0, 3520]


def test_estimate_of_an_old_event_without_the_field_keeps_only_the_stable_prefix():
    old = trc_event(1200, 2400)
    del old["unchanged_prefix_tokens"]
    assert unchanged_prefix([old]) is None
    assert unchanged_prefix([trc_event(1200, 2400), old]) is None  # the step's change cannot be placed
    cached, kind = estimate_from_steps([300, 2500, 1400], [[], [], [old]])
    # no position: the stable prefix, the first prompt 300 -> 288, is all that is cached
    assert cached.tolist() == [0, 288, 288] and kind.tolist() == ["first", "growth", "event"]


def test_unchanged_prefix_names_a_bad_field():
    with pytest.raises(ValueError, match="unchanged_prefix_tokens is 'x'"):
        unchanged_prefix([trc_event("x", 2400)])
    with pytest.raises(ValueError, match="total_tokens_before is None"):
        unchanged_prefix([trc_event(100, 2400, total_tokens_before=None)])
    assert unchanged_prefix([]) is None


def test_estimate_large_drop_threshold_is_a_quarter_of_the_prompt_above_4000():
    _, kind = estimated_cached(np.array([500, 8000, 6001, 8000, 6000]), None, 16)
    # 8000 -> 6001 drops 1999 < max(1000, 2000): small; 8000 -> 6000 drops 2000: large
    assert kind.tolist() == ["first", "growth", "small_drop", "growth", "large_drop"]


def test_billed_input_formula():
    result = billed(np.array([160, 210]), np.array([0, 144]), summary_input=70, discount=0.1)
    # fresh = 160 + 210 - 144 = 226; C = 226 + 0.1 * 144 + 70 = 310.4
    assert (result.fresh, result.cached, result.summary) == (226, 144, 70)
    assert result.billed_input == pytest.approx(310.4)
    assert billed(np.array([160, 210]), np.array([0, 144]), 70, discount=0.5).billed_input == pytest.approx(368.0)


def call(kind, prompt, ids=None):
    line = {"kind": kind, "prompt_tokens": prompt}
    if ids is not None:
        line.update(message_ids=ids, message_tokens=[TOKENS[m] for m in ids])
    return json.dumps(line)


def run_cli(monkeypatch, capsys, lines, **options):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    args = SimpleNamespace(block=16, discount=0.1, input=None, **options)
    code = cli_cost.main(args)
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def test_cost_cli_prices_exact_and_estimate(monkeypatch, capsys):
    lines = [call("agent", 160, ["s", "t"]),
             call("summary", 70, ["s", "t", "a", "o"]),  # a summary request never feeds the agent's cache
             call("agent", 210, ["s", "t", "a", "o"])]
    code, out, _ = run_cli(monkeypatch, capsys, lines)
    assert code == 0
    # exact: call 2 shares s,t (150 -> 144) with agent call 1, not 200 with the summary request
    assert out["exact"] == {"fresh": 226, "cached": 144, "summary": 70, "billed_input": pytest.approx(310.4)}
    # estimate: growth 160 -> 210 caches floor16(160) = 160: fresh 210, C = 210 + 16 + 70
    assert out["estimated"] == {"fresh": 210, "cached": 160, "summary": 70, "billed_input": pytest.approx(296.0)}


def test_cost_cli_without_message_ids_gives_only_the_estimate(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, [call("agent", 100), call("agent", 150)])
    assert code == 0 and out["exact"] is None
    assert out["estimated"]["cached"] == 96  # floor16(100)


def test_cost_cli_names_the_bad_line_and_field(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, [call("agent", 100), '{"kind": "tool", "prompt_tokens": 3}'])
    assert code == 2
    assert "line 2" in err and "kind" in err and "'tool'" in err
