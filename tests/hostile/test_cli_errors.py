"""Small bad inputs to `compress`, `run` and `run-cell`: one line naming what is wrong, exit code 2."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml
from fake_llm_server import closed_port_url

from ctxpolicy import cli
from ctxpolicy.agent.settings import SettingsError, build_settings
from ctxpolicy.study.config import ConfigError, load_config
from ctxpolicy.study import Study

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "config.yaml"


def one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def compress(monkeypatch, stdin_text: str, *args: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin_text))
    return cli.main(["compress", "--policy", "TR/Th/0.5", "--threshold", "100", *args])


@pytest.mark.parametrize(
    "messages, named",
    [
        ([{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}], "messages[1].role: 'wizard'"),
        ([{"role": "user", "content": 12345}], "messages[0].content: 12345 (int)"),
        ([{"role": "assistant", "content": "x", "tool_calls": "notalist"}], "messages[0].tool_calls: 'notalist'"),
        (
            [{"role": "user", "content": "ok"}, {"role": "user", "content": "bad \ud800 half"}],
            "messages[1].content: unpaired surrogate '\\ud800'",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}], "messages[0].content[0].text: unpaired"),
    ],
)
def test_compress_names_the_message_and_field(monkeypatch, capsys, messages, named):
    assert compress(monkeypatch, json.dumps({"messages": messages})) == 2
    assert named in one_line_error(capsys)


def test_compress_refuses_input_that_is_not_utf8(tmp_path, monkeypatch, capsys):
    source = tmp_path / "in.json"
    source.write_bytes(b'{"messages": [{"role": "user", "content": "caf\xe9"}]}')
    assert compress(monkeypatch, "", "-i", str(source)) == 2
    assert f"{source}: not UTF-8: byte 0xe9" in one_line_error(capsys)


def test_compress_to_an_unwritable_output_is_one_line(monkeypatch, capsys):
    target = Path("/proc/version")  # exists, and nobody (root included) can replace it
    before = target.read_bytes()
    assert compress(monkeypatch, json.dumps({"messages": []}), "--out", str(target)) == 2
    assert "--out /proc/version: cannot write" in one_line_error(capsys)
    assert target.read_bytes() == before


@pytest.mark.parametrize("window", ["-5", "0"])
def test_compress_refuses_a_context_window_below_one(monkeypatch, capsys, window):
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"messages": []})))
    assert cli.main(["compress", "--policy", "codex", "--context-window", window]) == 2
    assert f"--context-window {window}: must be 1 or more" in one_line_error(capsys)


def run_args(tmp_path: Path, *extra: str, endpoint: str | None = None) -> list[str]:
    # by default an endpoint where nothing listens: were a bad value accepted, no model server would start
    return [
        "run",
        "--config",
        str(CONFIG),
        "--benchmark",
        "local",
        "--model",
        "qwen05b",
        "--policy",
        "TR/Th/0.5",
        "--task",
        "hello-world",
        "--endpoint",
        endpoint or closed_port_url(),
        "--out",
        str(tmp_path / "cell" / "hello-world__a1"),
        *extra,
    ]


@pytest.mark.parametrize("threshold", ["-5", "0"])
def test_run_refuses_a_threshold_below_one(tmp_path, capsys, threshold):
    assert cli.main(run_args(tmp_path, "--threshold", threshold)) == 2
    assert f"--threshold: {threshold} must be" in one_line_error(capsys)
    assert not (tmp_path / "cell").exists()


@pytest.mark.parametrize("option, value", [("--step-limit", "0"), ("--max-tokens", "-1")])
def test_run_refuses_limits_below_one(tmp_path, capsys, option, value):
    assert cli.main(run_args(tmp_path, "--threshold", "100", option, value)) == 2
    assert f"{option}: {value} must be 1 or more" in one_line_error(capsys)
    assert not (tmp_path / "cell").exists()


@pytest.mark.parametrize("url", ["ftp://x", "http://", "http://127.0.0.1:port/v1"])
def test_a_bad_endpoint_is_one_line_and_leaves_no_lock(tmp_path, capsys, url):
    cell_dir = tmp_path / "cell"
    assert cli.main(run_args(tmp_path, "--threshold", "100", endpoint=url)) == 2
    assert "--endpoint" in one_line_error(capsys)
    assert (
        cli.main(
            [
                "run-cell",
                "--config",
                str(CONFIG),
                "--benchmark",
                "local",
                "--model",
                "qwen05b",
                "--policy",
                "FC",
                "--endpoint",
                url,
                "--no-progress",
                "--out",
                str(cell_dir),
            ]
        )
        == 2
    )
    assert "--endpoint" in one_line_error(capsys)
    assert not (cell_dir / ".lock").exists()


def test_the_per_request_limit_must_be_a_positive_number(tmp_path):
    config = yaml.safe_load(CONFIG.read_text())
    config["benchmarks"]["local"]["limits"]["request_timeout_s"] = 0
    bad_config = tmp_path / "config.yaml"
    bad_config.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match="request_timeout_s"):
        load_config(bad_config)

    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    (agent_dir / "agent.yaml").write_text("mode: text\nrequest_timeout_s: soon\n")
    good = load_config(CONFIG)
    with pytest.raises(SettingsError, match="request_timeout_s: 'soon'"):
        build_settings(Study(good), "local", "qwen05b", agent_dir=agent_dir)
