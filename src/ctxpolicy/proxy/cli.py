"""Put a compression policy in front of any agent: an OpenAI-compatible server that forwards to
an upstream model server and applies the policy to every conversation it carries.

examples:
  ctxpolicy proxy --policy TR/Th/0.5 --threshold 3000 --endpoint http://127.0.0.1:8080/v1
  ctxpolicy proxy --policy OTRC/St --endpoint https://api.example.com/v1 \\
      --api-key-env EXAMPLE_API_KEY --upstream-model big-model --out results/proxy
  # then point the agent's base URL at http://127.0.0.1:8100/v1

The upstream API key is read from the named environment variable and never logged or recorded.
SIGTERM (or Ctrl-C) gives the requests in flight a few seconds, cancels (and records) what is
left, and writes every conversation's run.json. See docs/proxy.md.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
from urllib.parse import urlsplit

from ctxpolicy import errors
from ctxpolicy.proxy.conversations import (
    DEFAULT_IDLE_TIMEOUT_S,
    DEFAULT_MAX_CONVERSATIONS,
    DEFAULT_REQUEST_TIMEOUT_S,
    DEFAULT_SLOT_WAIT_S,
)

DEFAULT_LISTEN = "127.0.0.1:8100"
GRACEFUL_SHUTDOWN_S = 3  # after SIGTERM: requests in flight get this long, then are cancelled and recorded


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--policy", required=True, help="the policy spec, e.g. TR/Th/0.5, OTRC/St, FC")
    p.add_argument("--threshold", type=int, help="token threshold for Th-triggered policies")
    from ctxpolicy.cli_args import add_endpoint, add_out, add_summarizer, deprecated_alias

    endpoint = add_endpoint(
        p, "the upstream model server's OpenAI-compatible base URL, ending in /v1", required=True, dest="upstream"
    )
    deprecated_alias(p, "--upstream", replacement=endpoint)
    p.add_argument("--upstream-model", help="model name sent upstream (default: what the client asks for)")
    p.add_argument("--listen", default=DEFAULT_LISTEN, help=f"HOST:PORT to listen on (default {DEFAULT_LISTEN})")
    record = add_out(
        p, "the runs root: one run directory per conversation under it (default: none recorded)", dest="record"
    )
    deprecated_alias(p, "--record", replacement=record)
    add_summarizer(p, "summarizer base URL (default: --endpoint)", "summarizer model (default: --upstream-model)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the upstream's API key")
    p.add_argument(
        "--client-token-env", metavar="VAR", help="environment variable holding a bearer token that clients must send"
    )
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="S",
        help=f"end a conversation after S seconds without a request (default {DEFAULT_IDLE_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--max-conversations",
        type=int,
        default=DEFAULT_MAX_CONVERSATIONS,
        help=f"conversations kept at once (default {DEFAULT_MAX_CONVERSATIONS})",
    )
    p.add_argument(
        "--slot-wait",
        type=float,
        default=DEFAULT_SLOT_WAIT_S,
        metavar="S",
        help="how long a request that finds all --max-conversations slots busy waits for one, then 503 with "
        f"Retry-After (default {DEFAULT_SLOT_WAIT_S:g})",
    )
    p.add_argument(
        "--action-format",
        default="auto",
        help="how the agent writes its commands: auto (default: detect) | mswea_bash_command | bash | tool_calls",
    )
    p.add_argument("--max-body-mb", type=float, default=32.0, help="largest request body accepted (default 32)")
    p.add_argument(
        "--request-timeout",
        type=float,
        default=DEFAULT_REQUEST_TIMEOUT_S,
        metavar="S",
        help=f"an upstream request's whole time, headers to last byte (default {DEFAULT_REQUEST_TIMEOUT_S:g})",
    )
    p.add_argument(
        "--merge-same-role",
        action="store_true",
        help="merge consecutive same-role messages before sending upstream (for strictly alternating chat templates)",
    )
    p.add_argument(
        "--no-upstream-check",
        dest="upstream_check",
        action="store_false",
        help="start even if the upstream does not answer GET /models yet",
    )
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])


ERROR_PREFIX = "ctxpolicy proxy: "  # cli.main starts our error lines with it


class UsageError(errors.UsageError):
    """A bad argument: one line, exit code 2."""


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise UsageError(f"--listen: expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_config(args: argparse.Namespace):
    from ctxpolicy.policies import EndpointSummarizer, PolicySpecError, parse_spec
    from ctxpolicy.proxy.app import ProxyConfig
    from ctxpolicy.proxy.recording import ProxySettings

    try:
        policy = parse_spec(args.policy)
    except PolicySpecError as exc:
        raise UsageError(f"--policy: {exc}") from None
    if policy.needs_threshold and args.threshold is None:
        raise UsageError(f"--threshold: policy {policy} is threshold-triggered and needs a threshold")
    if args.threshold is not None and args.threshold < 1:
        raise UsageError(f"--threshold: must be a positive token count, got {args.threshold}")
    if args.upstream is None:
        raise UsageError("--endpoint URL is required: the upstream model server's base URL, ending in /v1")
    if not args.upstream.startswith(("http://", "https://")):
        raise UsageError(f"--endpoint: expected an http(s) URL, got {args.upstream!r}")
    if urlsplit(args.upstream).path.strip("/") == "":
        raise UsageError(
            f"--endpoint: expected the API's base URL with its path (e.g. {args.upstream.rstrip('/')}/v1), got {args.upstream!r}"
        )
    if args.request_timeout <= 0 or args.idle_timeout <= 0:
        raise UsageError("--request-timeout and --idle-timeout: must be positive seconds")
    if args.slot_wait < 0:
        raise UsageError(f"--slot-wait: must be 0 or more seconds, got {args.slot_wait:g}")
    if args.max_conversations < 1:
        raise UsageError(f"--max-conversations: must be at least 1, got {args.max_conversations}")
    api_key = _env(args.api_key_env, "--api-key-env")
    client_token = _env(args.client_token_env, "--client-token-env")
    summarizer = None
    if policy.needs_summarizer:
        model = args.summarizer_model or args.upstream_model
        if not model:
            raise UsageError(
                f"--summarizer-model: policy {policy} writes summaries; name the summarizer model (or --upstream-model)"
            )
        url = args.summarizer_url or args.upstream
        summarizer = EndpointSummarizer(url, model, api_key=api_key if url == args.upstream else None)
    dump_dir = None
    if "DUMP" in policy.stages:
        if args.record is None:
            raise UsageError(f"--out: policy {policy} dumps the history to a file and needs a runs root to record into")
        dump_dir = args.record / "dumps"
    settings = ProxySettings(
        policy=policy,
        threshold=args.threshold if policy.needs_threshold else None,
        upstream_url=args.upstream,
        upstream_model=args.upstream_model,
        summarizer_model=args.summarizer_model if policy.needs_summarizer else None,
        idle_timeout_s=args.idle_timeout,
        max_conversations=args.max_conversations,
        merge_same_role=args.merge_same_role,
    )
    return ProxyConfig(
        settings=settings,
        upstream_url=args.upstream,
        api_key=api_key,
        client_token=client_token,
        record_dir=args.record,
        max_body_bytes=int(args.max_body_mb * 1024 * 1024),
        request_timeout_s=args.request_timeout,
        slot_wait_s=args.slot_wait,
        summarizer=summarizer,
        dump_dir=dump_dir,
        action_format=_action_format(args.action_format),
    )


def _action_format(value: str) -> str | None:
    from ctxpolicy.policies import actions

    if value == "auto":
        return None
    try:
        return actions.check_format(value, "--action-format")
    except actions.ActionFormatError as exc:
        raise UsageError(f"{exc} (or auto)") from None


def _env(variable: str | None, option: str) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise UsageError(f"{option}: environment variable {variable} is not set")
    return value


def check_upstream(url: str, api_key: str | None) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(url.rstrip("/") + "/models", headers=headers, timeout=10.0)
    except httpx.HTTPError as exc:
        raise UsageError(
            f"--upstream: {url} does not answer ({type(exc).__name__}); start it first or pass --no-upstream-check"
        ) from None
    if response.status_code >= 400:
        raise UsageError(f"--upstream: {url}/models answered HTTP {response.status_code}")


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per forwarded request is noise
    host, port = parse_listen(args.listen)
    config = build_config(args)
    if not is_loopback(host) and config.client_token is None:
        raise UsageError(
            f"--listen: {host} is not a loopback address; anyone who reaches it could use the upstream, "
            "so give clients a token (--client-token-env VAR) or listen on 127.0.0.1"
        )
    if args.upstream_check:
        check_upstream(config.upstream_url, config.api_key)
    import uvicorn

    from ctxpolicy.proxy.app import Proxy, build_app

    proxy = Proxy(config)
    server = uvicorn.Server(
        uvicorn.Config(
            build_app(proxy),
            host=host,
            port=port,
            log_level=args.log_level,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            access_log=False,
        )
    )
    # uvicorn drains on SIGTERM/SIGINT, then re-raises the signal: after a clean drain, exit 0
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, _exit_cleanly)
    try:
        server.run()
    except _Drained:
        pass
    return 0 if server.started else 1


class _Drained(Exception):
    pass


def _exit_cleanly(signum, frame) -> None:
    raise _Drained()
