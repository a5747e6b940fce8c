"""Start a model server in the foreground, or health-check any OpenAI-compatible endpoint.

ctxpolicy serve --config C --model M [--port P] [--log FILE] [--ready-file F]
    starts the server of models.M (llamacpp: the embedded model; vllm: `vllm serve` on a
    GPU host; endpoint: only checks it), writes --ready-file (JSON: url, served_name, info)
    once it is healthy, and runs until SIGTERM/SIGINT, then stops the server.
    With --owner-pid P it also stops once process P is gone (the shared server of a local
    Snakemake run, ctxpolicy.serving.shared).
ctxpolicy serve --check URL [--wait S]
    exits 0 when URL answers GET /v1/models, 1 when it does not (within S seconds).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ctxpolicy.errors import UsageError

ERROR_PREFIX = "ctxpolicy serve: "  # cli.main starts our error lines with it


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import URL_METAVAR, add_config

    add_config(parser, "the study config (YAML)")
    parser.add_argument("--model", help="a key of the config's models:")
    parser.add_argument("--port", type=int, help="port to listen on (default: a free one)")
    parser.add_argument("--log", type=Path, help="server log file (default: ./server-MODEL.log)")
    parser.add_argument("--ready-file", type=Path, help="written atomically once the server is healthy")
    parser.add_argument("--ready-timeout", type=float, help="seconds to wait for health (default: per server kind)")
    parser.add_argument("--owner-pid", type=int, help="stop the server once this process is gone")
    parser.add_argument("--check", metavar=URL_METAVAR, help="only health-check this endpoint and exit 0/1")
    parser.add_argument("--wait", type=float, default=0.0, help="with --check: keep trying this many seconds")


def main(args: argparse.Namespace) -> int:
    if args.check:
        return _check(args.check, args.wait)
    if not args.config or not args.model:
        raise UsageError("give --config and --model, or --check URL")
    return _serve(args)


def _check(url: str, wait_s: float) -> int:
    from ctxpolicy.serving import health

    result = health.wait_until_healthy(url, timeout_s=wait_s) if wait_s > 0 else health.check(url)
    if result.ok:
        print(f"ok {health.base_url(url)} models: {result.detail}")
        return 0
    print(f"unhealthy: {result.detail}", file=sys.stderr)
    return 1


def _load_model_cfg(config_path: Path, model: str) -> dict:
    from ctxpolicy.study.config import load_config

    config = load_config(config_path)
    models = config["models"]
    if model not in models:
        raise UsageError(f"{config_path}: models.{model} not found; known: {', '.join(sorted(models))}")
    cfg = dict(models[model])
    if cfg.get("seed") is None:  # the model's server seed, else the study's (the schema gives one)
        cfg["seed"] = config["seed"]
    return cfg


def _serve(args: argparse.Namespace) -> int:
    import json
    import os
    import signal
    import threading

    from ctxpolicy.atomic import atomic_write_json
    from ctxpolicy.serving.server import ServerError, log_tail, start_server
    from ctxpolicy.serving.shared import alive

    model_cfg = _load_model_cfg(args.config, args.model)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log_path = args.log or Path(f"server-{args.model}.log")
    try:
        with start_server(model_cfg, log_path=log_path, port=args.port, ready_timeout_s=args.ready_timeout) as server:
            ready = {
                "url": server.base_url,
                "served_name": server.served_name,
                "pid": server.pid,
                "info": server.info,
                "serve_pid": os.getpid(),
                "owner_pid": args.owner_pid,
            }
            if args.ready_file:
                atomic_write_json(args.ready_file, ready, indent=2)
            print(json.dumps(ready), flush=True)
            try:
                while not stop.wait(1.0):
                    if args.owner_pid and not alive(args.owner_pid):
                        print(f"ctxpolicy serve: owner {args.owner_pid} is gone; stopping", file=sys.stderr)
                        break
                    if server.process is not None and server.process.poll() is not None:
                        raise ServerError(
                            f"server exited with code {server.process.returncode}; log {log_path}:\n{log_tail(log_path)}"
                        )
            finally:
                if args.ready_file:
                    args.ready_file.unlink(missing_ok=True)
    except ValueError as exc:  # ModelConfigError: the model's block, named as the config's
        raise UsageError(f"{args.config}: models.{args.model}: {exc}") from exc
    return 0
