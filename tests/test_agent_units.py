"""The agent's pure pieces: parsing answers, classifying server errors, settings, outcomes, totals."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ctxpolicy.agent.client import cached_tokens_of, is_context_overflow
from ctxpolicy.agent.model import FENCE_STOP, EndpointModel, close_stopped_fence, parse_text_action
from ctxpolicy.agent.runner import outcome_of, run_seed, totals_of
from ctxpolicy.agent.settings import RunSettings, SettingsError, build_settings, load_agent_file
from ctxpolicy.study import Study

REPO = Path(__file__).resolve().parents[1]

CONFIG = {
    "models": {"m": {"server": "llamacpp", "served_name": "m", "temperature": 0.2, "max_tokens": 512}},
    "benchmarks": {
        "b": {"limits": {"step_limit": 10, "wall_time_limit_s": 240, "command_timeout_s": 30, "format_error_limit": 3}}
    },
}


@pytest.mark.parametrize(
    "content, command",
    [
        ("THOUGHT: x\n```mswea_bash_command\nls -la\n```", "ls -la"),
        ("```bash\ncat a.txt\n```", "cat a.txt"),
        ("```\npwd\n```", "pwd"),
        ("```sh\necho 1\n```\nthen\n```mswea_bash_command\necho 2\n```", "echo 2"),  # the harness's tag wins
        ("```bash\nfirst\n```\n```bash\nsecond\n```", "first"),
        ("```python\nprint(1)\n```", None),
        ("```python\nprint(1)\n```\nthen run it:\n```bash\npython a.py\n```\n", "python a.py"),
        ("```mswea_bash_command\nls\n", None),  # cut off before the closing fence
        ("no code at all", None),
        ("```bash\n\n```", None),
    ],
)
def test_text_actions_tolerate_small_model_formats(content, command):
    assert parse_text_action(content) == command


@pytest.mark.parametrize(
    "content, finish_reason, closed",
    [
        # the server stopped at FENCE_STOP: the block is open, and closed again
        ("THOUGHT: x\n```mswea_bash_command\nls -la", "stop", "THOUGHT: x\n```mswea_bash_command\nls -la\n```"),
        (
            "```python\nprint(1)\n```\nrun it:\n```bash\npython a.py",
            "stop",
            "```python\nprint(1)\n```\nrun it:\n```bash\npython a.py\n```",
        ),
        # the model ended its turn after its block, or was cut off: nothing to put back
        ("THOUGHT: x\n```mswea_bash_command\nls -la\n```", "stop", None),
        ("THOUGHT: x\n```mswea_bash_command\nls -la", "length", None),
        ("no code at all", "stop", None),
        ("THOUGHT: x\n```bash", "stop", None),  # an empty block ("```bash\n```\n\n"): stays unparseable
        ("", "stop", None),
    ],
)
def test_a_fence_the_stop_sequence_ate_is_put_back(content, finish_reason, closed):
    assert close_stopped_fence(content, finish_reason) == closed
    if closed is not None:  # what the server would have sent without the stop sequence, up to it
        assert parse_text_action(closed) == parse_text_action(closed + FENCE_STOP[len("\n```") :] + "more text")


def _endpoint_model(**overrides) -> EndpointModel:
    kwargs = {
        "model_name": "m",
        "base_url": "http://127.0.0.1:1/v1",
        "mode": "text",
        "temperature": 0.2,
        "max_tokens": 128,
        "format_error_template": "{{error}}",
        "observation_template": "{{output.output}}",
    }
    return EndpointModel(None, **(kwargs | overrides))


def _response(content: str, finish_reason: str):
    from ctxpolicy.agent.client import parse_chat_payload

    payload = {
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": content}}],
        "model": "m",
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return parse_chat_payload(payload, start=0.0, end=1.0, latency_s=1.0, attempts=1)


def test_stop_after_action_sends_the_fence_stop_in_text_mode_only():
    assert _endpoint_model(stop_after_action=True).request_body([])["stop"] == [FENCE_STOP]
    assert "stop" not in _endpoint_model().request_body([])
    assert "stop" not in _endpoint_model(stop_after_action=True, mode="tool").request_body([])


def test_the_recorded_message_holds_the_closed_block_and_the_raw_answer_as_sent():
    from minisweagent.exceptions import FormatError

    stopped = _response("THOUGHT: look\n```mswea_bash_command\nls -la", "stop")
    message = _endpoint_model(stop_after_action=True).parse(stopped)
    assert message["content"] == "THOUGHT: look\n```mswea_bash_command\nls -la\n```"
    assert message["extra"]["actions"] == [{"command": "ls -la"}]
    assert message["extra"]["fence_restored"] is True
    assert message["extra"]["response"]["choices"][0]["message"]["content"].endswith("ls -la")
    ended = _endpoint_model(stop_after_action=True).parse(_response("```bash\npwd\n```", "stop"))
    assert ended["content"] == "```bash\npwd\n```" and "fence_restored" not in ended["extra"]
    with pytest.raises(FormatError):  # without the setting, an open block is no command
        _endpoint_model().parse(stopped)


@pytest.mark.parametrize(
    "status, body, overflow",
    [
        (
            400,
            '{"error":{"type":"exceed_context_size_error","message":"the request exceeds the available context size"}}',
            True,
        ),
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens", True),
        (400, '{"error":{"code":"context_length_exceeded"}}', True),
        (413, "payload too large", True),
        (400, '{"error":{"message":"temperature must be >= 0"}}', False),
        (500, "maximum context length", False),
    ],
)
def test_context_overflow_is_told_apart_from_other_errors(status, body, overflow):
    assert is_context_overflow(status, body) is overflow


def test_cached_tokens_from_usage_details_or_llamacpp_timings():
    assert cached_tokens_of({"usage": {"prompt_tokens_details": {"cached_tokens": 7}}}) == 7
    assert cached_tokens_of({"usage": {"prompt_tokens": 9}, "timings": {"cache_n": 5}}) == 5
    assert cached_tokens_of({"usage": {"prompt_tokens": 9}}) is None


def test_settings_take_limits_model_and_task_timeout():
    settings = build_settings(Study(CONFIG), "b", "m", task_timeout_s=90, overrides={"step_limit": 3, "mode": None})
    assert (settings.step_limit, settings.wall_time_limit_s, settings.max_tokens) == (3, 90, 512)
    assert settings.mode == "text" and settings.temperature == 0.2
    assert build_settings(Study(CONFIG), "b", "m").wall_time_limit_s == 240


def test_settings_reject_an_unknown_mode():
    with pytest.raises(SettingsError, match="'chat'"):
        build_settings(Study(CONFIG), "b", "m", overrides={"mode": "chat"})


def test_exit_statuses_map_to_outcomes():
    assert [
        outcome_of(s)
        for s in (
            "Submitted",
            "LimitsExceeded",
            "TimeExceeded",
            "RepeatedFormatError",
            "ContextOverflow",
            "EndpointError",
            "RuntimeError",
        )
    ] == ["submitted", "step_limit", "time_limit", "format_error_limit", "context_overflow", "error", "error"]
    assert [run_seed(1234, a) for a in (1, 2, 3)] == [1234, 1235, 1236]


def test_totals_sum_calls_and_keep_unreported_cache_as_null():
    calls = [
        {
            "kind": "agent",
            "status": "ok",
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "cached_tokens": None,
            "events": [],
        },
        {
            "kind": "summary",
            "status": "ok",
            "prompt_tokens": 50,
            "completion_tokens": 20,
            "cached_tokens": None,
            "events": [],
        },
        {
            "kind": "agent",
            "status": "error",
            "prompt_tokens": None,
            "completion_tokens": None,
            "cached_tokens": None,
            "events": [{"primitive": "TR"}],
        },
    ]
    totals = totals_of(calls, steps=2, format_errors=1)
    assert totals["agent_calls"] == 2 and totals["summary_calls"] == 1
    assert totals["prompt_tokens"] == 150 and totals["completion_tokens"] == 30
    assert totals["cached_tokens"] is None and totals["compression_events"] == 1
    assert totals["peak_prompt_tokens"] == 100 and totals["failed_calls"] == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "templates: {text: t.yaml}\nrequest_timout_s: 30\n",
            "agent.yaml: request_timout_s: unknown key (value 30); allowed keys: templates, mode, request_timeout_s",
        ),
        (
            "templates: {text: t.yaml}\nretry: {max_attempts: 3, backoff_s: 2}\n",
            "agent.yaml: retry.backoff_s: unknown key (value 2); allowed keys: max_attempts, backoff_initial_s",
        ),
        (
            "templates: {text: t.yaml}\nrequest_timeout_s: soon\n",
            "agent.yaml: request_timeout_s: 'soon': expected a number",
        ),
        (
            "templates: {text: t.yaml}\nretry: {max_attempts: '3'}\n",
            "agent.yaml: retry.max_attempts: '3': input should be",
        ),
        ("templates: {text: t.yaml}\nmode: chat\n", "agent.yaml: mode: 'chat': input should be 'text' or 'tool'"),
        ("mode: text\n", "agent.yaml: templates: missing"),
    ],
)
def test_the_agent_file_is_validated_naming_file_key_and_value(tmp_path, text, expected):
    (tmp_path / "agent.yaml").write_text(text)
    with pytest.raises(SettingsError) as info:
        load_agent_file(tmp_path)
    assert str(info.value).startswith(str(tmp_path)) and expected in str(info.value)


def test_run_settings_have_one_set_of_defaults_and_record_the_same_keys(tmp_path):
    (tmp_path / "agent.yaml").write_text("templates: {text: t.yaml}\n")
    bare = {"models": {"m": {"server": "llamacpp", "served_name": "m"}}, "benchmarks": {"b": {"limits": {}}}}
    settings = build_settings(Study(bare), "b", "m", agent_dir=tmp_path)
    assert settings == RunSettings()
    assert list(settings.record()) == [
        "temperature",
        "max_tokens",
        "stop_after_action",
        "step_limit",
        "wall_time_limit_s",
        "command_timeout_s",
        "format_error_limit",
        "cache_block_tokens",
        "mode",
        "request_timeout_s",
        "connect_timeout_s",
        "retry",
        "action_format",
    ]
    assert settings.record()["action_format"] == "mswea_bash_command"
    assert RunSettings(mode="tool").record()["action_format"] == "tool_calls"
    assert settings.record()["request_timeout_s"] == 600 and isinstance(settings.record()["request_timeout_s"], int)
    # the shipped agent file sets no run setting: every value is RunSettings' own
    assert load_agent_file().settings() == {}
    # the config schema carries no second copy of these defaults
    schema = yaml.safe_load((REPO / "config" / "schema.yaml").read_text())["$defs"]
    for key in ("temperature", "max_tokens", "cache_block_tokens"):
        assert "default" not in schema["model"]["properties"][key], key
    for key in ("step_limit", "wall_time_limit_s", "command_timeout_s", "format_error_limit"):
        assert "default" not in schema["benchmark"]["properties"]["limits"]["properties"][key], key


def test_the_documented_defaults_are_the_models(tmp_path):
    """config/README.md documents the defaults of RunSettings and RetryPolicy: they must be its values."""
    import re

    from ctxpolicy.agent.settings import RetryPolicy

    documented = re.findall(
        r"^\| `(?:limits\.|retry\.)?([a-z_]+)` \| [^|]*?`([^`]+)` \((RunSettings|RetryPolicy)\)",
        (REPO / "config" / "README.md").read_text(),
        flags=re.M,
    )
    assert len(documented) >= 12
    for key, value, model in documented:
        default = (RunSettings if model == "RunSettings" else RetryPolicy).model_fields[key].default
        assert yaml.safe_load(value) == default, key
        assert RunSettings.model_fields.get(key, RetryPolicy.model_fields.get(key)).description, key


def test_the_agent_is_built_with_its_summarizer_on_the_summary_client(tmp_path):
    """The summarizer is given at construction (no attribute set afterwards), on the summarizer's
    client and served name, bound to the agent's deadline and call log."""
    from ctxpolicy.agent.client import ChatClient
    from ctxpolicy.agent.plan import make_identity
    from ctxpolicy.agent.record import RunRecorder
    from ctxpolicy.agent.runner import AgentParts, Endpoint, RunInputs, build_agent
    from ctxpolicy.agent.settings import load_templates
    from ctxpolicy.policies import parse_spec

    config = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())
    settings = build_settings(Study(config), "local", "qwen05b")
    task = type("Task", (), {"task_id": "t", "stratum": "s"})()
    policy = parse_spec("OTRC+S-p/St+Th/0.5")
    identity = make_identity(
        seed=1,
        benchmark="local",
        cohort="main",
        model="qwen05b",
        policy=policy,
        task=task,
        attempt=1,
        threshold_setting="primary",
        threshold_tokens=2000,
        summarizer="other",
        cell="c",
        track="full",
    )
    agent_ep, summary_ep = Endpoint("http://127.0.0.1:1/v1", "agent-m"), Endpoint("http://127.0.0.1:2/v1", "sum-m")
    run = RunInputs(identity, policy, task, None, settings, agent_ep, tmp_path, summarizer_endpoint=summary_ep)
    agent_client, summary_client = ChatClient(agent_ep.base_url), ChatClient(summary_ep.base_url)
    with RunRecorder(tmp_path, lambda message: 1) as recorder:
        parts = AgentParts(load_templates(settings.mode), object(), tmp_path, recorder, agent_client, summary_client)
        agent = build_agent(run, parts)
        summarizer = agent.summarizer
        assert summarizer.transport is summary_client and summarizer.model == "sum-m"
        assert agent.session.summarizer is summarizer  # the session made at construction has it
        assert summarizer._listener == agent.on_summary_call
    assert run.summary_endpoint is summary_ep
    assert RunInputs(identity, policy, task, None, settings, agent_ep, tmp_path).summary_endpoint is agent_ep
    assert agent.policy is policy  # the spec the run was given, not its identity's text parsed again
    with pytest.raises(ValueError, match="is not its identity's"):
        RunInputs(identity, parse_spec("FC"), task, None, settings, agent_ep, tmp_path)
