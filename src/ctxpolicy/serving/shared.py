"""One model server per model for a whole local Snakemake run, instead of one per cell.

A local DAG runs its cells one after another on the same machine; starting and loading the
model again for each cell was most of the local study's overhead. The Snakefile's ``onstart``
(local runs only, never on a cluster, where each cell job keeps its own server) announces a
*session* in the environment of every job: ``CTXPOLICY_SHARED_SERVERS=OWNER_PID:DIR``.

``run-cell`` then calls ``attach``: the first cell that needs a model starts
``ctxpolicy serve --owner-pid OWNER_PID`` for it, detached, and waits for its ready file
``DIR/MODEL-HASH.json``; later cells find the file and reuse the server. HASH is taken over the
model's config entry, so a changed entry never reuses an old server. Lifetime is bound to the
owner (Snakemake): the Snakefile's ``onsuccess``/``onerror`` call ``stop_all``, and ``serve``
itself exits within a second of the owner being gone, however it ended (``kill -9`` too), and
the model server dies with ``serve`` (parent-death signal). No server outlives the DAG.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxpolicy.serving import health
from ctxpolicy.serving.models import exclusive
from ctxpolicy.serving.server import DEFAULT_READY_TIMEOUT_S, ServerError, ServerHandle, log_tail

ENV = "CTXPOLICY_SHARED_SERVERS"
STOP_WAIT_S = 30.0


@dataclass(frozen=True)
class Session:
    owner_pid: int
    directory: Path

    def announce(self) -> str:
        return f"{self.owner_pid}:{self.directory}"


def alive(pid: int) -> bool:
    """The process runs (a zombie, exited but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def session_from_environment(environ: Mapping[str, str] = os.environ) -> Session | None:
    """The announced session, or None when there is none or its owner is gone."""
    value = environ.get(ENV, "")
    pid, _, directory = value.partition(":")
    if not pid.isdigit() or not directory or not alive(int(pid)):
        return None
    return Session(int(pid), Path(directory))


def ready_file(session: Session, model: str, model_cfg: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(model_cfg, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return session.directory / f"{model}-{digest}.json"


def attach(session: Session, *, config_path: Path, model: str, model_cfg: Mapping[str, Any]) -> ServerHandle:
    """The session's server of ``model``, started now when there is none; the caller never stops it."""
    ready = ready_file(session, model, model_cfg)
    session.directory.mkdir(parents=True, exist_ok=True)
    with exclusive(ready.with_suffix(".lock")):  # one cell starts it, the others wait and reuse it
        handle = _reuse(ready, session)
        if handle is None:
            handle = _start(ready, session, config_path, model, model_cfg)
    return handle


def _reuse(ready: Path, session: Session) -> ServerHandle | None:
    try:
        data = json.loads(ready.read_text())
    except (OSError, ValueError):
        return None
    if data.get("owner_pid") != session.owner_pid or not alive(int(data.get("serve_pid", 0))):
        return None
    if not health.check(data["url"]).ok:
        return None
    return ServerHandle(data["info"]["kind"], data["url"], data["served_name"], data["info"], ready.with_suffix(".log"))


def _start(ready: Path, session: Session, config_path: Path, model: str, model_cfg: Mapping[str, Any]) -> ServerHandle:
    ready.unlink(missing_ok=True)
    log_path = ready.with_suffix(".log")
    cmd = [
        sys.executable,
        "-m",
        "ctxpolicy",
        "serve",
        "--config",
        str(config_path),
        "--model",
        model,
        "--ready-file",
        str(ready),
        "--log",
        str(log_path),
        "--owner-pid",
        str(session.owner_pid),
    ]
    with open(ready.with_suffix(".serve.log"), "ab") as out:
        process = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )  # not ours: it outlives this cell
    timeout = float(model_cfg.get("startup_timeout_s") or DEFAULT_READY_TIMEOUT_S[model_cfg["server"]])
    deadline = time.monotonic() + timeout + 10
    while time.monotonic() < deadline:
        handle = _reuse(ready, session)
        if handle is not None:
            return handle
        if process.poll() is not None:
            raise ServerError(
                f"shared server of {model} exited with code {process.returncode}; "
                f"log {ready.with_suffix('.serve.log')}:\n{log_tail(ready.with_suffix('.serve.log'))}"
            )
        time.sleep(0.2)
    process.terminate()
    raise ServerError(
        f"shared server of {model} not ready after {timeout:.0f} s; log {log_path}:\n{log_tail(log_path)}"
    )


def stop_all(directory: Path, owner_pid: int, wait_s: float = STOP_WAIT_S) -> list[int]:
    """Stop every shared server of ``owner_pid``'s session (SIGTERM to ``serve``); the pids stopped."""
    stopped = []
    for ready in sorted(Path(directory).glob("*.json")):
        try:
            data = json.loads(ready.read_text())
            pid = int(data["serve_pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if data.get("owner_pid") != owner_pid or not alive(pid):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        stopped.append(pid)
    deadline = time.monotonic() + wait_s
    while any(alive(pid) for pid in stopped) and time.monotonic() < deadline:
        time.sleep(0.2)
    return stopped
