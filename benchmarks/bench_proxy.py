"""The proxy's own added latency per request, the upstream excluded.

    .venv/bin/python benchmarks/bench_proxy.py [--steps 20] [--conversations 8] [--concurrent 32]

A fake upstream that answers at once (tests/proxy_helpers.py) and the proxy (``ctxpolicy proxy``,
as deployed) each run in their own process; this process is the client. The conversation has
the shape of a long agent run: 400 messages, about 100,000 tokens (system, task, then
assistant/observation pairs of ~500 tokens). Each conversation is first sent with 360 messages
(not timed: that request counts every token once), then grows by one pair per request up to 400.

* one conversation at a time: every request is sent straight to the fake upstream and then
  through the proxy; the added latency is the per-request difference (p50, p99).
* 32 conversations at once: the same load through the proxy and straight to the fake upstream;
  reported as both latency distributions and the difference of their medians (no target).

Target (issue 15): under 5 ms p50 added for one conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

REPO = Path(__file__).resolve().parents[1]
WORDS = [f"tok{i}" for i in range(5000)]
FAKE = """
import sys, uvicorn
sys.path.insert(0, {tests!r})
from proxy_helpers import FakeUpstream
uvicorn.run(FakeUpstream(count_tokens=False).app, host="127.0.0.1", port={port}, log_level="warning", access_log=False)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def conversation(seed: int, pairs: int = 199) -> list[dict]:
    """System + task + ``pairs`` assistant/observation pairs (~500 tokens each): 400 messages, ~100k tokens."""
    rng = random.Random(seed)
    messages = [
        {"role": "system", "content": "You are a software agent. " + text(rng, 200)},
        {"role": "user", "content": f"Task {seed}: " + text(rng, 140)},
    ]
    for step in range(pairs):
        messages.append(
            {"role": "assistant", "content": f"THOUGHT: {text(rng, 28)}\n\n```mswea_bash_command\ncat f{step}.py\n```"}
        )
        messages.append(
            {"role": "user", "content": f"<returncode>0</returncode>\n<output>\n{text(rng, 140)}\n</output>"}
        )
    return messages


def wait_ready(url: str, process: subprocess.Popen, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: process exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url}: not ready after {timeout_s}s")


def body(messages: list[dict]) -> bytes:
    return orjson.dumps({"model": "fake", "messages": messages, "max_tokens": 8})


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def one_at_a_time(upstream: str, proxy: str, n_conversations: int, steps: int) -> tuple[list[float], list[float]]:
    added, direct = [], []
    headers = {"content-type": "application/json"}
    with httpx.Client(timeout=120) as client:
        for c in range(n_conversations):
            full = conversation(seed=c)
            start = len(full) - 2 * steps
            name = {"X-Ctxpolicy-Conversation": f"bench-{c}"}
            client.post(f"{proxy}/chat/completions", content=body(full[:start]), headers=headers | name)
            for n in range(start + 2, len(full) + 1, 2):
                data = body(full[:n])
                t0 = time.perf_counter()
                client.post(f"{upstream}/chat/completions", content=data, headers=headers).raise_for_status()
                t1 = time.perf_counter()
                client.post(f"{proxy}/chat/completions", content=data, headers=headers | name).raise_for_status()
                t2 = time.perf_counter()
                added.append((t2 - t1) - (t1 - t0))
                direct.append(t1 - t0)
    return added, direct


def processing_only(n_conversations: int, steps: int, policy: str, threshold: int | None) -> list[float]:
    """The proxy's own work per request without sockets: parse, find the conversation, apply the
    policy, serialize what goes upstream (the part of the added latency that is ours to cut)."""
    from types import SimpleNamespace

    from ctxpolicy.policies import parse_spec
    from ctxpolicy.proxy.app import Proxy, ProxyConfig
    from ctxpolicy.proxy.recording import ProxySettings

    spec = parse_spec(policy)
    settings = ProxySettings(
        policy=spec,
        threshold=threshold,
        upstream_url="http://unused/v1",
        upstream_model=None,
        summarizer_model=None,
        max_conversations=512,
    )
    proxy = Proxy(ProxyConfig(settings=settings, upstream_url="http://unused/v1"))
    timings = []

    async def run() -> None:
        for c in range(n_conversations):
            full = conversation(seed=5000 + c)
            request = SimpleNamespace(headers={"x-ctxpolicy-conversation": f"proc-{c}"})
            start = len(full) - 2 * steps
            for n in [start, *range(start + 2, len(full) + 1, 2)]:
                data = body(full[:n])
                t0 = time.perf_counter()
                parsed = orjson.loads(data)
                _, turn = await proxy.compress(parsed["messages"], request, "openai")
                parsed["messages"] = turn.messages
                orjson.dumps(parsed)
                if n != start:
                    timings.append(time.perf_counter() - t0)

    asyncio.run(run())
    return timings


async def concurrent(base: str, n: int, steps: int, seed0: int) -> list[float]:
    latencies: list[float] = []
    headers = {"content-type": "application/json"}
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)

    async def run(client: httpx.AsyncClient, c: int) -> None:
        full = conversation(seed=seed0 + c)
        start = len(full) - 2 * steps
        name = {"X-Ctxpolicy-Conversation": f"conc-{seed0 + c}"}
        await client.post(f"{base}/chat/completions", content=body(full[:start]), headers=headers | name)
        for m in range(start + 2, len(full) + 1, 2):
            t0 = time.perf_counter()
            response = await client.post(f"{base}/chat/completions", content=body(full[:m]), headers=headers | name)
            response.raise_for_status()
            latencies.append(time.perf_counter() - t0)

    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        await asyncio.gather(*(run(client, c) for c in range(n)))
    return latencies


def report(label: str, values: list[float]) -> None:
    ms = [v * 1000 for v in values]
    print(f"{label:<58} n={len(ms):4d}  p50={percentile(ms, 50):8.2f} ms  p99={percentile(ms, 99):8.2f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="timed requests per conversation (default 20)")
    parser.add_argument("--conversations", type=int, default=8, help="sequential conversations (default 8)")
    parser.add_argument("--concurrent", type=int, default=32, help="conversations at once (default 32)")
    parser.add_argument("--concurrent-steps", type=int, default=5, help="timed requests each (default 5)")
    parser.add_argument("--policy", default="FC")
    parser.add_argument("--threshold", type=int, default=None)
    parser.add_argument("--record", action="store_true", help="record every conversation (run directories)")
    args = parser.parse_args()

    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    up_port, proxy_port = free_port(), free_port()
    upstream, proxy = f"http://127.0.0.1:{up_port}/v1", f"http://127.0.0.1:{proxy_port}/v1"
    fake = subprocess.Popen([sys.executable, "-c", FAKE.format(tests=str(REPO / "tests"), port=up_port)], env=env)
    record = tempfile.mkdtemp(prefix="bench-proxy-")
    command = [
        sys.executable,
        "-m",
        "ctxpolicy",
        "proxy",
        "--policy",
        args.policy,
        "--endpoint",
        upstream,
        "--listen",
        f"127.0.0.1:{proxy_port}",
        "--log-level",
        "warning",
        "--max-conversations",
        "512",
    ]
    if args.threshold:
        command += ["--threshold", str(args.threshold)]
    if args.record:
        command += ["--out", record]
    proxied = None
    try:
        wait_ready(f"{upstream}/models", fake)
        proxied = subprocess.Popen(command, env=env)
        wait_ready(f"{proxy}/models", proxied)
        sample = conversation(0)
        from ctxpolicy.tokens import count_messages

        print(
            f"conversation: {len(sample)} messages, {count_messages(sample):,} tokens (cl100k), "
            f"{len(body(sample)) / 1e6:.2f} MB per request; policy {args.policy}, "
            f"record {'on' if args.record else 'off'}"
        )
        report(
            "the proxy's own work per request (no sockets)",
            processing_only(args.conversations, args.steps, args.policy, args.threshold),
        )
        added, direct = one_at_a_time(upstream, proxy, args.conversations, args.steps)
        report("one conversation at a time, straight to the upstream", direct)
        report("added latency, one conversation at a time", added)
        via = asyncio.run(concurrent(proxy, args.concurrent, args.concurrent_steps, 1000))
        direct = asyncio.run(concurrent(upstream, args.concurrent, args.concurrent_steps, 2000))
        report(f"{args.concurrent} conversations at once, through the proxy", via)
        report(f"{args.concurrent} conversations at once, straight to the upstream", direct)
        print(
            f"{'added at ' + str(args.concurrent) + ' conversations (difference of medians)':<58} "
            f"p50={1000 * (statistics.median(via) - statistics.median(direct)):8.2f} ms  "
            f"p99 difference={1000 * (percentile(via, 99) - percentile(direct, 99)):8.2f} ms"
        )
    finally:
        for process in (proxied, fake):
            if process is not None and process.poll() is None:
                process.terminate()
                process.wait(timeout=60)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
