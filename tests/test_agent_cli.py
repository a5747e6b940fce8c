"""`ctxpolicy run` and `ctxpolicy run-cell` from the command line, against a fake endpoint."""

from __future__ import annotations

import json

import pytest
from agent_helpers import CONFIG, TASKS, help_text, offline_study
from fake_llm_server import FakeLLMServer

from ctxpolicy import cli
from ctxpolicy.rundir import read_json
from ctxpolicy.agent.validate import run_dir_problems


def test_run_help_says_how_to_reach_vllm_the_embedded_model_and_any_endpoint(capsys):
    text = help_text(capsys, "run")
    for needle in ("vllm serve", "embedded", "llama.cpp", "--endpoint", "OpenAI-compatible", "--served-name"):
        assert needle in text, needle


def test_unknown_model_is_one_clear_line_and_exit_2(tmp_path, capsys):
    code = cli.main(
        [
            "run",
            "--config",
            str(CONFIG),
            "--benchmark",
            "local",
            "--model",
            "nope",
            "--policy",
            "FC",
            "--task",
            "x",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "models.nope" in err and len(err.strip().splitlines()) == 1


def test_bad_policy_is_exit_2(tmp_path, capsys):
    code = cli.main(
        [
            "run",
            "--config",
            str(CONFIG),
            "--benchmark",
            "local",
            "--model",
            "qwen05b",
            "--policy",
            "XX/Th",
            "--task",
            "x",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2 and "XX" in capsys.readouterr().err


@pytest.fixture
def study(tmp_path):
    return offline_study(tmp_path)


def test_run_writes_a_valid_run_directory(study, tmp_path, capsys):
    out = tmp_path / "runs" / "hello-world__a1"
    with FakeLLMServer() as server:
        code = cli.main(
            [
                "run",
                "--config",
                str(study),
                "--benchmark",
                "local",
                "--model",
                "qwen05b",
                "--policy",
                "TR/Th/0.5",
                "--threshold",
                "2000",
                "--task",
                "hello-world",
                "--endpoint",
                server.url,
                "--out",
                str(out),
            ]
        )
    assert code == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["outcome"] == "submitted"
    record = read_json(out / "run.json")
    assert record["identity"]["threshold_tokens"] == 2000 and record["identity"]["threshold_setting"] == "fixed"
    assert record["versions"]["server"] == {"kind": "endpoint", "version": None, "url": server.url}
    assert server.requests[0]["model"] == "qwen2.5-coder-0.5b-instruct"
    assert run_dir_problems(out) == []


def test_run_cell_runs_every_task_then_skips_them(study, tmp_path):
    cell_dir = tmp_path / "cell"
    argv = [
        "run-cell",
        "--config",
        str(study),
        "--benchmark",
        "local",
        "--model",
        "qwen05b",
        "--policy",
        "FC",
        "--concurrency",
        "2",
        "--no-progress",
        "--out",
        str(cell_dir),
    ]
    with FakeLLMServer() as server:
        assert cli.main([*argv, "--endpoint", server.url]) == 0
        first = len(server.requests)
        assert cli.main([*argv, "--endpoint", server.url]) == 0
        assert len(server.requests) == first  # everything was complete already
    cell = read_json(cell_dir / "cell.json")
    assert [r["run_dir"] for r in cell["runs"]] == [f"{t}__a1" for t in TASKS]
    assert all(r["outcome"] == "submitted" and r["skipped"] for r in cell["runs"])
    assert cell["slug"] == "FC" and cell["concurrency"] == 2
