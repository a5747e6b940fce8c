"""The Complexity Trap's policies in our notation (``kM`` keep-last-M, ``TnN`` turn-count trigger):
parsing and printing, what each one does to a history, the presets, and a replay over a corpus."""

from __future__ import annotations

import json

import pytest
from policy_histories import text_history, tool_history

from ctxpolicy.policies import NEIGHBOUR_PRESETS, DeterministicSummarizer, apply_policy, parse_spec
from ctxpolicy.policies.history import PLACEHOLDER, SUMMARY_MARKER, is_placeholder, text_of
from ctxpolicy.policies.spec import PolicySpecError


@pytest.mark.parametrize(
    "text, slug, turns, keep, step, turn",
    [
        ("OTRC/St/k10", "OTRC_St_k10", None, 10, ("OTRC",), ()),
        ("SU-p/Tn21/k10", "SU-p_Tn21_k10", 21, 10, (), ("SU-p",)),
        ("S-p/Tn21/k10", "S-p_Tn21_k10", 21, 10, (), ("S-p",)),
        ("OTRC+SU-p/St+Tn21/k10", "OTRCplusSU-p_StplusTn21_k10", 21, 10, ("OTRC",), ("SU-p",)),
    ],
)
def test_keep_and_turn_forms_parse_print_and_round_trip(text, slug, turns, keep, step, turn):
    spec = parse_spec(text)
    assert (str(spec), spec.slug, spec.turns, spec.keep, spec.step_stages, spec.turn_stages) == (
        text,
        slug,
        turns,
        keep,
        step,
        turn,
    )
    assert parse_spec(str(spec)) == spec and spec.depth is None
    assert not spec.needs_threshold and not spec.depth_tunable


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("TR/Tn21/k10", "partial summary"),
        ("SU/Tn21/k10", "partial summary"),
        ("SU-p/Tn21", "needs the turns it keeps"),
        ("SU-p/Tn10/k10", "M < N"),
        ("TR/Th/k10", "OTRC/St and to turn-triggered"),
        ("OTRC+TR/St+Th/k10", "OTRC/St and to turn-triggered"),
        ("OTRC+SU-p/Tn21/k10", "use St\\+TnN"),
        ("SU-p/St+Tn21/k10", "TnN is OTRC every step"),
        ("OTRC/St/k0", "M >= 1"),
    ],
)
def test_bad_keep_and_turn_forms_name_the_problem(bad, reason):
    with pytest.raises(PolicySpecError, match=reason) as info:
        parse_spec(bad)
    assert "OTRC/St/k10" in str(info.value)  # the valid forms list them


def test_masking_keeps_the_last_m_tool_results_every_step():
    history = text_history([(5, 40)] * 14)  # 14 tool results, each longer than the placeholder
    result = apply_policy("OTRC/St/k10", history)
    observations = [m for m in result.messages[2:] if m["role"] == "user"]
    assert [is_placeholder(m) for m in observations] == [True] * 4 + [False] * 10
    assert result.messages[:2] == history[:2] and all(
        m["role"] != "user" or m in observations for m in result.messages[2:]
    )
    assert [e["messages_cleared"] for e in result.events] == [4] and result.events[0]["trigger"] == "St"
    again = apply_policy("OTRC/St/k10", result.messages)  # nothing more to clear
    assert again.events == [] and again.messages == result.messages
    tools = apply_policy("OTRC/St/k10", tool_history([(3, [40, 40])] * 6))  # 12 results in tool mode
    cleared = [m for m in tools.messages if m["role"] == "tool" and PLACEHOLDER in text_of(m)]
    assert len(cleared) == 2


def test_the_turn_trigger_summarizes_all_but_the_last_m_turns_once_n_are_there():
    summarizer = DeterministicSummarizer()
    below = text_history([(5, 20)] * 20)  # 20 turns: under N = 21
    assert apply_policy("SU-p/Tn21/k10", below, summarizer=summarizer).events == []
    history = text_history([(5, 20)] * 21)
    result = apply_policy("SU-p/Tn21/k10", history, summarizer=summarizer)
    window = result.messages[2:]
    assert SUMMARY_MARKER in text_of(window[0]) and window[1:] == history[2 + 2 * 11 :]  # the last 10 turns
    assert sum(m["role"] == "assistant" for m in window) == 10
    (event,) = result.events
    assert (event["trigger"], event["messages_removed"], event["target_tokens"]) == ("Tn", 22, None)
    # the next firing waits for 21 turns again: summary + 10 turns + 10 more is still under
    grown = result.messages + text_history([(5, 20)] * 10)[2:]
    assert apply_policy("SU-p/Tn21/k10", grown, summarizer=summarizer).events == []


def test_the_hybrid_masks_every_step_and_summarizes_on_the_turn_count():
    history = text_history([(5, 40)] * 21)
    result = apply_policy("OTRC+SU-p/St+Tn21/k10", history, summarizer=DeterministicSummarizer())
    assert [(e["primitive"], e["trigger"]) for e in result.events] == [("OTRC", "St"), ("SU-p", "Tn")]
    window = result.messages[2:]
    assert SUMMARY_MARKER in text_of(window[0]) and sum(m["role"] == "assistant" for m in window) == 10
    assert not any(is_placeholder(m) for m in window[1:])  # the 10 kept turns' results are the last 10


def test_the_presets_are_the_complexity_trap_s_three_policies():
    specs = {name: str(p.policy) for name, p in NEIGHBOUR_PRESETS.items()}
    assert specs == {
        "complexity-trap-masking": "OTRC/St/k10",
        "complexity-trap-summary": "SU-p/Tn21/k10",
        "complexity-trap-hybrid": "OTRC+SU-p/St+Tn21/k10",
    }


def test_compress_takes_a_neighbour_preset_by_name(tmp_path, capsys):
    from ctxpolicy.cli import main

    path = tmp_path / "history.json"
    path.write_text(json.dumps({"messages": text_history([(5, 40)] * 12)}))
    assert main(["compress", "--policy", "complexity-trap-masking", "-i", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [e["messages_cleared"] for e in out["events"]] == [2]


def test_the_presets_replay_over_a_corpus_and_a_config_may_name_them(tmp_path):
    """Replayed beside FC over recorded FC runs, read back by aggregate; a config's grid takes
    the spellings (config/schema.yaml's policy pattern)."""
    from ctxpolicy import cli
    from ctxpolicy.study.config import validate_config
    from ctxpolicy.metrics.aggregate import aggregate
    from ctxpolicy.testing.transcripts import transcript, write_fc_history

    write_fc_history(tmp_path / "FC" / "task-0__a1", transcript(3, "task-0", 24), seed=3, task_id="task-0")
    specs = [p.spec for p in NEIGHBOUR_PRESETS.values()]
    assert cli.main(["replay", "--runs", str(tmp_path / "FC"), "--policies", *specs, "--out", str(tmp_path / "r")]) == 0
    tables = aggregate([tmp_path / "r"], processes=1)
    assert not tables.problems
    fired = dict(zip(tables.runs["policy"].astype(str), tables.runs["compression_events"]))
    assert set(fired) == set(specs) and all(n >= 1 for n in fired.values())
    config = {
        "study": "x",
        "imported": {"path": "c", "benchmark": "b", "model": "m"},
        "grid": {"full_comparison": {"policies": ["FC", *specs]}},
    }
    validate_config(config)
