"""Proxy records that say what happened (issue 21, case 11, and the ``--listen`` item of 12).

A conversation's run.json exists (open) after its first call, so ``aggregate`` names it as
open instead of "missing"; its wall time runs from the first request to the last answer, not
to whenever it ended; nobody graded it, so its outcome says so until a verdict is attached;
its mode and client come from the requests. Start-up refuses the misleading setups.
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pandas as pd
import pytest
from proxy_helpers import ScriptedUpstream, serve, settled

from ctxpolicy import cli
from ctxpolicy.rundir import read_json
from ctxpolicy.metrics.aggregate import LEFT_OUT_FILE
from ctxpolicy.policies import parse_spec
from ctxpolicy.proxy import cli as proxy_cli
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.recording import ProxySettings

REPO = Path(__file__).resolve().parents[2]
SYSTEM = {"role": "system", "content": "You are an agent."}
BASH = {
    "type": "function",
    "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
}


@pytest.fixture(scope="module")
def upstream():
    scripted = ScriptedUpstream()
    with serve(scripted.app) as url:
        scripted.url = f"{url}/v1"
        yield scripted


def aggregate(runs: Path, out: Path) -> tuple[pd.DataFrame, list[dict]]:
    assert cli.main(["aggregate", "--runs", str(runs), "--out", str(out)]) == 0
    left_out = json.loads((out / LEFT_OUT_FILE).read_text())["left_out"]
    return pd.read_parquet(out / "runs.parquet"), left_out


def test_case11_open_ungraded_conversations_are_recorded_as_such(upstream, tmp_path):
    record = tmp_path / "rec"
    settings = ProxySettings(
        policy=parse_spec("FC"), threshold=None, upstream_url=upstream.url, upstream_model=None, summarizer_model=None
    )
    proxy = Proxy(ProxyConfig(settings=settings, upstream_url=upstream.url, record_dir=record))
    with serve(build_app(proxy)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
        history = [SYSTEM, {"role": "user", "content": "list the files"}]
        asked = time.time()
        reply = client.chat.completions.create(model="m", messages=history, tools=[BASH])
        settled(proxy)
        [run_dir] = record.glob("*/*__a1")
        opened = read_json(run_dir / "run.json")  # right after the first call, before the conversation ends
        assert opened["complete"] is False and opened["proxy"]["open"] is True
        assert opened["settings"]["mode"] == "tool"  # tools were offered, though no tool message was sent yet
        assert opened["versions"]["client"]["user_agent"].startswith("OpenAI/Python")
        assert opened["versions"]["mini_swe_agent"] is None  # the client's version is not the proxy's to say
        runs, left_out = aggregate(record, tmp_path / "t1")
        assert len(runs) == 0 and len(left_out) == 1 and "open proxy conversation" in left_out[0]["reason"]

        call = reply.choices[0].message.tool_calls[0]
        history += [
            {"role": "assistant", "content": reply.choices[0].message.content, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "a.py"},
        ]
        client.chat.completions.create(model="m", messages=history, tools=[BASH])
        answered = time.time()
        settled(proxy)
        time.sleep(1.5)  # the agent is done; the conversation stays open until it is ended
        ended = httpx.post(f"{url}/conversations/end", json={}).json()
        assert ended["ended"] == [opened["identity"]["task_id"]] and ended["busy"] == []
        assert len(proxy.store) == 0
    run = read_json(run_dir / "run.json")
    assert run["complete"] is True and run["proxy"]["ended"] == "ended" and run["proxy"]["requests"] == 2
    timing = run["timing"]  # first request to last answer, not to the end 1.5 s later
    assert asked <= timing["start"] <= timing["end"] <= answered and timing["wall_s"] <= answered - asked, timing
    assert run["outcome"] == "not_graded" and run["totals"]["format_errors"] is None
    runs, left_out = aggregate(record, tmp_path / "t2")
    assert left_out == [] and runs["outcome"].astype(str).tolist() == ["not_graded"]
    assert not runs["has_verdict"].any() and runs["outcome_class"].astype(str).tolist() != ["submitted_unsuccessful"]

    assert cli.main(["proxy-verdict", "--runs", str(run_dir), "--resolved", "--note", "checked by hand"]) == 0
    assert read_json(run_dir / "verdict.json")["resolved"] is True
    assert read_json(run_dir / "run.json")["outcome"] == "submitted"
    assert cli.main(["proxy-verdict", "--runs", str(run_dir), "--unresolved"]) == 2  # graded once only
    runs, _ = aggregate(record, tmp_path / "t3")
    assert runs["has_verdict"].all() and runs["outcome_class"].astype(str).tolist() == ["success"]


def test_case11_the_default_idle_timeout_is_minutes():
    parser = argparse.ArgumentParser()
    proxy_cli.add_arguments(parser)
    default = parser.parse_args(["--policy", "FC", "--endpoint", "http://127.0.0.1:1/v1"]).idle_timeout
    assert 60 <= default <= 900


def test_case11_the_docs_table_names_every_option():
    parser = argparse.ArgumentParser()
    proxy_cli.add_arguments(parser)
    table = (REPO / "docs" / "proxy.md").read_text()
    options = {o for action in parser._actions for o in action.option_strings if o.startswith("--") and o != "--help"}
    missing = sorted(o for o in options if not re.search(rf"`{re.escape(o)}[ `]", table))
    assert not missing, f"docs/proxy.md lacks {missing}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_up(*options: str) -> subprocess.CompletedProcess:
    """``ctxpolicy proxy`` with these options, which must stop at start-up (it fails if it serves)."""
    command = [sys.executable, "-m", "ctxpolicy", "proxy", "--policy", "FC", "--no-upstream-check", *options]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the proxy started serving with {options}")


def test_case11_an_upstream_without_its_path_is_refused():
    result = _start_up("--endpoint", "http://127.0.0.1:8080", "--listen", f"127.0.0.1:{_free_port()}")
    assert result.returncode == 2 and "/v1" in result.stderr and "Traceback" not in result.stderr


def test_case12_listening_beyond_loopback_needs_a_client_token():
    result = _start_up("--endpoint", "http://127.0.0.1:9/v1", "--listen", f"0.0.0.0:{_free_port()}")
    assert result.returncode == 2 and "--client-token-env" in result.stderr and "Traceback" not in result.stderr
