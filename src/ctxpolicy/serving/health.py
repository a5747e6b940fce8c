"""Health checks for OpenAI-compatible servers: ``GET {base}/models`` answers 200 with a model list.

Each check ends by its deadline however slowly the server sends (``ctxpolicy.deadline_http``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from ctxpolicy.deadline_http import request


@dataclass(frozen=True)
class Health:
    ok: bool
    detail: str  # the served model ids when ok, else why not
    models: tuple[str, ...] = ()


def base_url(url: str) -> str:
    """The OpenAI base URL (ending in /v1) for a server URL given with or without it."""
    url = url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def server_root(url: str) -> str:
    """The server's root URL (without /v1), where vLLM and llama.cpp put /version and /props."""
    url = url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def auth_headers(api_key_env: str | None) -> dict[str, str]:
    key = os.environ.get(api_key_env) if api_key_env else None
    return {"Authorization": f"Bearer {key}"} if key else {}


def check(url: str, *, timeout_s: float = 5.0, headers: Mapping[str, str] | None = None) -> Health:
    models_url = base_url(url) + "/models"
    try:
        response = request("GET", models_url, timeout_s=timeout_s, headers=dict(headers or {}))
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return Health(False, f"{models_url}: {type(exc).__name__}: {exc}")
    if response.status_code != 200:
        return Health(False, f"{models_url}: HTTP {response.status_code} {response.text[:200]!r}")
    try:
        ids = tuple(str(m["id"]) for m in response.json()["data"])
    except (ValueError, KeyError, TypeError):
        return Health(False, f"{models_url}: not an OpenAI model list: {response.text[:200]!r}")
    return Health(True, ", ".join(ids), ids)


def wait_until_healthy(
    url: str,
    *,
    timeout_s: float,
    alive: Callable[[], bool] = lambda: True,
    headers: Mapping[str, str] | None = None,
    interval_s: float = 0.5,
) -> Health:
    """Poll until the server is healthy, the deadline passes, or ``alive()`` says it died."""
    deadline = time.monotonic() + timeout_s
    while True:
        health = check(url, timeout_s=min(5.0, max(0.5, deadline - time.monotonic())), headers=headers)
        if health.ok or not alive() or time.monotonic() >= deadline:
            return health
        time.sleep(interval_s)


def server_version(url: str, headers: Mapping[str, str] | None = None) -> str | None:
    """The version a server reports: vLLM's /version, or llama.cpp's build in /props."""
    root = server_root(url)
    for path, read in (("/version", lambda d: d.get("version")), ("/props", lambda d: d.get("build_info"))):
        try:
            response = request("GET", root + path, timeout_s=5.0, headers=dict(headers or {}))
            if response.status_code == 200 and (version := read(response.json())):
                return str(version)
        except (httpx.HTTPError, httpx.InvalidURL, ValueError, AttributeError):
            continue
    return None
