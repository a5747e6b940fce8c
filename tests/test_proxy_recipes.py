"""docs/proxy.md's recipes, run as written: the real ``mini`` CLI of mini-swe-agent, the openai SDK
and litellm, each through a recording proxy in front of a scripted loopback upstream.

Each recipe is the fenced block after its ``<!-- recipe: NAME -->`` mark in docs/proxy.md; the
only change is the proxy's address (the docs' ``127.0.0.1:8100`` becomes a free port).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from proxy_helpers import ScriptedUpstream, serve, settled

from ctxpolicy.rundir import read_json, read_jsonl
from ctxpolicy.agent.validate import run_dir_problems
from ctxpolicy.policies import parse_spec
from ctxpolicy.proxy.app import Proxy, ProxyConfig, build_app
from ctxpolicy.proxy.recording import ProxySettings

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs" / "proxy.md"
DOCUMENTED = "http://127.0.0.1:8100"


def recipe(name: str) -> str:
    found = re.search(rf"<!-- recipe: {name} -->\n```\w+\n(.*?)\n```", DOCS.read_text(), re.S)
    assert found, f"docs/proxy.md: no recipe {name!r}"
    return found[1]


@pytest.fixture
def proxied(tmp_path):
    """(proxy URL, record dir, proxy, upstream): a recording TR/Th/0.5 proxy before a scripted upstream."""
    upstream = ScriptedUpstream()
    with serve(upstream.app) as upstream_url:
        settings = ProxySettings(
            policy=parse_spec("TR/Th/0.5"),
            threshold=3000,
            upstream_url=f"{upstream_url}/v1",
            upstream_model=None,
            summarizer_model=None,
        )
        record = tmp_path / "rec"
        proxy = Proxy(ProxyConfig(settings=settings, upstream_url=settings.upstream_url, record_dir=record))
        with serve(build_app(proxy)) as url:
            yield url, record, proxy, upstream


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), *sys.path]))
    return {**os.environ, "PYTHONPATH": path, "MSWEA_GLOBAL_CONFIG_DIR": "", "MSWEA_SILENT_STARTUP": "1"}


def test_the_mini_cli_recipe_runs_as_written(proxied, tmp_path):
    url, record, proxy, upstream = proxied
    mini = REPO / ".venv" / "bin" / "mini"
    if not mini.exists():  # a checkout without the shared venv: the mini installed with this Python
        assert shutil.which("mini"), "mini-swe-agent's mini command is not installed"
    work = tmp_path / "work"
    (work / ".venv" / "bin").mkdir(parents=True)
    (work / ".venv" / "bin" / "mini").symlink_to(mini if mini.exists() else Path(shutil.which("mini")))
    env = {**_env(), "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mini-config")}
    script = recipe("mini").replace(DOCUMENTED, url)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (work / "mini-trajectory.json").is_file()
    settled(proxy)
    [run_dir] = record.glob("*/*__a1")
    run = read_json(run_dir / "run.json")
    assert run["complete"] is True and run["proxy"]["ended"] == "ended"  # the recipe's last line ended it
    calls = list(read_jsonl(run_dir / "calls.jsonl"))
    assert len(calls) == run["proxy"]["requests"] == 2 and all(c["status"] == "ok" for c in calls)
    assert run["settings"]["mode"] == "tool" and run["versions"]["client"]["user_agent"]
    assert run_dir_problems(run_dir) == []


@pytest.mark.parametrize("name", ["openai", "litellm"])
def test_the_python_recipes_run_as_written(proxied, tmp_path, name):
    url, record, proxy, _ = proxied
    done = subprocess.run(
        [sys.executable, "-c", recipe(name).replace(DOCUMENTED, url)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "answer" in done.stdout
    settled(proxy)
    calls = [c for d in record.glob("*/*__a1") for c in read_jsonl(d / "calls.jsonl")]
    assert calls and all(c["status"] == "ok" for c in calls)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.llm
def test_the_mini_recipe_for_the_embedded_model_runs_as_written_and_compresses(embedded_llm, tmp_path):
    """Both blocks of the embedded recipe as written (only the addresses swapped), against the
    embedded model: the proxy compresses the conversation (TR fires) and the record validates."""
    import time
    import urllib.request

    mini = REPO / ".venv" / "bin" / "mini"
    ctxpolicy = REPO / ".venv" / "bin" / "ctxpolicy"
    work = tmp_path / "work"
    (work / ".venv" / "bin").mkdir(parents=True)
    for tool in (mini, ctxpolicy):
        found = tool if tool.exists() else Path(shutil.which(tool.name) or tool)
        (work / ".venv" / "bin" / tool.name).symlink_to(found)
    port = f"127.0.0.1:{_free_port()}"
    env = {**_env(), "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mini-config")}
    start = recipe("mini-embedded-proxy").replace("http://127.0.0.1:8080/v1", embedded_llm.base_url)
    proxy = subprocess.Popen(["bash", "-c", "exec " + start.replace("127.0.0.1:8100", port)], cwd=work, env=env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://{port}/health", timeout=2)
                break
            except OSError:
                assert proxy.poll() is None and time.monotonic() < deadline, "the proxy did not start"
                time.sleep(0.3)
        script = recipe("mini-embedded").replace(DOCUMENTED, f"http://{port}")
        began = time.monotonic()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        print(f"the mini recipe took {time.monotonic() - began:.0f} s")
    finally:
        proxy.terminate()
        proxy.wait(timeout=60)
    [run_dir] = (work / "results" / "proxy").glob("*/*__a1")
    run = read_json(run_dir / "run.json")
    calls = list(read_jsonl(run_dir / "calls.jsonl"))
    seen = [(c["status"], c["latency_s"], c["est_tokens_before"], c["completion_tokens"]) for c in calls]
    print("calls (status, latency, est tokens before, completion tokens):", seen)
    assert run["complete"] is True and run["identity"]["policy"] == "TR/Th/0.5"
    assert calls and all(c["status"] == "ok" and c["prompt_tokens"] for c in calls), [c["error"] for c in calls]
    assert any(e["primitive"] == "TR" for c in calls for e in c["events"]), [c["est_tokens_before"] for c in calls]
    assert run_dir_problems(run_dir) == []
