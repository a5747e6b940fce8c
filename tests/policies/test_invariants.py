"""Property tests: the invariants every policy keeps, on random histories in both formats."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from policy_histories import histories, tool_pairs_are_well_formed

from ctxpolicy.policies import PLACEHOLDER, DeterministicSummarizer, apply_policy, parse_spec
from ctxpolicy.policies.clearing import clear_tool_results
from ctxpolicy.policies.history import (
    is_observation,
    is_placeholder,
    placeholder_for,
    protected_prefix_length,
    units,
    uses_tool_calls,
)
from ctxpolicy.tokens import count_message, count_messages

PROPERTY_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RULE_BASED = [
    "TR/Th/0.5",
    "TR/Th/0.3",
    "TR/Th/0.7",
    "TRC/Th",
    "OTRC/St",
    "OTRC+TR/St+Th/0.5",
    "CC/Th",
    "DIGEST/Th/0.5",
    "CT+DIGEST/Th/0.5",
]
SUMMARIZING = [
    "SU/Th/0.5",
    "S/Th/0.5",
    "SU-p/Th/0.3",
    "S-p/Th/0.7",
    "TRC+SU/Th",
    "TRC+S/Th",
    "OTRC+SU-p/St+Th/0.5",
    "OTRC+S-p/St+Th/0.5",
    "CT+S-p/Th/0.5",
]
ALL = RULE_BASED + SUMMARIZING

thresholds = st.integers(min_value=1, max_value=4000)


def window_tokens(messages):
    return count_messages(messages[protected_prefix_length(messages) :])


@pytest.mark.parametrize("spec", ALL)
@PROPERTY_SETTINGS
@given(history=histories, threshold=thresholds)
def test_prefix_intact_input_untouched_and_api_valid(spec, history, threshold):
    original = copy.deepcopy(history)
    result = apply_policy(spec, history, threshold=threshold, summarizer=DeterministicSummarizer())
    assert history == original  # never mutated
    prefix = protected_prefix_length(history)
    assert result.messages[:prefix] == history[:prefix]
    assert tool_pairs_are_well_formed(result.messages)
    for event in result.events:
        assert set(event) == {
            "primitive",
            "trigger",
            "depth",
            "window_tokens_before",
            "window_tokens_after",
            "total_tokens_before",
            "total_tokens_after",
            "target_tokens",
            "messages_removed",
            "messages_cleared",
            "summary_tokens",
            "first_changed_index",
            "unchanged_prefix_tokens",
            "fallback",
        }
        assert event["first_changed_index"] is None or event["first_changed_index"] >= prefix
    if result.events:
        assert result.events[-1]["total_tokens_after"] == count_messages(result.messages)
    if result.message_tokens is not None:
        assert result.message_tokens == [count_message(m) for m in result.messages]
    # the counts a caller hands over (as PolicySession does) change nothing but the work
    counted = apply_policy(
        spec,
        history,
        threshold=threshold,
        summarizer=DeterministicSummarizer(),
        message_tokens=[count_message(m) for m in history],
    )
    assert (counted.messages, counted.events) == (result.messages, result.events)
    assert counted.message_tokens == [count_message(m) for m in counted.messages]


@pytest.mark.parametrize("spec", ["TR/Th/0.5", "SU/Th/0.5", "TRC/Th", "CC/Th", "OTRC+S-p/St+Th/0.5"])
@PROPERTY_SETTINGS
@given(history=histories)
def test_threshold_policy_under_threshold_changes_nothing(spec, history):
    threshold = count_messages(history)
    result = apply_policy(spec, history, threshold=threshold, calls=0, summarizer=DeterministicSummarizer())
    assert result.messages == history
    assert result.events == [] and result.summary_calls == []


@PROPERTY_SETTINGS
@given(history=histories, depth=st.sampled_from([0.3, 0.5, 0.7]))
def test_tr_reaches_target_unless_only_the_last_unit_is_left_and_keeps_the_last_message(history, depth):
    result = apply_policy(f"TR/Th/{depth}", history, threshold=0)
    prefix = protected_prefix_length(history)
    window = result.messages[prefix:]
    target = int((1 - depth) * window_tokens(history))
    if len(history) > prefix:
        assert result.messages[-1] is history[-1]
        last_unit_start = units(window)[-1][0] if window else 0
        assert window_tokens(result.messages) <= target or last_unit_start == 0
        assert result.messages[prefix:] == history[len(history) - len(window) :]  # whole oldest messages dropped


@PROPERTY_SETTINGS
@given(history=histories)
def test_trc_keeps_three_most_recent_results_and_reaches_target_when_reachable(history):
    result = apply_policy("TRC/Th", history, threshold=0)
    tool_mode = uses_tool_calls(history)
    prefix = protected_prefix_length(history)
    recent = [m for m in history[prefix:] if is_observation(m, tool_mode)][-3:]
    kept_ids = {id(m) for m in result.messages}
    target = int(0.5 * window_tokens(history))
    event = result.events[0] if result.events else None
    cleared = clear_tool_results(history[prefix:], target, fall_back_to_tr=False)
    if cleared is not None:  # clearing alone never touches the three most recent results
        assert all(any(m is kept for kept in cleared.window) for m in recent)
    if event is None or event["fallback"] is None:  # only the TR fallback may remove them
        assert all(id(m) in kept_ids for m in recent)
    if event and event["fallback"] is None:
        assert window_tokens(result.messages) <= target
        assert event["messages_removed"] == 0 and len(result.messages) == len(history)
        for before, after in zip(history, result.messages):
            assert after is before or (
                after["content"] == PLACEHOLDER
                and after["role"] == before["role"]
                and after.get("extra") == before.get("extra")
                and after.get("tool_call_id") == before.get("tool_call_id")
            )


@PROPERTY_SETTINGS
@given(history=histories, calls=st.integers(0, 30))
def test_otrc_replaces_exactly_the_ninth_message_from_the_end(history, calls):
    result = apply_policy("OTRC/St", history, calls=calls)
    position = len(history) - 9
    fires = (
        calls >= 5
        and len(history) >= 10
        and position >= protected_prefix_length(history)
        and not is_placeholder(history[position])
    )
    tool_mode = uses_tool_calls(history[protected_prefix_length(history) :])
    assert len(result.messages) == len(history)
    for index, (before, after) in enumerate(zip(history, result.messages)):
        if fires and index == position:
            # a tool result under the tool-result placeholder, anything else under the message one
            assert after["content"] == placeholder_for(before, tool_mode)
            assert (after["content"] == PLACEHOLDER) == is_observation(before, tool_mode)
            assert {k: v for k, v in after.items() if k != "content"} == {
                k: v for k, v in before.items() if k != "content"
            }
        else:
            assert after is before
    assert len(result.events) == (1 if fires else 0)


@pytest.mark.parametrize("spec", ["SU-p/Th/0.5", "S-p/Th/0.3", "S-p/Th/0.7"])
@PROPERTY_SETTINGS
@given(history=histories)
def test_partial_summary_keeps_the_longest_verbatim_tail_within_half_the_allowance(spec, history):
    parsed = parse_spec(spec)
    result = apply_policy(parsed, history, threshold=0, summarizer=DeterministicSummarizer(words=5))
    prefix = protected_prefix_length(history)
    window = history[prefix:]
    target = int((1 - parsed.depth) * count_messages(window))
    if not result.events:  # nothing older than the tail: the whole window fits the tail budget
        assert count_messages(window) <= target // 2
        return
    event = result.events[0]
    if event["fallback"] is not None:
        return
    summary, tail = result.messages[prefix], result.messages[prefix + 1 :]
    assert summary["role"] == "user" and summary["content"].startswith("[ctxpolicy:summary]")
    assert all(a is b for a, b in zip(tail, window[len(window) - len(tail) :]))
    assert count_messages(tail) <= target // 2
    spans = units(window)
    tail_start = len(window) - len(tail)
    previous = next((s for s in spans if s[1] == tail_start), None)
    assert previous is not None
    assert count_messages(tail) + sum(count_message(m) for m in window[previous[0] : previous[1]]) > target // 2


@pytest.mark.parametrize(
    "spec", ["TR/Th/0.5", "TRC/Th", "OTRC/St", "SU/Th/0.5", "S-p/Th/0.5", "CC/Th", "DIGEST/Th/0.3"]
)
@PROPERTY_SETTINGS
@given(history=histories)
def test_first_changed_index_marks_the_end_of_the_identical_prefix(spec, history):
    result = apply_policy(spec, history, threshold=0, calls=10, summarizer=DeterministicSummarizer())
    assert len(result.events) <= 1
    for event in result.events:
        index = event["first_changed_index"]
        assert result.messages[:index] == history[:index]
        assert index == len(result.messages) or result.messages[index] != history[index]
        assert event["window_tokens_after"] == window_tokens(result.messages)
        assert event["total_tokens_before"] == count_messages(history)
        assert event["unchanged_prefix_tokens"] == count_messages(history[:index])
