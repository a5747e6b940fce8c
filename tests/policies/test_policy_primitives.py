"""Example-based tests of each rule-based primitive, in both mini-swe-agent formats."""

import pytest
from policy_histories import text_history, tool_history, tool_pairs_are_well_formed

from ctxpolicy.policies import PLACEHOLDER, PolicyError, apply_policy
from ctxpolicy.policies.history import MESSAGE_PLACEHOLDER
from ctxpolicy.tokens import count_messages

TEXT = text_history([(10, 200)] * 8)  # 2 + 16 messages, observations dominate
TOOL = tool_history([(10, [200])] * 8)
TOOL_MULTI = tool_history([(5, [150, 150])] * 5)  # assistant + two results per step


def window(messages):
    return messages[2:]


@pytest.mark.parametrize("history", [TEXT, TOOL], ids=["text", "tool"])
def test_tr_drops_oldest_whole_messages_until_at_or_under_target(history):
    result = apply_policy("TR/Th/0.5", history, threshold=100)
    target = int(0.5 * count_messages(window(history)))
    kept = window(result.messages)
    assert count_messages(kept) <= target
    assert kept == history[len(history) - len(kept) :]
    # dropping one message fewer would have been over target
    assert count_messages(history[len(history) - len(kept) - 1 :]) > target or len(kept) == len(window(history))
    (event,) = result.events
    assert event["primitive"] == "TR" and event["messages_removed"] == len(history) - len(result.messages)
    assert event["first_changed_index"] == 2 and event["target_tokens"] == target


def test_tr_keeps_an_oversized_last_message():
    history = text_history([(5, 20), (5, 20), (5, 2000)])
    result = apply_policy("TR/Th/0.7", history, threshold=0)
    assert result.messages[2:] == [history[-1]]
    assert result.events[0]["window_tokens_after"] > result.events[0]["target_tokens"]


def test_tr_in_tool_mode_never_leaves_a_dangling_half_of_a_tool_call():
    for depth in (0.3, 0.5, 0.7):
        result = apply_policy(f"TR/Th/{depth}", TOOL_MULTI, threshold=0)
        assert tool_pairs_are_well_formed(result.messages)
        assert result.messages[2]["role"] == "assistant"


@pytest.mark.parametrize("history", [TEXT, TOOL], ids=["text", "tool"])
def test_trc_clears_oldest_results_keeps_assistants_and_three_recent_results(history):
    result = apply_policy("TRC/Th", history, threshold=100)
    assert len(result.messages) == len(history)
    observation_role = "tool" if history is TOOL else "user"
    results = [(i, m) for i, m in enumerate(result.messages) if i >= 2 and m["role"] == observation_role]
    cleared = [i for i, m in results if m["content"] == PLACEHOLDER]
    assert cleared == [i for i, _ in results[: len(cleared)]]  # oldest first
    assert all(m is history[i] for i, m in results[-3:])
    assert all(result.messages[i] is history[i] for i in range(len(history)) if history[i]["role"] == "assistant")
    assert count_messages(window(result.messages)) <= int(0.5 * count_messages(window(history)))
    cleared_message = result.messages[cleared[0]]
    assert cleared_message["extra"] == history[cleared[0]]["extra"]
    assert cleared_message.get("tool_call_id") == history[cleared[0]].get("tool_call_id")
    (event,) = result.events
    assert event["messages_cleared"] == len(cleared) and event["fallback"] is None
    assert event["first_changed_index"] == cleared[0]
    assert event["unchanged_prefix_tokens"] == count_messages(history[: cleared[0]])


def test_trc_falls_back_to_tr_when_clearing_cannot_reach_the_target():
    history = text_history([(300, 30)] * 6)  # assistants dominate, clearing cannot halve the window
    result = apply_policy("TRC/Th", history, threshold=0)
    (event,) = result.events
    assert event["fallback"] == "TR" and event["messages_removed"] > 0
    assert count_messages(window(result.messages)) <= event["target_tokens"]


def test_trc_skips_placeholders_and_summaries():
    summary = {"role": "user", "content": "[ctxpolicy:summary] " + "earlier work " * 100}
    steps = text_history([(5, 300)] * 8)[2:]
    steps[1] = {**steps[1], "content": PLACEHOLDER}
    history = text_history([])[:2] + [summary] + steps
    result = apply_policy("TRC/Th", history, threshold=0)
    (event,) = result.events
    assert event["fallback"] is None
    assert result.messages[2] is summary and result.messages[4] is history[4]
    assert event["messages_cleared"] == sum(1 for a, b in zip(history, result.messages) if a is not b)


@pytest.mark.parametrize("history", [TEXT, TOOL], ids=["text", "tool"])
def test_otrc_clears_the_result_before_the_four_most_recent_results(history):
    result = apply_policy("OTRC/St", history)
    index = len(history) - 9
    assert result.messages[index]["content"] == PLACEHOLDER
    observation_role = "tool" if history is TOOL else "user"
    later_results = [m for m in history[index + 1 :] if m["role"] == observation_role]
    assert history[index]["role"] == observation_role and len(later_results) == 4
    assert [m for i, m in enumerate(result.messages) if i != index] == [m for i, m in enumerate(history) if i != index]
    (event,) = result.events
    assert event["trigger"] == "St" and event["target_tokens"] is None and event["first_changed_index"] == index
    assert event["unchanged_prefix_tokens"] == count_messages(history[:index])


def test_otrc_waits_for_five_calls_and_ten_messages_and_spares_the_prefix():
    history = text_history([(5, 50)] * 5)  # 12 messages
    assert apply_policy("OTRC/St", history, calls=4).events == []
    assert apply_policy("OTRC/St", history, calls=5).events != []
    assert apply_policy("OTRC/St", history[:11], calls=5).events != []
    assert apply_policy("OTRC/St", history[:10], calls=5).events == []  # ninth from the end is the task
    assert apply_policy("OTRC/St", history[:9], calls=9).events == []


def test_otrc_is_positional_after_a_stacked_rewrite():
    summary = {"role": "user", "content": "[ctxpolicy:summary] done so far"}
    rewritten = text_history([])[:2] + [summary] + text_history([(5, 50)] * 4)[2:]
    assert rewritten.index(summary) == len(rewritten) - 9
    result = apply_policy("OTRC/St", rewritten, calls=6)
    # the summary is cleared by position, under the placeholder that claims no tool result
    assert result.messages[2]["content"] == MESSAGE_PLACEHOLDER and result.messages[2]["role"] == "user"


def test_otrc_stack_runs_otrc_every_step_and_the_primitive_over_threshold():
    under = apply_policy("OTRC+TR/St+Th/0.5", TEXT, threshold=10**6)
    assert [e["primitive"] for e in under.events] == ["OTRC"]
    over = apply_policy("OTRC+TR/St+Th/0.5", TEXT, threshold=10)
    assert [(e["primitive"], e["trigger"]) for e in over.events] == [("OTRC", "St"), ("TR", "Th")]
    assert over.events[1]["window_tokens_before"] == over.events[0]["window_tokens_after"]


def test_fc_never_compresses():
    result = apply_policy("FC", TEXT, threshold=1)
    assert result.messages == TEXT and result.events == []


def test_step_trigger_fires_without_threshold():
    result = apply_policy("TR/St/0.5", TEXT)
    assert result.events and result.events[0]["trigger"] == "St"


def test_threshold_is_required_for_th_policies():
    with pytest.raises(PolicyError, match="threshold"):
        apply_policy("TR/Th/0.5", TEXT)


def test_messages_without_role_are_rejected():
    with pytest.raises(PolicyError, match=r"messages\[1\]: missing field 'role'"):
        apply_policy("OTRC/St", [{"role": "system", "content": ""}, {"content": "x"}])


def test_default_calls_counts_assistant_messages():
    short = text_history([(5, 50)] * 5)  # 5 assistant messages, 12 messages
    assert apply_policy("OTRC/St", short).events
    assert not apply_policy("OTRC/St", short, calls=4).events
