"""Summaries written by the embedded local LLM (model entry ``qwen05b`` of config/config.yaml), for real.

Histories and summaries are kept small: on two shared CPU cores one call takes about a minute.
"""

from __future__ import annotations


import pytest
from policy_histories import text_history, tool_history

from ctxpolicy.policies import SUMMARY_MARKER, EndpointSummarizer, apply_policy

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def summarizer(embedded_llm):
    # a few tokens show that the summary came back and was put in place; generation is the slow part
    return EndpointSummarizer(embedded_llm.base_url, embedded_llm.served_name, max_tokens=12, timeout_s=600)


def test_structured_partial_summary_in_text_mode(summarizer):
    history = text_history([(5, 20)] * 3)  # small: two shared CPU cores
    result = apply_policy("S-p/Th/0.5", history, threshold=0, summarizer=summarizer)
    (call,) = result.summary_calls
    assert call.error is None, call.error
    assert [m["role"] for m in call.request_messages] == ["system", "user"]  # the model's chat template takes both
    assert call.text.strip() and call.prompt_tokens > 100 and call.completion_tokens > 0
    assert call.end > call.start
    summary = result.messages[2]
    assert summary["role"] == "user" and summary["content"].startswith(SUMMARY_MARKER)
    assert result.messages[:2] == history[:2]
    (event,) = result.events
    assert event["primitive"] == "S-p" and event["summary_tokens"] > 0


def test_free_summary_in_tool_calling_mode(summarizer):
    history = tool_history([(5, [30])] * 4)
    result = apply_policy("TRC+SU/Th", history, threshold=0, summarizer=summarizer)
    assert [e["primitive"] for e in result.events] == ["TRC", "SU"]
    (call,) = result.summary_calls
    assert call.error is None, call.error
    assert result.messages[2]["content"].startswith(SUMMARY_MARKER) and len(result.messages) == 3
