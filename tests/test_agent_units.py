"""The agent's pure pieces: parsing answers, classifying server errors, settings, outcomes, totals."""

from __future__ import annotations

import pytest

from ctxpolicy.agent.client import cached_tokens_of, is_context_overflow
from ctxpolicy.agent.model import parse_text_action
from ctxpolicy.agent.runner import outcome_of, run_seed, totals_of
from ctxpolicy.agent.settings import SettingsError, build_settings

CONFIG = {
    "models": {"m": {"server": "llamacpp", "served_name": "m", "temperature": 0.2, "max_tokens": 512}},
    "benchmarks": {"b": {"limits": {"step_limit": 10, "wall_time_limit_s": 240, "command_timeout_s": 30,
                                    "format_error_limit": 3}}},
}


@pytest.mark.parametrize("content, command", [
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
])
def test_text_actions_tolerate_small_model_formats(content, command):
    assert parse_text_action(content) == command


@pytest.mark.parametrize("status, body, overflow", [
    (400, '{"error":{"type":"exceed_context_size_error","message":"the request exceeds the available context size"}}',
     True),
    (400, "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens", True),
    (400, '{"error":{"code":"context_length_exceeded"}}', True),
    (413, "payload too large", True),
    (400, '{"error":{"message":"temperature must be >= 0"}}', False),
    (500, "maximum context length", False),
])
def test_context_overflow_is_told_apart_from_other_errors(status, body, overflow):
    assert is_context_overflow(status, body) is overflow


def test_cached_tokens_from_usage_details_or_llamacpp_timings():
    assert cached_tokens_of({"usage": {"prompt_tokens_details": {"cached_tokens": 7}}}) == 7
    assert cached_tokens_of({"usage": {"prompt_tokens": 9}, "timings": {"cache_n": 5}}) == 5
    assert cached_tokens_of({"usage": {"prompt_tokens": 9}}) is None


def test_settings_take_limits_model_and_task_timeout():
    settings = build_settings(CONFIG, "b", "m", task_timeout_s=90, overrides={"step_limit": 3, "mode": None})
    assert (settings.step_limit, settings.wall_time_limit_s, settings.max_tokens) == (3, 90, 512)
    assert settings.mode == "text" and settings.temperature == 0.2
    assert build_settings(CONFIG, "b", "m").wall_time_limit_s == 240


def test_settings_reject_an_unknown_mode():
    with pytest.raises(SettingsError, match="'chat'"):
        build_settings(CONFIG, "b", "m", overrides={"mode": "chat"})


def test_exit_statuses_map_to_outcomes():
    assert [outcome_of(s) for s in ("Submitted", "LimitsExceeded", "TimeExceeded", "RepeatedFormatError",
                                    "ContextOverflow", "EndpointError", "RuntimeError")] == [
        "submitted", "step_limit", "time_limit", "format_error_limit", "context_overflow", "error", "error"]
    assert [run_seed(1234, a) for a in (1, 2, 3)] == [1234, 1235, 1236]


def test_totals_sum_calls_and_keep_unreported_cache_as_null():
    calls = [
        {"kind": "agent", "status": "ok", "prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": None,
         "events": []},
        {"kind": "summary", "status": "ok", "prompt_tokens": 50, "completion_tokens": 20, "cached_tokens": None,
         "events": []},
        {"kind": "agent", "status": "error", "prompt_tokens": None, "completion_tokens": None, "cached_tokens": None,
         "events": [{"primitive": "TR"}]},
    ]
    totals = totals_of(calls, steps=2, format_errors=1)
    assert totals["agent_calls"] == 2 and totals["summary_calls"] == 1
    assert totals["prompt_tokens"] == 150 and totals["completion_tokens"] == 30
    assert totals["cached_tokens"] is None and totals["compression_events"] == 1
    assert totals["peak_prompt_tokens"] == 100 and totals["failed_calls"] == 1
