"""Server command lines, health checks, and the lifecycle of a server process.

The lifecycle tests drive ``start_server`` for ``server: vllm`` with a stand-in executable (a
small OpenAI-compatible HTTP server) so that spawning, health waiting, failure reports and
process-group shutdown are exercised for real without a GPU.
"""

from __future__ import annotations

import json
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ctxpolicy.serving import health
from ctxpolicy.serving.commands import ModelConfigError, llamacpp_command, vllm_command
from ctxpolicy.serving.server import ServerError, launch_server, start_server

VLLM_CFG = {
    "server": "vllm",
    "served_name": "qwen3.5-35b-a3b",
    "hub_id": "Qwen/Qwen3.5-35B-A3B",
    "revision": "abc123",
    "dtype": "bfloat16",
    "tensor_parallel": 4,
    "max_model_len": 102400,
    "max_num_seqs": 64,
    "prefix_caching": False,
}


def _flag(cmd: list[str], name: str) -> str:
    return cmd[cmd.index(name) + 1]


# ---------------------------------------------------------------- command lines


def test_vllm_command_carries_every_setting() -> None:
    cmd = vllm_command({**VLLM_CFG, "seed": 1234, "gpu_memory_utilization": 0.9, "extra_args": ["--foo", "1"]}, 8123)
    assert cmd[:3] == ["vllm", "serve", "Qwen/Qwen3.5-35B-A3B"]
    assert _flag(cmd, "--served-model-name") == "qwen3.5-35b-a3b"
    assert _flag(cmd, "--port") == "8123" and _flag(cmd, "--host") == "127.0.0.1"
    assert _flag(cmd, "--tensor-parallel-size") == "4"
    assert _flag(cmd, "--max-model-len") == "102400"
    assert _flag(cmd, "--max-num-seqs") == "64"
    assert _flag(cmd, "--dtype") == "bfloat16"
    assert _flag(cmd, "--revision") == "abc123"
    assert _flag(cmd, "--seed") == "1234"
    assert _flag(cmd, "--gpu-memory-utilization") == "0.9"
    assert "--no-enable-prefix-caching" in cmd and "--enable-prefix-caching" not in cmd
    assert "--enable-prompt-tokens-details" in cmd
    assert cmd[-2:] == ["--foo", "1"]


def test_vllm_command_defaults_and_prefix_caching_on() -> None:
    cfg = {
        "server": "vllm",
        "served_name": "m",
        "hub_id": "org/m",
        "max_model_len": 4096,
        "dtype": "bf16",
        "vllm_executable": "/envs/vllm/bin/vllm",
    }
    cmd = vllm_command(cfg, 9000)
    assert cmd[0] == "/envs/vllm/bin/vllm"
    assert "--enable-prefix-caching" in cmd and "--no-enable-prefix-caching" not in cmd
    assert _flag(cmd, "--dtype") == "bfloat16" and _flag(cmd, "--tensor-parallel-size") == "1"
    for absent in ("--revision", "--max-num-seqs", "--seed", "--gpu-memory-utilization"):
        assert absent not in cmd


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hub_id": None}, "'hub_id' is required"),
        ({"max_model_len": None}, "'max_model_len' is required"),
        ({"dtype": "int3"}, "'dtype' has value 'int3'"),
    ],
)
def test_vllm_command_rejects_bad_entries(change: dict, message: str) -> None:
    with pytest.raises(ModelConfigError, match=message):
        vllm_command({**VLLM_CFG, **change}, 8000)


def test_llamacpp_command() -> None:
    cfg = {
        "server": "llamacpp",
        "served_name": "q",
        "gguf": "x",
        "ctx_size": 8192,
        "threads": 3,
        "parallel": 2,
        "prefix_caching": False,
        "seed": 7,
    }
    cmd = llamacpp_command(cfg, Path("/m/x.gguf"), port=0, address_file=Path("/t/addr"), parent_pid=42)
    assert cmd[:3] == [sys.executable, "-m", "ctxpolicy.serving.llamacpp_main"]
    assert _flag(cmd, "--model") == "/m/x.gguf" and _flag(cmd, "--alias") == "q"
    assert (_flag(cmd, "--ctx-size"), _flag(cmd, "--threads"), _flag(cmd, "--parallel")) == ("8192", "3", "2")
    assert "--no-prefix-caching" in cmd and _flag(cmd, "--seed") == "7" and _flag(cmd, "--parent-pid") == "42"


def test_llamacpp_params_split_context_between_slots() -> None:
    from ctxpolicy.serving.llamacpp_main import build_params, parse_args

    params = build_params(parse_args(["--model", "/m.gguf", "--alias", "q", "--ctx-size", "4096", "--parallel", "2"]))
    assert params.n_ctx == 8192 and params.n_parallel == 2
    assert params.cache_prompt and not params.ctx_shift
    off = build_params(parse_args(["--model", "/m.gguf", "--alias", "q", "--no-prefix-caching"]))
    assert not off.cache_prompt and off.cache_ram_mib == 0


# ---------------------------------------------------------------- health checks


def test_base_url_normalisation() -> None:
    assert health.base_url("http://h:1") == "http://h:1/v1"
    assert health.base_url("http://h:1/v1/") == "http://h:1/v1"
    assert health.server_root("http://h:1/v1") == "http://h:1"


class _Stub(BaseHTTPRequestHandler):
    status = 200
    body: dict = {"object": "list", "data": [{"id": "stub-model"}]}

    def do_GET(self) -> None:  # noqa: N802
        payload = json.dumps(self.body if self.path == "/v1/models" else {"version": "9.9"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def stub_server():
    servers = []

    def make(status: int = 200) -> str:
        handler = type("Handler", (_Stub,), {"status": status})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield make
    for server in servers:
        server.shutdown()
        server.server_close()


def test_check_reports_models_errors_and_refusals(stub_server) -> None:
    good = health.check(stub_server())
    assert good.ok and good.models == ("stub-model",)
    bad = health.check(stub_server(status=500))
    assert not bad.ok and "HTTP 500" in bad.detail
    refused = health.check(f"http://127.0.0.1:{_closed_port()}")
    assert not refused.ok and "ConnectError" in refused.detail


def test_endpoint_kind_is_only_checked(stub_server, tmp_path: Path) -> None:
    url = stub_server()
    with start_server({"server": "endpoint", "endpoint": url}, log_path=tmp_path / "log") as handle:
        assert handle.base_url == url + "/v1"
        assert handle.served_name == "stub-model"  # taken from /v1/models when the config names none
        assert handle.info["kind"] == "endpoint" and handle.info["version"] == "9.9"
        assert handle.process is None
    assert health.check(url).ok  # an endpoint is never stopped
    with pytest.raises(ServerError, match="endpoint not healthy"):
        launch_server(
            {"server": "endpoint", "endpoint": stub_server(status=503)}, log_path=tmp_path / "log", ready_timeout_s=1
        )


def test_serve_check_exit_codes(stub_server) -> None:
    from ctxpolicy.cli import main

    assert main(["serve", "--check", stub_server()]) == 0
    assert main(["serve", "--check", f"http://127.0.0.1:{_closed_port()}"]) == 1
    assert main(["serve"]) == 2


def test_unknown_server_kind(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="'server' has value 'tgi'"):
        launch_server({"server": "tgi"}, log_path=tmp_path / "log")


# ---------------------------------------------------------------- process lifecycle (stand-in vLLM)

FAKE_VLLM = textwrap.dedent("""\
    import json, os, signal, subprocess, sys, time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    name = args[args.index("--served-model-name") + 1]
    mode = os.environ["FAKE_VLLM_MODE"]
    print("fake vllm", " ".join(args), flush=True)
    child = subprocess.Popen(["sleep", "300"])  # a worker in the same process group
    open(os.environ["FAKE_VLLM_PIDS"], "w").write(f"{os.getpid()} {child.pid}")
    if mode == "exit":
        print("CUDA error: no GPU found", flush=True)
        sys.exit(3)
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "hang":
        time.sleep(300)
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = {"data": [{"id": name}]} if self.path == "/v1/models" else {"version": "0.0-fake"}
            data = json.dumps(body).encode()
            self.send_response(200); self.send_header("Content-Length", str(len(data))); self.end_headers()
            self.wfile.write(data)
        def log_message(self, *a): pass
    time.sleep(0.5)
    ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
""")


@pytest.fixture
def fake_vllm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    exe = tmp_path / "vllm"
    exe.write_text(f"#!{sys.executable}\n{FAKE_VLLM}")
    exe.chmod(0o755)
    pids = tmp_path / "pids"
    monkeypatch.setenv("FAKE_VLLM_PIDS", str(pids))

    def configure(mode: str) -> dict:
        monkeypatch.setenv("FAKE_VLLM_MODE", mode)
        return {**VLLM_CFG, "vllm_executable": str(exe)}

    configure.pids = lambda: [int(p) for p in pids.read_text().split()]
    return configure


def test_vllm_start_serves_then_stop_ends_the_process_group(fake_vllm, tmp_path: Path) -> None:
    log = tmp_path / "cell" / "server.log"
    with start_server(fake_vllm("ok"), log_path=log, ready_timeout_s=30) as handle:
        assert handle.base_url.startswith("http://127.0.0.1:") and handle.base_url.endswith("/v1")
        assert health.check(handle.base_url).models == ("qwen3.5-35b-a3b",)
        assert handle.info == {
            "kind": "vllm",
            "version": "0.0-fake",
            "url": handle.base_url,
            "model": {
                "name": "qwen3.5-35b-a3b",
                "file": None,
                "sha256": None,
                "hub_id": "Qwen/Qwen3.5-35B-A3B",
                "revision": "abc123",
            },
        }
        pids = fake_vllm.pids()
        assert all(_alive(p) for p in pids)
    assert _all_dead(pids)
    assert not health.check(handle.base_url).ok
    assert "--no-enable-prefix-caching" in log.read_text()


def test_stop_kills_a_server_that_ignores_sigterm(fake_vllm, tmp_path: Path) -> None:
    handle = launch_server(fake_vllm("stubborn"), log_path=tmp_path / "server.log", ready_timeout_s=30)
    started = time.monotonic()
    handle.stop(grace_s=1)
    assert time.monotonic() - started < 10
    assert _all_dead(fake_vllm.pids())


def test_a_server_that_dies_reports_its_log(fake_vllm, tmp_path: Path) -> None:
    with pytest.raises(ServerError, match=r"exited with code 3(.|\n)*CUDA error: no GPU found"):
        launch_server(fake_vllm("exit"), log_path=tmp_path / "server.log", ready_timeout_s=30)
    assert _all_dead(fake_vllm.pids())


def test_a_server_that_never_answers_times_out_and_is_killed(fake_vllm, tmp_path: Path) -> None:
    with pytest.raises(ServerError, match=r"not healthy after 2 s(.|\n)*fake vllm serve"):
        launch_server(fake_vllm("hang"), log_path=tmp_path / "server.log", ready_timeout_s=2)
    assert _all_dead(fake_vllm.pids())


def test_missing_vllm_executable_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="vLLM executable not found"):
        launch_server({**VLLM_CFG, "vllm_executable": str(tmp_path / "no-vllm")}, log_path=tmp_path / "log")


# ---------------------------------------------------------------- helpers


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _all_dead(pids: list[int], within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
