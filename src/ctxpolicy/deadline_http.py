"""HTTP requests under a hard wall-clock deadline that no slow or trickling server can extend.

httpx's timeouts bound each network operation (connect, one read, one write), so a server that
sends a byte every few seconds keeps a request alive for as long as it likes (encode/httpx#1450).
Here each request runs on an anyio event loop inside ``anyio.fail_after``: when the time is up the
pending read is cancelled, whether the server is still sending headers or body, the connection is
closed, and :class:`DeadlineExpired` is raised. An httpx-and-anyio leaf: every room may import it.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import httpx

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class DeadlineExpired(httpx.TimeoutException):
    """The request's overall time ran out (however the server paced its bytes)."""


def request(
    method: str,
    url: str,
    *,
    timeout_s: float,
    connect_timeout_s: float | None = None,
    json: Any = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """Send the request and read the whole answer within ``timeout_s`` seconds, start to last byte.

    Raises :class:`DeadlineExpired` when the time runs out, and httpx's own errors otherwise
    (``httpx.HTTPError``, or ``httpx.InvalidURL`` for a URL that does not parse). Proxies from the
    environment apply except for loopback URLs.
    """
    parsed = httpx.URL(url)
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise httpx.InvalidURL(f"port {parsed.port} out of range in {url}")
    trust_env = parsed.host not in LOOPBACK_HOSTS
    if timeout_s <= 0:
        raise DeadlineExpired(f"no time left for {method} {url}")
    connect = timeout_s if connect_timeout_s is None else min(connect_timeout_s, timeout_s)
    send = functools.partial(_send, method, url, timeout_s, connect, json, dict(headers or {}), trust_env)
    return _run(send)


async def _send(
    method: str, url: str, timeout_s: float, connect_s: float, body: Any, headers: dict[str, str], trust_env: bool
) -> httpx.Response:
    timeout = httpx.Timeout(timeout_s, connect=connect_s)
    async with httpx.AsyncClient(timeout=timeout, trust_env=trust_env, verify=_ssl_context(trust_env)) as client:
        try:
            with anyio.fail_after(timeout_s):
                return await client.request(method, url, json=body, headers=headers)
        except TimeoutError:
            raise DeadlineExpired(f"no complete answer within {timeout_s:.1f}s from {method} {url}") from None


@functools.cache
def _ssl_context(trust_env: bool):
    # Built once: loading the CA bundle costs more than a loopback request.
    return httpx.create_ssl_context(trust_env=trust_env)


def _run(send) -> httpx.Response:
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no event loop in this thread
        return anyio.run(send)
    with ThreadPoolExecutor(max_workers=1) as pool:  # called from async code (e.g. a notebook)
        return pool.submit(anyio.run, send).result()
