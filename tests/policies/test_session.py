"""PolicySession: the persistent working context the harness, the proxy and a replay share."""

from __future__ import annotations

import pytest
from policy_histories import text_history, text_step, tool_history

from ctxpolicy.policies import (
    CLEARED_MARKER,
    DeterministicSummarizer,
    PolicyError,
    PolicySession,
    apply_policy,
    parse_spec,
)
from ctxpolicy.tokens import count_messages


def feed(session: PolicySession, history: list[dict], prefix: int = 2):
    """Drive the session as an agent would: one call per (assistant, observation) pair."""
    session.append(history[:prefix])
    turns = [session.prepare()]
    for start in range(prefix, len(history), 2):
        session.append(history[start : start + 2])
        turns.append(session.prepare())
    return turns


def test_full_context_sends_everything_and_counts_calls():
    history = text_history([(5, 30)] * 4)
    session = PolicySession("FC")
    turns = feed(session, history)
    assert turns[-1].messages == history and session.context == history
    assert [t.calls for t in turns] == list(range(len(turns))) and session.calls_made == len(turns)
    assert all(not t.events and t.tokens_before == t.tokens_after for t in turns)


def test_what_was_removed_stays_removed():
    history = text_history([(5, 200)] * 6)
    threshold = count_messages(history[:8])
    session = PolicySession("TR/Th/0.5", threshold=threshold)
    turns = feed(session, history)
    fired = [i for i, t in enumerate(turns) if t.events]
    assert fired, "truncation should fire once the history passes the threshold"
    first = fired[0]
    dropped = [m for m in history[: 2 + 2 * first] if m not in turns[first].messages]
    assert dropped
    for turn in turns[first:]:
        assert not any(m in turn.messages for m in dropped)
    # the stateless application to the whole history differs: persistence is the session's job
    event = turns[first].events[0]
    assert event["total_tokens_before"] == turns[first].tokens_before
    assert event["total_tokens_after"] == turns[first].tokens_after == count_messages(turns[first].messages)


def test_unchanged_context_is_a_prefix_of_the_next_call():
    history = text_history([(5, 200)] * 10)
    session = PolicySession("OTRC/St")
    turns = feed(session, history)
    for previous, current in zip(turns, turns[1:]):
        if not current.events:
            assert current.messages[: len(previous.messages)] == previous.messages
    assert any(CLEARED_MARKER in str(m.get("content")) for m in turns[-1].messages)


def test_session_matches_the_stateless_engine_step_by_step():
    """Each prepare is apply_policy on (last context + new messages) with calls = prepares so far."""
    history = tool_history([(5, [150, 40])] * 5)
    spec = parse_spec("OTRC+TR/St+Th/0.5")
    session = PolicySession(spec, threshold=500)
    context: list[dict] = []
    chunks = [history[:2]] + [history[start : start + 3] for start in range(2, len(history), 3)]
    for calls, chunk in enumerate(chunks):
        expected = apply_policy(spec, context + chunk, threshold=500, calls=calls)
        session.append(chunk)
        turn = session.prepare()
        assert turn.messages == expected.messages and turn.events == expected.events
        context = list(expected.messages)
    assert turn.events, "the last call is past the threshold"


def test_summary_calls_are_reported_and_a_caller_may_set_the_clock():
    summarizer = DeterministicSummarizer()
    history = text_history([(5, 200)] * 6)
    session = PolicySession("SU/Th/0.5", threshold=300, summarizer=summarizer)
    session.append(history)
    turn = session.prepare(calls=7)
    assert turn.calls == 7 and turn.summary_calls and summarizer.requests
    assert turn.events[0]["primitive"] == "SU"


def test_pending_messages_wait_for_prepare_and_bad_messages_are_refused():
    session = PolicySession("FC", messages=text_history([]))
    assert session.context == [] and len(session.pending) == 2
    session.prepare()
    session.append(text_step(0, 3, 3))
    assert len(session.context) == 2 and len(session.pending) == 2
    with pytest.raises(PolicyError, match="role"):
        session.append([{"content": "no role"}])
    with pytest.raises(PolicyError, match="threshold"):
        PolicySession("TR/Th/0.5").prepare()
