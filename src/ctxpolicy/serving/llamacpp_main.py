"""The embedded llama.cpp server as its own process (the prebuilt ``xllamacpp`` wheel).

``xllamacpp.Server`` runs llama.cpp's OpenAI-compatible HTTP server inside the Python
process that creates it; this wrapper gives it a process of its own, so that the caller can
log, health-check and kill it like any other server:

    python -m ctxpolicy.serving.llamacpp_main --model FILE.gguf --alias NAME --port 0 \
        --address-file ADDR

It writes the address it listens on to ``--address-file`` once the model is loaded and
serves until SIGTERM/SIGINT, or until its parent process dies.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

from ctxpolicy.atomic import atomic_write_text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m ctxpolicy.serving.llamacpp_main",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", type=Path, required=True, help="the GGUF file")
    p.add_argument("--alias", required=True, help="the model name clients request (served name)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--ctx-size", type=int, default=16384, help="context length of one request")
    p.add_argument("--parallel", type=int, default=1, help="requests served at once (slots)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false")
    p.add_argument(
        "--cache-ram-mib", type=int, default=1024, help="host memory for prompt caches of idle slots (0 disables)"
    )
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--address-file", type=Path, help="written with the server's URL once it is ready")
    p.add_argument("--parent-pid", type=int, help="exit when this process is gone")
    return p.parse_args(argv)


def build_params(args: argparse.Namespace):
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(args.model)
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_parallel = args.parallel
    params.n_ctx = args.ctx_size * args.parallel  # llama.cpp splits n_ctx between the slots
    params.ctx_shift = False  # a prompt that does not fit must fail, never be silently truncated
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.cache_prompt = args.prefix_caching
    params.cache_idle_slots = args.prefix_caching
    params.cache_ram_mib = args.cache_ram_mib if args.prefix_caching else 0
    params.endpoint_metrics = True
    params.endpoint_props = True
    params.use_jinja = True
    if args.seed is not None:
        params.sampling.seed = args.seed
    return params


def _watch_parent(parent_pid: int, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        if os.getppid() != parent_pid:
            stop.set()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import xllamacpp

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.parent_pid:
        threading.Thread(target=_watch_parent, args=(args.parent_pid, stop), daemon=True).start()

    print(f"xllamacpp {xllamacpp.__version__} loading {args.model}", file=sys.stderr, flush=True)
    server = xllamacpp.Server(build_params(args))  # returns once the model is loaded and the port is bound
    address = server.listening_address
    print(f"ready at {address}", file=sys.stderr, flush=True)
    if args.address_file:
        atomic_write_text(args.address_file, address)
    while not stop.wait(1.0):
        pass
    print("stopping", file=sys.stderr, flush=True)
    del server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
