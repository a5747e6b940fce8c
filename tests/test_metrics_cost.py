"""Billed input cost: exact, estimated and measured cached tokens (values worked out by hand)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy import cli
from ctxpolicy.metrics import cli_cost
from ctxpolicy.metrics.cost import billed, estimated_cached, exact_cached, has_otrc, unchanged_prefix

TOKENS = {"s": 100, "t": 50, "a": 30, "o": 20, "x": 25, "b": 10}


def run_exact(sequences, prompts, block=16):
    codes = {m: i for i, m in enumerate(TOKENS)}
    return exact_cached(
        [np.array([codes[m] for m in seq], dtype=np.int64) for seq in sequences],
        [np.array([TOKENS[m] for m in seq], dtype=np.int64) for seq in sequences],
        np.array(prompts),
        block,
    ).tolist()


def test_exact_counts_longest_whole_message_prefix_with_any_earlier_call():
    # shared prefixes in local tokens, rescaled to the server prompt: floor(P * shared / local), floor16
    sequences = [
        ["s", "t"],  # first call: nothing cached
        ["s", "t", "a", "o"],  # shares s,t = 150 of 200 local: 210 * 150 // 200 = 157 -> 144
        ["s", "x", "o"],  # after compression: shares s = 100 of 145: 14000 // 145 = 96 -> 96
        ["s", "t", "a", "o", "b"],  # shares s,t,a,o with call 1 (not the previous call) = 200 of
        # 210: 46000 // 210 = 219 -> 208
        ["s", "t"],
    ]  # shares all 150 of 150: the whole server prompt 120 -> 112
    assert run_exact(sequences, [160, 210, 140, 230, 120]) == [0, 144, 96, 208, 112]


def test_exact_block_size_is_a_parameter():
    # shares 150 of 180 local tokens of a 190-token prompt: 28500 // 180 = 158
    assert run_exact([["s", "t"], ["s", "t", "a"]], [160, 190], block=1) == [0, 158]
    assert run_exact([["s", "t"], ["s", "t", "a"]], [160, 190], block=64) == [0, 128]


def test_exact_counts_whole_messages_only():
    # call 1 shares s but differs in its second message: the partial match inside t counts nothing;
    # s is 100 of 180 local tokens of a 200-token prompt: 20000 // 180 = 111
    assert run_exact([["s", "t", "a"], ["s", "a", "t"]], [200, 200], block=1) == [0, 111]


def brute_force_cached(sequences, tokens, prompts, block):
    out = []
    for k, seq in enumerate(sequences):
        best = 0
        for earlier in sequences[:k]:
            n = 0
            while n < min(len(seq), len(earlier)) and seq[n] == earlier[n]:
                n += 1
            best = max(best, sum(tokens[k][:n]))
        local = sum(tokens[k])
        server = best * prompts[k] // local if local else 0
        out.append(min(server, prompts[k]) // block * block)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 4), max_size=7), min_size=1, max_size=6),
    st.sampled_from([1, 4, 16]),
    st.integers(-20, 40),
)
def test_exact_matches_a_brute_force_longest_common_prefix(sequences, block, overhead):
    tokens = [[3 + 5 * code for code in seq] for seq in sequences]
    prompts = [max(0, sum(t) + overhead) for t in tokens]  # the server's tokenizer counts differently
    got = exact_cached(
        [np.array(s, dtype=np.int64) for s in sequences],
        [np.array(t, dtype=np.int64) for t in tokens],
        np.array(prompts),
        block,
    )
    assert got.tolist() == brute_force_cached(sequences, tokens, prompts, block)


def event(primitive, unchanged, before, **fields):
    record = {
        "primitive": primitive,
        "trigger": "Th",
        "depth": 0.5,
        "window_tokens_before": before - 400,
        "window_tokens_after": 900,
        "total_tokens_before": before,
        "total_tokens_after": 1300,
        "target_tokens": 1000,
        "messages_removed": 0,
        "messages_cleared": 1,
        "summary_tokens": 0,
        "first_changed_index": 5,
        "unchanged_prefix_tokens": unchanged,
        "fallback": None,
    }
    record.update(fields)
    return record


def estimate(prompts, steps, block=16):
    """The estimate as the run tables compute it, from each agent call's list of events."""
    where = [unchanged_prefix(events) or (-1, -1) for events in steps]
    cached, rule = estimated_cached(
        np.array(prompts),
        np.array([has_otrc(e) for e in steps]),
        block,
        unchanged_tokens=np.array([w[0] for w in where]),
        tokens_before=np.array([w[1] for w in where]),
    )
    return cached.tolist(), (np.array(prompts) - cached).tolist(), rule.tolist()


def test_rule_growth_caches_the_previous_prompt():
    # S = 300. Call 2 grows: floor16(300) = 288 cached, 900 - 288 = 612 fresh. Call 3 does not
    # change (900 -> 900 counts as growth): floor16(900) = 896 cached, 4 fresh.
    cached, fresh, rule = estimate([300, 900, 900], [[], [], []])
    assert cached == [0, 288, 896] and fresh == [300, 612, 4]
    assert rule == ["first", "growth", "growth"]


def test_rule_large_reduction_keeps_the_stable_prefix_unless_an_otrc_event_places_the_change():
    # 4000 -> 2900 drops 1100 >= max(1000, 0.25 * 4000 = 1000): cached = floor16(min(S = 300, 2900)) = 288,
    # fresh = 2900 - 288 = 2612, where nothing (or an event without a position) explains the drop
    for events in ([], [event("TRC", 2000, 2400)], [event("OTRC", None, 2400)]):
        cached, fresh, rule = estimate([300, 4000, 2900], [[], [], events])
        assert cached == [0, 288, 288] and fresh == [300, 3712, 2612]
        assert rule == ["first", "growth", "large_reduction"]
    # an OTRC event that says where it changed the history places the change, however far the
    # prompt fell: 2000 of 2400 local tokens unchanged, of the previous 4000: 3333, at most 2900 -> 2896
    cached, fresh, rule = estimate([300, 4000, 2900], [[], [], [event("OTRC", 2000, 2400)]])
    assert cached == [0, 288, 2896] and rule == ["first", "growth", "otrc"]


def test_large_reduction_threshold_is_a_quarter_of_the_prompt_above_4000():
    # 8000 -> 6001 drops 1999 < max(1000, 2000): small; 8000 -> 6000 drops 2000: large
    _, rule = estimated_cached(np.array([500, 8000, 6001, 8000, 6000]), None, 16)
    assert rule.tolist() == ["first", "growth", "small_reduction", "growth", "large_reduction"]


def test_rule_otrc_event_mid_history_caches_the_share_before_the_cleared_message():
    # call 4: OTRC cleared a tool result in the middle of the history: 2000 of the 2400 local tokens
    # before it stayed, so the share 2000/2400 of the previous prompt 2500 is cached:
    # 2000 * 2500 // 2400 = 2083 -> floor16 2080; fresh = 2450 - 2080 = 370.
    # Call 5 grows again: floor16(2450) = 2448 cached, 252 fresh.
    prompts = [300, 1200, 2500, 2450, 2700]
    cached, fresh, rule = estimate(prompts, [[], [], [], [event("OTRC", 2000, 2400, trigger="St")], []])
    assert cached == [0, 288, 1200, 2080, 2448] and fresh == [300, 912, 1300, 370, 252]
    assert rule == ["first", "growth", "growth", "otrc", "growth"]
    # C = N_fresh + 0.1 N_cached: 3134 + 0.1 * 6016
    assert billed(np.array(prompts), np.array(cached), 0).billed_input == pytest.approx(3134 + 601.6)


def test_rule_otrc_position_is_capped_at_the_prompt():
    # the share 2160/2400 of 2000 is 1800, but the prompt is only 1500: cached floor16(1500) = 1488
    cached, fresh, rule = estimate([300, 2000, 1500], [[], [], [event("OTRC", 2160, 2400)]])
    assert cached == [0, 288, 1488] and fresh == [300, 1712, 12] and rule[2] == "otrc"


@pytest.mark.parametrize("primitive", ["TRC", "TR", "S-p", "SU"])
def test_rule_trc_tr_and_summary_events_get_no_position_rule(primitive):
    # the same event (2000 of 2400 unchanged) as in the OTRC test, but from another primitive:
    # 2500 -> 2450 is a small unexplained reduction: floor16(min(S = 300, 2450)) = 288, fresh 2162;
    # 2450 -> 2700 with the same event is growth: floor16(2450) = 2448, fresh 252
    steps = [[], [], [], [event(primitive, 2000, 2400)], [event(primitive, 2000, 2400)]]
    cached, fresh, rule = estimate([300, 1200, 2500, 2450, 2700], steps)
    assert cached == [0, 288, 1200, 288, 2448] and fresh == [300, 912, 1300, 2162, 252]
    assert rule == ["first", "growth", "growth", "small_reduction", "growth"]


def test_rule_small_unexplained_reduction_keeps_the_stable_prefix():
    # 2000 -> 1900 drops 100 < 1000 without an OTRC event: floor16(min(300, 1900)) = 288, fresh 1612
    cached, fresh, rule = estimate([300, 2000, 1900], [[], [], []])
    assert cached == [0, 288, 288] and fresh == [300, 1712, 1612]
    assert rule[2] == "small_reduction"


def test_stable_prefix_is_capped_at_a_smaller_prompt():
    # a large reduction below the first prompt: cached = min(S = 3000, 1200) = 1200
    cached, fresh, _ = estimate([3000, 6000, 1200], [[], [], []])
    assert cached == [0, 2992, 1200] and fresh == [3000, 3008, 0]


def test_stacked_otrc_step_takes_the_earliest_change_against_the_first_history():
    # OTRC leaves 2000 of 2400 tokens intact, then TR (on OTRC's output, 2300 tokens) keeps only
    # the 600-token head: s = min(2000, 600) / 2400 = 0.25 of the previous prompt 2500 = 625 -> 624
    steps = [[], [event("OTRC", 2000, 2400), event("TR", 600, 2300)]]
    assert unchanged_prefix(steps[1]) == (600, 2400)
    cached, _, rule = estimate([2500, 2000], steps)
    assert cached == [0, 624] and rule == ["first", "otrc"]


def test_otrc_position_on_a_block_boundary_keeps_its_block():
    # s = 1100 / 1500 of 4800 is exactly 3520 = 220 blocks (in floating point 3519.99..., which
    # would lose the last block): integer arithmetic keeps it
    cached, _, _ = estimate([4800, 4000], [[], [event("OTRC", 1100, 1500)]])
    assert cached == [0, 3520]


def test_otrc_event_without_a_position_keeps_only_the_stable_prefix():
    old = event("OTRC", 1200, 2400)
    del old["unchanged_prefix_tokens"]
    assert unchanged_prefix([old]) is None
    assert unchanged_prefix([event("OTRC", 1200, 2400), old]) is None  # the step's change cannot be placed
    cached, _, rule = estimate([300, 2500, 2600], [[], [], [old]])
    # no position: the cleared message is placed after the stable prefix, floor16(300) = 288
    assert cached == [0, 288, 288] and rule == ["first", "growth", "otrc"]


def test_has_otrc_reads_the_primitive_of_each_event():
    assert has_otrc([event("TRC", 1, 2), event("OTRC", 1, 2)])
    assert not has_otrc([event("TRC", 1, 2)]) and not has_otrc([]) and not has_otrc(None)


def test_unchanged_prefix_names_a_bad_field():
    with pytest.raises(ValueError, match="unchanged_prefix_tokens is 'x'"):
        unchanged_prefix([event("OTRC", "x", 2400)])
    with pytest.raises(ValueError, match="total_tokens_before is None"):
        unchanged_prefix([event("OTRC", 100, 2400, total_tokens_before=None)])
    assert unchanged_prefix([]) is None


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


def run_cli(monkeypatch, capsys, lines, *options):
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    code = cli.main(["cost", "--block", "16", "--discount", "0.1", "--json", *options])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def test_cost_cli_prices_exact_and_estimate(monkeypatch, capsys):
    lines = [
        call("agent", 160, ["s", "t"]),
        call("summary", 70, ["s", "t", "a", "o"]),  # a summary request never feeds the agent's cache
        call("agent", 210, ["s", "t", "a", "o"]),
    ]
    code, out, _ = run_cli(monkeypatch, capsys, lines)
    assert code == 0
    # exact: call 2 shares s,t (150 of 200 local tokens: 210 * 150 // 200 = 157 -> 144) with agent
    # call 1, not 200 with the summary request
    assert out["exact"] == {"fresh": 226, "cached": 144, "summary": 70, "billed_input": pytest.approx(310.4)}
    # estimate: growth 160 -> 210 caches floor16(160) = 160: fresh 210, C = 210 + 16 + 70
    assert out["estimated"] == {"fresh": 210, "cached": 160, "summary": 70, "billed_input": pytest.approx(296.0)}


def test_cost_cli_without_message_ids_gives_only_the_estimate(monkeypatch, capsys):
    code, out, _ = run_cli(monkeypatch, capsys, [call("agent", 100), call("agent", 150)])
    assert code == 0 and out["exact"] is None
    assert out["estimated"]["cached"] == 96  # floor16(100)
    assert out["measured"] is None  # no server cached counts


def test_cost_cli_places_otrc_events_and_prices_server_cached_counts(monkeypatch, capsys):
    lines = [
        json.dumps({"kind": "agent", "prompt_tokens": 300, "cached_tokens": 0}),
        json.dumps({"kind": "agent", "prompt_tokens": 2500, "cached_tokens": 288}),
        json.dumps(
            {
                "kind": "agent",
                "prompt_tokens": 2450,
                "cached_tokens": 2048,
                "events": [event("OTRC", 2000, 2400, trigger="St")],
            }
        ),
    ]
    code, out, _ = run_cli(monkeypatch, capsys, lines)
    assert code == 0
    # estimate: 0, floor16(300) = 288, OTRC share 2000 * 2500 // 2400 = 2083 -> 2080: cached 2368,
    # fresh 5250 - 2368 = 2882, C = 2882 + 236.8
    assert out["estimated"] == {"fresh": 2882, "cached": 2368, "summary": 0, "billed_input": pytest.approx(3118.8)}
    # measured: 0 + 288 + 2048 = 2336 cached, 2914 fresh
    assert out["measured"] == {"fresh": 2914, "cached": 2336, "summary": 0, "billed_input": pytest.approx(3147.6)}


def test_cost_cli_names_the_bad_line_and_field(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, [call("agent", 100), '{"kind": "tool", "prompt_tokens": 3}'])
    assert code == 2
    assert "line 2" in err and "kind" in err and "'tool'" in err
    code, _, err = run_cli(
        monkeypatch,
        capsys,
        [
            '{"kind": "agent", "prompt_tokens": 3, "events": [{"primitive": '
            '"OTRC", "unchanged_prefix_tokens": -4, "total_tokens_before": 9}]}'
        ],
    )
    assert code == 2 and err.count("\n") == 1 and "unchanged_prefix_tokens is -4" in err


def test_config_key_selects_one_of_the_named_methods_and_defaults_to_the_estimate():
    from ctxpolicy.study.config import ConfigError, load_config, validate_config
    from ctxpolicy.metrics.cost_methods import DEFAULT as DEFAULT_METHOD
    from ctxpolicy.metrics.cost_methods import billed_columns, descriptions, names

    METHODS = names()
    config = load_config(Path(__file__).resolve().parents[1] / "config" / "config.yaml")
    assert config["metrics"]["cost_method"] == DEFAULT_METHOD == "estimated"
    assert set(billed_columns()) == set(METHODS) == set(descriptions())
    assert {"estimated", "exact", "measured"} <= set(METHODS)
    assert billed_columns()["estimated"] == "billed_est" and billed_columns()["exact"] == "billed_exact"
    assert "cl100k_base" in descriptions()["exact"]  # the exact method names its tokenizer
    for method in METHODS:
        assert validate_config({**config, "metrics": {"cost_method": method}})["metrics"]["cost_method"] == method
    with pytest.raises(ConfigError, match="cost_method"):
        validate_config({**config, "metrics": {"cost_method": "cheap"}})


def test_cost_cli_prints_a_table_rounded_for_people_by_default(monkeypatch, capsys):
    lines = [call("agent", 160, ["s", "t"]), call("agent", 213, ["s", "t", "a", "o"])]
    code, full, _ = run_cli(monkeypatch, capsys, lines)  # --json: full precision
    assert code == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert cli_cost.main(SimpleNamespace(block=16, discount=0.1, input=None, json=False)) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("<stdin>: billed input in tokens (cache block 16 tokens")
    assert table[1].split() == ["method", "billed", "input", "fresh", "cached", "summary", "input"]
    rows = {line.split()[0]: line.split()[1:] for line in table[2:]}
    from ctxpolicy.metrics.cost_methods import names

    assert set(rows) == set(names()) >= {"estimated", "exact", "measured"}
    assert rows["measured"] == ["-"] * 4  # no server-reported cached tokens in these calls
    for method in ("estimated", "exact"):
        assert rows[method][0] == f"{full[method]['billed_input']:,.1f}"
        assert rows[method][1] == f"{full[method]['fresh']:,}"


def _anthropic_walked_call_by_call(sequences, tokens, prompts, start):
    """The Anthropic cache as its documentation states it, one call after another: a call reads
    the longest prefix of its prompt that an earlier call wrote and that is still alive (5 minutes
    since its last write or read; without times nothing expires), then writes the prefix through
    each breakpoint (first message, all but the newest two, whole prompt) of 1,024 tokens or more."""
    from ctxpolicy.metrics.cost_methods.anthropic import MIN_PREFIX, TTL_S

    touched: dict[tuple, float] = {}  # prefix -> time of its latest write or read
    cached, written = [], []
    for sequence, sizes, prompt, now in zip(sequences, tokens, prompts, start):

        def server(length, sizes=sizes, prompt=prompt):
            return sum(sizes[:length]) * prompt // max(sum(sizes), 1)

        alive = [
            length
            for length in range(1, len(sequence) + 1)
            if (key := tuple(sequence[:length])) in touched
            and (np.isnan(now) or np.isnan(touched[key]) or now - touched[key] <= TTL_S)
        ]
        read = min(server(max(alive)), prompt) if alive else 0
        if alive:
            key = tuple(sequence[: max(alive)])
            touched[key] = now if np.isnan(touched[key]) else max(touched[key], now)
        for length in {1, len(sequence) - 2, len(sequence)}:
            if 1 <= length <= len(sequence) and server(length) >= MIN_PREFIX:
                key = tuple(sequence[:length])
                touched[key] = now if key not in touched or np.isnan(touched[key]) else max(touched[key], now)
        cached.append(read)
        written.append(prompt - read if prompt >= MIN_PREFIX else 0)
    return cached, written


@pytest.mark.parametrize("seed", range(12))
def test_the_anthropic_count_is_the_cache_walked_call_by_call(seed):
    from ctxpolicy.metrics import cost_methods
    from ctxpolicy.metrics.cost_methods.base import RunCalls, Sequences

    rng = np.random.default_rng(seed)
    size_of = {m: int(rng.integers(50, 700)) for m in range(12)}
    sequences, prompt = [], [0]
    for _ in range(int(rng.integers(1, 16))):
        prompt = prompt + [int(m) for m in rng.integers(1, 12, size=2)]
        if rng.random() < 0.3:  # a compression: a message dropped from the middle
            prompt = prompt[:1] + prompt[2:]
        if rng.random() < 0.15:  # a fresh start: the first message alone
            prompt = prompt[:1]
        sequences.append(prompt)
    tokens = [[size_of[m] for m in s] for s in sequences]
    prompts = [sum(t) + int(rng.integers(0, 80)) for t in tokens]
    gaps = rng.choice([5.0, 60.0, 290.0, 400.0, 1000.0], size=len(sequences))
    start = np.cumsum(gaps) if seed % 3 else np.full(len(sequences), np.nan)  # every third: no times
    calls = RunCalls(
        np.array(prompts),
        start=np.array(start, dtype=float),
        sequences=Sequences.of([np.array(s) for s in sequences], [np.array(t) for t in tokens]),
    )
    got = cost_methods.method("anthropic").counts(calls, 16)
    cached, written = _anthropic_walked_call_by_call(sequences, tokens, prompts, list(start))
    assert got.cached.tolist() == cached and got.written.tolist() == written
