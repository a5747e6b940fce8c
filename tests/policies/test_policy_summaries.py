"""SU, S, SU-p, S-p and the stacks with TRC: requests, summary messages, fallbacks, summarizers."""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from policy_histories import TASK, text_history, tool_history

from ctxpolicy.policies import (
    PLACEHOLDER,
    SUMMARY_MARKER,
    DeterministicSummarizer,
    EndpointSummarizer,
    HttpTransport,
    PolicyError,
    apply_policy,
)
from ctxpolicy.tokens import count_messages

HISTORY = text_history([(20, 150)] * 6)
TOOL_HISTORY = tool_history([(20, [150])] * 6)


def target_of(history, depth=0.5):
    return int((1 - depth) * count_messages(history[2:]))


@pytest.mark.parametrize("history", [HISTORY, TOOL_HISTORY], ids=["text", "tool"])
def test_su_replaces_the_window_with_one_user_summary_built_from_the_window_only(history):
    summarizer = DeterministicSummarizer()
    result = apply_policy("SU/Th/0.5", history, threshold=0, summarizer=summarizer)
    assert result.messages[:2] == history[:2]
    (summary,) = result.messages[2:]
    assert summary["role"] == "user" and summary["content"].startswith(SUMMARY_MARKER)
    assert "extra" not in summary
    (request,) = summarizer.requests
    assert [m["role"] for m in request] == ["system", "user"]
    prompt = "\n".join(m["content"] for m in request)
    assert TASK["content"] not in prompt and history[0]["content"] not in prompt
    assert "### assistant" in prompt and "### tool result" in prompt
    assert "cat file5" in prompt  # the commands, from text blocks or tool calls
    assert f"approximately {round(0.75 * target_of(history))} words" in request[1]["content"]
    (event,) = result.events
    assert event["primitive"] == "SU" and event["messages_removed"] == len(history) - 2
    assert event["summary_tokens"] == event["window_tokens_after"]
    (call,) = result.summary_calls
    assert call.model == "deterministic" and call.error is None and call.request_messages == request


def test_s_keeps_only_the_block_between_the_markers_after_our_marker_line():
    class Chatty(DeterministicSummarizer):
        def summarize(self, request_messages):
            call = super().summarize(request_messages)
            self.block = call.text
            return type(call)(**{**call.__dict__, "text": "Sure! Here it is:\n" + call.text + "\nHope it helps."})

    summarizer = Chatty()
    result = apply_policy("S/Th/0.5", HISTORY, threshold=0, summarizer=summarizer)
    marker_line, block = result.messages[2]["content"].split("\n\n", 1)
    assert marker_line.startswith(SUMMARY_MARKER) and "\n" not in marker_line
    assert block == summarizer.block and block.startswith("[CONTEXT SUMMARY]")
    assert block.endswith("[END CONTEXT SUMMARY]")


def test_s_over_target_records_its_no_op_tr_fallback_and_su_has_none():
    tiny = text_history([(2, 5)] * 3)
    long_summary = DeterministicSummarizer(words=400)
    s = apply_policy("S/Th/0.5", tiny, threshold=0, summarizer=long_summary)
    assert s.events[0]["fallback"] == "TR" and len(s.messages) == 3
    su = apply_policy("SU/Th/0.5", tiny, threshold=0, summarizer=DeterministicSummarizer(words=400))
    assert su.events[0]["fallback"] is None and su.events[0]["window_tokens_after"] > su.events[0]["target_tokens"]


def test_allowance_is_at_least_fifty_tokens():
    tiny = text_history([(1, 1)])
    summarizer = DeterministicSummarizer()
    apply_policy("SU/Th/0.7", tiny, threshold=0, summarizer=summarizer)
    assert "approximately 38 words" in summarizer.requests[0][1]["content"]  # 0.75 x 50


@pytest.mark.parametrize("history", [HISTORY, TOOL_HISTORY], ids=["text", "tool"])
def test_partial_summaries_split_the_allowance_between_tail_and_head_summary(history):
    summarizer = DeterministicSummarizer(words=10)
    result = apply_policy("S-p/Th/0.5", history, threshold=0, summarizer=summarizer)
    target = target_of(history)
    prompt = summarizer.requests[0][1]["content"]
    assert f"approximately {round(0.75 * (target - target // 2))} words" in prompt
    summary, *tail = result.messages[2:]
    assert summary["content"].startswith(SUMMARY_MARKER) and tail == history[len(history) - len(tail) :]
    assert tail and count_messages(tail) <= target // 2
    assert tail[0]["role"] == "assistant"  # in tool mode a tail never starts with an orphan result
    assert history[-len(tail) - 1]["content"][:20] in prompt or history[-len(tail) - 1].get("tool_calls")


def test_partial_summary_over_target_falls_back_to_tr_which_may_drop_the_summary():
    history = text_history([(5, 40)] * 4)
    result = apply_policy("SU-p/Th/0.5", history, threshold=0, summarizer=DeterministicSummarizer(words=500))
    (event,) = result.events
    assert event["fallback"] == "TR"
    assert not any(m["content"].startswith(SUMMARY_MARKER) for m in result.messages)
    assert result.messages[-1] is history[-1]


def test_stacked_trc_then_summary_emits_two_events_sharing_one_target():
    summarizer = DeterministicSummarizer()
    result = apply_policy("TRC+SU/Th", HISTORY, threshold=0, summarizer=summarizer)
    trc, su = result.events
    assert (trc["primitive"], su["primitive"]) == ("TRC", "SU")
    assert trc["target_tokens"] == su["target_tokens"] == target_of(HISTORY)
    assert trc["fallback"] is None and trc["messages_cleared"] > 0
    assert su["window_tokens_before"] == trc["window_tokens_after"]
    assert PLACEHOLDER.split("]")[0] in summarizer.requests[0][1]["content"]  # cleared results stay cleared


def test_an_earlier_summary_is_part_of_the_next_transcript():
    summarizer = DeterministicSummarizer()
    first = apply_policy("SU/Th/0.5", HISTORY, threshold=0, summarizer=summarizer).messages
    grown = first + text_history([(20, 150)] * 2)[2:]
    apply_policy("SU/Th/0.5", grown, threshold=0, summarizer=summarizer)
    assert "### earlier summary" in summarizer.requests[1][1]["content"]


def test_failed_summary_falls_back_to_tr_and_is_still_reported():
    result = apply_policy("SU/Th/0.5", HISTORY, threshold=0, summarizer=DeterministicSummarizer(fail=True))
    (event,) = result.events
    assert event["fallback"] == "TR:summary-error" and event["messages_removed"] > 0
    assert result.summary_calls[0].error
    assert not any(m["content"].startswith(SUMMARY_MARKER) for m in result.messages)


def test_summary_policy_without_summarizer_is_an_error():
    with pytest.raises(PolicyError, match="needs a summarizer"):
        apply_policy("SU/Th/0.5", HISTORY, threshold=0)


class _StubHandler(BaseHTTPRequestHandler):
    bodies: list = []
    status = 200

    def do_POST(self):  # noqa: N802 (http.server naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append((self.path, body))
        payload = {
            "model": body["model"],
            "choices": [{"message": {"role": "assistant", "content": "summary text"}}],
            "usage": {"prompt_tokens": 321, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": 256}},
        }
        data = json.dumps(payload if self.status == 200 else {"error": "boom"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_endpoint():
    _StubHandler.bodies, _StubHandler.status = [], 200
    server = HTTPServer(("127.0.0.1", 0), _StubHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1", _StubHandler
    server.shutdown()
    server.server_close()


def test_endpoint_summarizer_posts_chat_completions_and_reads_usage(stub_endpoint):
    url, handler = stub_endpoint
    request = [{"role": "user", "content": "summarize this"}]
    call = EndpointSummarizer(url, "served-model").summarize(request)
    path, body = handler.bodies[0]
    assert path == "/v1/chat/completions"
    assert body == {
        "model": "served-model",
        "messages": request,
        "temperature": 0.2,
        "max_tokens": 4096,
        "stream": False,
    }
    assert (call.text, call.prompt_tokens, call.completion_tokens, call.cached_tokens) == ("summary text", 321, 12, 256)
    assert call.error is None and call.end >= call.start and call.model == "served-model"


def test_endpoint_summarizer_reports_http_errors_instead_of_raising(stub_endpoint):
    url, handler = stub_endpoint
    handler.status = 500
    call = EndpointSummarizer(url, "served-model").summarize([{"role": "user", "content": "x"}])
    assert call.error and "500" in call.error and call.text == ""


def test_endpoint_summarizer_sends_through_a_given_transport_and_reports_each_call(stub_endpoint):
    url, handler = stub_endpoint
    reports = []
    summarizer = EndpointSummarizer(
        None,
        "served-model",
        seed=7,
        transport=HttpTransport(url),
        listener=lambda call, latency_s, attempts: reports.append((call.text, latency_s >= 0, attempts)),
    )
    summarizer.summarize([{"role": "user", "content": "x"}])
    handler.status = 500
    failed = summarizer.summarize([{"role": "user", "content": "x"}])
    assert handler.bodies[0][1]["seed"] == 7
    assert reports == [("summary text", True, 1), ("", True, None)] and failed.error


def test_trc_then_partial_structured_summary_at_depth_0_7_removes_seventy_percent_after_both_stages():
    # Eight steps, 150-word outputs: TRC clears the five oldest results (the last three stay),
    # which cannot reach 30 % of the window, so S-p keeps a tail within 15 % and summarizes the rest.
    history = text_history([(20, 150)] * 8)
    window = count_messages(history[2:])
    target = int(0.3 * window)
    summarizer = DeterministicSummarizer(words=10)
    result = apply_policy("TRC+S-p/Th/0.7", history, threshold=0, summarizer=summarizer)
    trc, sp = result.events
    assert (trc["primitive"], sp["primitive"]) == ("TRC", "S-p")
    assert trc["target_tokens"] == sp["target_tokens"] == target and trc["depth"] == sp["depth"] == 0.7
    assert trc["messages_cleared"] == 5
    assert f"approximately {round(0.75 * (target - target // 2))} words" in summarizer.requests[0][1]["content"]
    summary, *tail = result.messages[2:]
    assert summary["content"].startswith(SUMMARY_MARKER) and tail == history[len(history) - len(tail) :]
    assert count_messages(tail) <= target // 2
    assert count_messages(result.messages[2:]) <= target  # at least 70 % of the window is gone


def test_trc_then_structured_summary_at_depth_one_keeps_nothing_verbatim_and_asks_the_minimum_allowance():
    history = text_history([(20, 150)] * 8)
    summarizer = DeterministicSummarizer(words=10)
    result = apply_policy("TRC+S/Th/1.0", history, threshold=0, summarizer=summarizer)
    trc, s = result.events
    assert trc["target_tokens"] == s["target_tokens"] == 0
    assert trc["messages_cleared"] == 5 and trc["fallback"] is None  # TRC is not last: no TR fallback
    assert "approximately 38 words" in summarizer.requests[0][1]["content"]  # 0.75 x the 50-token minimum
    (summary,) = result.messages[2:]
    assert summary["content"].startswith(SUMMARY_MARKER) and "[CONTEXT SUMMARY]" in summary["content"]
    assert s["messages_removed"] == len(history) - 2 and s["summary_tokens"] == s["window_tokens_after"]
    # the no-op TR flag compares the summary with the minimum allowance, not with a target of 0
    assert s["fallback"] == ("TR" if s["summary_tokens"] > 50 else None)
