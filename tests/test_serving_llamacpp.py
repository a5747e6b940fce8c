"""The embedded llama.cpp server, for real: start, chat, cached prompt tokens, `ctxpolicy serve`, stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from conftest import LLM_THREADS, require

from ctxpolicy.serving import health
from ctxpolicy.serving.models import cached_model
from ctxpolicy.serving.server import start_server

pytestmark = pytest.mark.llm

REPO = Path(__file__).resolve().parents[1]
GGUF = "qwen2.5-coder-0.5b-instruct-q4_k_m"
MODEL_CFG = {
    "server": "llamacpp",
    "served_name": "qwen05b-test",
    "gguf": GGUF,
    "ctx_size": 2048,
    "threads": LLM_THREADS,
    "parallel": 1,
    "prefix_caching": True,
    "seed": 1,
}
SYSTEM = (
    "You are a careful software engineer. You answer in one short sentence. "
    "You never write code unless asked. Keep every answer under ten words. "
) * 3


@pytest.fixture(scope="module")
def model_available() -> None:
    require(
        cached_model(GGUF) is not None, f"embedded model (python -m ctxpolicy.serving.models ensure --install {GGUF})"
    )


def _chat(base_url: str, question: str) -> dict:
    response = httpx.post(
        f"{base_url}/chat/completions",
        timeout=120,
        json={
            "model": "qwen05b-test",
            "max_tokens": 4,
            "temperature": 0.2,
            "seed": 1,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}],
        },
    )
    response.raise_for_status()
    return response.json()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_chat_reports_cached_prompt_tokens_and_stop_ends_the_server(model_available, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with start_server(MODEL_CFG, log_path=log, ready_timeout_s=120) as server:
        assert server.info["kind"] == "llamacpp" and server.info["model"]["file"] == f"{GGUF}.gguf"
        first = _chat(server.base_url, "What is a list?")
        second = _chat(server.base_url, "What is a dict?")
        assert first["choices"][0]["message"]["content"]
        assert first["usage"]["prompt_tokens"] > 60
        cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert first["usage"]["prompt_tokens_details"]["cached_tokens"] < cached
        assert 60 < cached < second["usage"]["prompt_tokens"]  # the shared system prefix, not the new question

        check = subprocess.run(
            [sys.executable, "-m", "ctxpolicy", "serve", "--check", server.base_url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert check.returncode == 0 and "qwen05b-test" in check.stdout
        pid = server.pid
    assert _gone(pid)
    assert not health.check(server.base_url).ok
    assert "ready at http://127.0.0.1:" in log.read_text()


def test_serve_command_runs_until_sigterm(model_available, tmp_path: Path) -> None:
    ready_file = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxpolicy",
            "serve",
            "--config",
            str(REPO / "config" / "config.yaml"),
            "--model",
            "qwen05b",
            "--log",
            str(tmp_path / "server.log"),
            "--ready-file",
            str(ready_file),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready_file.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no ready file"
            time.sleep(0.2)
        ready = json.loads(ready_file.read_text())
        assert health.check(ready["url"]).models == (ready["served_name"],)
        assert ready["info"]["model"]["sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _gone(ready["pid"])
    assert not health.check(ready["url"]).ok
    assert not ready_file.exists()
