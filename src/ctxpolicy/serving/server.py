"""Start, health-check and stop the model server a cell needs.

``start_server(model_cfg, log_path=...)`` is a context manager: it starts the server of one
``models:`` entry of the config as a separate process group (logging to ``log_path``), waits
until ``GET /v1/models`` answers, yields a ``ServerHandle``, and stops the server (TERM, then
KILL for the whole group) on exit. ``server: endpoint`` entries are only health-checked.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.serving import health
from ctxpolicy.serving.commands import ModelConfigError, llamacpp_command, require_field, vllm_command

STOP_GRACE_S = 20.0
DEFAULT_READY_TIMEOUT_S = {"llamacpp": 300.0, "vllm": 1800.0, "endpoint": 60.0}
LOG_TAIL_LINES = 25


class ServerError(CtxpolicyError, RuntimeError):
    """A server that did not start, died, or never became healthy; the message has the log tail."""

    keeps_lines = True  # the log's tail, line by line


def server_info(
    kind: str,
    version: str | None,
    url: str,
    *,
    name: str,
    file: str | None = None,
    sha256: str | None = None,
    hub_id: str | None = None,
    revision: str | None = None,
) -> dict:
    """``ServerHandle.info``, the one shape of it: the server's ``kind``, ``version`` and ``url``
    at the top, what it serves under ``model`` (``name``, ``file``, ``sha256``, ``hub_id``,
    ``revision``). The ready file of ``ctxpolicy serve`` carries it as is, and
    ``agent.plan.endpoint_for_server`` reads it."""
    model = {"name": name, "file": file, "sha256": sha256, "hub_id": hub_id, "revision": revision}
    return {"kind": kind, "version": version, "url": url, "model": model}


@dataclass
class ServerHandle:
    kind: str
    base_url: str
    served_name: str
    info: dict
    log_path: Path | None = None
    process: subprocess.Popen | None = field(default=None, repr=False)
    _scratch: tempfile.TemporaryDirectory | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """TERM the server's process group, KILL it after ``grace_s``; a no-op for endpoints.

        Only the first call acts: once the group is gone its id may belong to someone else.
        """
        if self.process is not None and not self._stopped:
            self._stopped = True
            _stop_group(self.process, grace_s)
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None


@contextlib.contextmanager
def start_server(
    model_cfg: Mapping[str, Any],
    *,
    log_path: Path,
    port: int | None = None,
    ready_timeout_s: float | None = None,
) -> Iterator[ServerHandle]:
    handle = launch_server(model_cfg, log_path=log_path, port=port, ready_timeout_s=ready_timeout_s)
    try:
        yield handle
    finally:
        handle.stop()


def launch_server(
    model_cfg: Mapping[str, Any],
    *,
    log_path: Path,
    port: int | None = None,
    ready_timeout_s: float | None = None,
) -> ServerHandle:
    """Start (or, for an endpoint, reach) the server and return once it is healthy; the caller stops it."""
    kind = model_cfg.get("server")
    if kind not in DEFAULT_READY_TIMEOUT_S:
        raise ModelConfigError(f"model config: field 'server' has value {kind!r}; allowed: llamacpp, vllm, endpoint")
    timeout = float(ready_timeout_s or model_cfg.get("startup_timeout_s") or DEFAULT_READY_TIMEOUT_S[kind])
    if kind == "endpoint":
        return _reach_endpoint(model_cfg, timeout)
    if kind == "llamacpp":
        return _launch_llamacpp(model_cfg, Path(log_path), port, timeout)
    return _launch_vllm(model_cfg, Path(log_path), port, timeout)


def _launch_llamacpp(model_cfg: Mapping[str, Any], log_path: Path, port: int | None, timeout: float) -> ServerHandle:
    from ctxpolicy.serving.models import REGISTRY, ensure_model

    gguf = str(require_field(model_cfg, "gguf"))
    model_path = ensure_model(gguf)  # never downloads at run time: bootstrap.sh assembles it
    scratch = tempfile.TemporaryDirectory(prefix="ctxpolicy-llamacpp-")
    address_file = Path(scratch.name) / "address"
    cmd = llamacpp_command(model_cfg, model_path, port=port or 0, address_file=address_file, parent_pid=os.getpid())
    process = _spawn(cmd, log_path)
    handle = ServerHandle("llamacpp", "", str(model_cfg["served_name"]), {}, log_path, process, scratch)
    try:
        deadline = time.monotonic() + timeout
        while not address_file.exists():
            if process.poll() is not None:
                raise ServerError(_failure(f"llama.cpp server exited with code {process.returncode}", log_path))
            if time.monotonic() >= deadline:
                raise ServerError(_failure(f"llama.cpp server not listening after {timeout:.0f} s", log_path))
            time.sleep(0.2)
        handle.base_url = health.base_url(address_file.read_text().strip())
        _wait_healthy(handle, deadline - time.monotonic(), "llama.cpp server")
    except BaseException:
        handle.stop()
        raise
    handle.info = server_info(
        "llamacpp",
        _package_version("xllamacpp"),
        handle.base_url,
        name=handle.served_name,
        file=model_path.name,
        sha256=REGISTRY[gguf].sha256,
    )
    return handle


def _launch_vllm(model_cfg: Mapping[str, Any], log_path: Path, port: int | None, timeout: float) -> ServerHandle:
    cfg = dict(model_cfg)
    cfg.setdefault("vllm_executable", os.environ.get("CTXPOLICY_VLLM", "vllm"))
    port = port or free_port(cfg.get("host") or "127.0.0.1")
    cmd = vllm_command(cfg, port)
    try:
        process = _spawn(cmd, log_path)
    except FileNotFoundError:
        raise ServerError(
            f"vLLM executable not found: {cmd[0]!r} (set CTXPOLICY_VLLM or vllm_executable; see envs/vllm.yaml)"
        ) from None
    host = cfg.get("host") or "127.0.0.1"
    url_host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    handle = ServerHandle("vllm", f"http://{url_host}:{port}/v1", str(cfg["served_name"]), {}, log_path, process)
    try:
        _wait_healthy(handle, timeout, "vLLM server")
    except BaseException:
        handle.stop()
        raise
    handle.info = server_info(
        "vllm",
        health.server_version(handle.base_url),
        handle.base_url,
        name=handle.served_name,
        hub_id=cfg.get("hub_id"),
        revision=cfg.get("revision"),
    )
    return handle


def _reach_endpoint(model_cfg: Mapping[str, Any], timeout: float) -> ServerHandle:
    url = model_cfg.get("endpoint") or model_cfg.get("url")
    if not url:
        raise ModelConfigError("model config: field 'endpoint' (the server's URL) is required for server 'endpoint'")
    headers = health.auth_headers(model_cfg.get("api_key_env"))
    result = health.wait_until_healthy(url, timeout_s=timeout, headers=headers)
    if not result.ok:
        raise ServerError(f"endpoint not healthy after {timeout:.0f} s: {result.detail}")
    served_name = model_cfg.get("served_name") or result.models[0]
    base = health.base_url(url)
    info = server_info(
        "endpoint",
        health.server_version(base, headers),
        base,
        name=str(served_name),
        hub_id=model_cfg.get("hub_id"),
        revision=model_cfg.get("revision"),
    )
    return ServerHandle("endpoint", base, str(served_name), info)


def _wait_healthy(handle: ServerHandle, timeout: float, what: str) -> None:
    process = handle.process
    result = health.wait_until_healthy(
        handle.base_url, timeout_s=max(timeout, 1.0), alive=lambda: process.poll() is None
    )
    if result.ok:
        return
    if process.poll() is not None:
        raise ServerError(_failure(f"{what} exited with code {process.returncode}", handle.log_path))
    raise ServerError(_failure(f"{what} not healthy after {timeout:.0f} s ({result.detail})", handle.log_path))


def _spawn(cmd: list[str], log_path: Path) -> subprocess.Popen:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        log.write(f"\n==> {time.strftime('%Y-%m-%dT%H:%M:%S%z')} {' '.join(cmd)}\n".encode())
        log.flush()
        return subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent_if_main_thread(),
        )


def _die_with_parent_if_main_thread():
    # PR_SET_PDEATHSIG fires when the *thread* that forked exits, so only ask for it from the
    # main thread, whose exit is the process's
    if threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork, not in the child
    pr_set_pdeathsig = 1

    def set_pdeathsig() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM)

    return set_pdeathsig


def _stop_group(process: subprocess.Popen, grace_s: float) -> None:
    pgid = process.pid  # start_new_session made the server its group's leader
    if process.poll() is None:
        _signal_group(pgid, signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            process.wait()
    _signal_group(pgid, signal.SIGKILL)  # workers the server forked and left behind


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _failure(message: str, log_path: Path | None) -> str:
    return f"{message}; log {log_path}:\n{log_tail(log_path)}" if log_path else message


def log_tail(log_path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = Path(log_path).read_text(errors="replace")
    except (OSError, TypeError):
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:])


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
