"""One validation of a message list (issue 30, `policies.messages`): `compress` on a tool call
whose `function` is no object is one line, exit 2, never a traceback; through the proxy the same
request is a 400 that leaves the conversation as it was, and the conversation goes on.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from proxy_helpers import FakeUpstream, serve, settled

from ctxpolicy import cli
from ctxpolicy.policies import PolicySession, apply_policy, parse_spec
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.recording import ProxySettings
from ctxpolicy.rundir import read_json, read_jsonl

SYSTEM = {"role": "system", "content": "You are an agent."}
TASK = {"role": "user", "content": "Fix the bug. " * 20}


def _tool_turn(function, n: int = 1) -> list[dict]:
    call = {"id": f"c{n}", "type": "function", "function": function}
    return [
        {"role": "assistant", "content": "I look.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": "output " * 30},
    ]


BAD_TOOL_CALLS = [
    (5, "tool_calls[0].function"),
    ({"name": 3, "arguments": "{}"}, "tool_calls[0].function.name"),
    ({"name": "bash", "arguments": {"command": "ls"}}, "tool_calls[0].function.arguments"),
    (None, "tool_calls[0].function"),
]


@pytest.mark.parametrize(("function", "field"), BAD_TOOL_CALLS)
def test_compress_names_a_tool_call_whose_function_is_no_object(tmp_path, capsys, function, field):
    history = tmp_path / "history.json"
    messages = [SYSTEM, TASK, *_tool_turn(function), {"role": "user", "content": "go on " * 30}]
    history.write_text(json.dumps({"messages": messages}))
    rc = cli.main(["compress", "--policy", "CC/Th", "--threshold", "10", "-i", str(history)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "Traceback" not in err
    assert err.strip().splitlines() == [err.strip()]
    assert f"{history}: messages[2].{field}:" in err, err


def test_every_policy_entry_refuses_the_same_shapes():
    """apply_policy and the session (the harness, the proxy and the replay append through it)."""
    from ctxpolicy.policies.messages import MessageError

    messages = [SYSTEM, TASK, *_tool_turn(5)]
    with pytest.raises(MessageError, match=r"messages\[2\]\.tool_calls\[0\]\.function"):
        apply_policy(parse_spec("CC/Th"), messages, threshold=10)
    session = PolicySession("CC/Th", threshold=10, messages=[SYSTEM, TASK])
    with pytest.raises(MessageError):
        session.append(_tool_turn("x"))
    assert session.pending == [SYSTEM, TASK]  # nothing of the refused messages got in


def _proxy(upstream_url: str, record: Path) -> Proxy:
    settings = ProxySettings(
        policy=parse_spec("CC/Th"),
        threshold=10,
        upstream_url=upstream_url,
        upstream_model=None,
        summarizer_model=None,
    )
    return Proxy(ProxyConfig(settings=settings, upstream_url=upstream_url, record_dir=record))


def test_the_proxy_answers_400_and_the_conversation_goes_on(tmp_path):
    upstream = FakeUpstream()
    with serve(upstream.app) as upstream_url:
        proxy = _proxy(f"{upstream_url}/v1", tmp_path)
        with serve(build_app(proxy)) as url:
            history = [SYSTEM, TASK]

            def ask(messages: list[dict]) -> httpx.Response:
                return httpx.post(f"{url}/v1/chat/completions", json={"model": "m", "messages": messages}, timeout=30)

            first = ask(history)
            assert first.status_code == 200
            history += [first.json()["choices"][0]["message"], {"role": "user", "content": "next " * 30}]
            for function, field in BAD_TOOL_CALLS:
                bad = ask(history + _tool_turn(function, 9))
                assert bad.status_code == 400, bad.text
                error = bad.json()["error"]
                assert error["type"] == "invalid_request" and field in error["message"], error
            for n in (2, 3):  # the conversation as it was: later good requests are answered
                good = ask(history + _tool_turn({"name": "bash", "arguments": '{"command": "ls"}'}, n))
                assert good.status_code == 200, good.text
                history += _tool_turn({"name": "bash", "arguments": '{"command": "ls"}'}, n)
            settled(proxy)
        assert len(upstream.requests) == 3  # no refused request went upstream
    [run_dir] = [p.parent for p in tmp_path.rglob("run.json")]
    run = read_json(run_dir / "run.json")
    calls = list(read_jsonl(run_dir / "calls.jsonl"))
    assert [c["status"] for c in calls] == ["ok", "ok", "ok"]
    assert run["proxy"]["requests"] == 3 and run["outcome"] == "not_graded"


def test_a_server_answer_with_a_malformed_tool_call_is_a_format_error_never_history():
    """The harness checks the model's answer as the policies will: the model is told, the history stays valid."""
    from minisweagent.exceptions import FormatError

    from ctxpolicy.agent.model import EndpointModel
    from ctxpolicy.chat_completion import ChatResponse

    model = EndpointModel(
        None,
        model_name="m",
        base_url="http://127.0.0.1:9/v1",
        mode="tool",
        temperature=0.0,
        max_tokens=16,
        format_error_template="format error: {{ error }}",
        observation_template="{{ output }}",
    )
    response = ChatResponse(
        content="I run it.",
        tool_calls=[{"id": "c1", "type": "function", "function": 5}],
        finish_reason="tool_calls",
        prompt_tokens=1,
        completion_tokens=1,
        cached_tokens=None,
        model="m",
        start=0.0,
        end=1.0,
        latency_s=1.0,
        attempts=1,
        raw={},
    )
    with pytest.raises(FormatError) as raised:
        model.parse(response)
    [feedback] = raised.value.messages
    assert feedback["role"] == "user" and "tool_calls[0].function: 5 (int)" in feedback["content"]
