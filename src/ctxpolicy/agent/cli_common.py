"""What ``ctxpolicy run`` and ``ctxpolicy run-cell`` share: arguments, config checks, the endpoint."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ctxpolicy.threshold_settings import SETTINGS

if TYPE_CHECKING:
    from ctxpolicy.study import Study
    from ctxpolicy.study.grid import Cell

ENDPOINT_HELP = """\
where the model answers:
  embedded model (a `server: llamacpp` model): ctxpolicy starts llama.cpp on loopback with the
      model's GGUF (assembled from its PyPI parts by scripts/bootstrap.sh) and stops it at the end;
  vLLM (GPU hosts): a vllm model in the config is started with `vllm serve` the same way; or
      point at one you started yourself: --endpoint http://HOST:8000/v1 --served-name NAME;
  any OpenAI-compatible endpoint: --endpoint URL (…/v1), or a model with `server: endpoint`
      and `endpoint: URL` (API key from the env var named by `api_key_env`) in the config."""


CELL_FLAGS = ("benchmark", "model", "policy", "setting", "summarizer", "track")
ERROR_PREFIX = "ctxpolicy: "  # run's and run-cell's error lines, as cli.main prints them


def add_common_arguments(parser: argparse.ArgumentParser, *, cell_flags_required: bool = True) -> None:
    """The arguments of ``run`` and ``run-cell``; ``CELL_FLAGS`` name the cell (for ``run-cell``
    optional: ``--cell ID`` names a cell of the grid instead)."""
    from ctxpolicy.cli_args import add_config, add_endpoint, deprecated_alias

    add_config(parser, "study config (default: %(default)s)", default=Path("config/config.yaml"))
    parser.add_argument("--benchmark", required=cell_flags_required, help="benchmark name from the config")
    parser.add_argument("--model", required=cell_flags_required, help="model name from the config")
    parser.add_argument(
        "--policy", required=cell_flags_required, help="policy spec P/T/D, e.g. FC, TR/Th/0.5, OTRC+S-p/St+Th/0.5"
    )
    parser.add_argument("--setting", choices=SETTINGS, help="threshold setting for Th policies (default: primary)")
    parser.add_argument(
        "--thresholds",
        type=Path,
        help="thresholds file to read the setting's tokens from "
        "(default: {results_dir}/thresholds/{benchmark}/{model}.json)",
    )
    parser.add_argument("--summarizer", help="model (from the config) that writes summaries; default: the agent's")
    add_endpoint(parser, "OpenAI-compatible base URL (…/v1) of a running server; no server is started")
    parser.add_argument("--served-name", help="model name to send to --endpoint (default: the model's served_name)")
    summarizer_url = parser.add_argument(
        "--summarizer-url",
        dest="summarizer_endpoint",
        metavar="URL",
        help="base URL of a running server for --summarizer",
    )
    deprecated_alias(parser, "--summarizer-endpoint", replacement=summarizer_url)
    parser.add_argument(
        "--mode",
        choices=("text", "tool"),
        help="text: fenced bash blocks; tool: the OpenAI bash tool (default: config/agent/agent.yaml)",
    )
    parser.add_argument("--step-limit", type=int, help="override the benchmark's step limit")
    parser.add_argument("--max-tokens", type=int, help="override the model's max output tokens")
    parser.add_argument("--track", help="grid track recorded in the identity (default: full)")


def study_for_flags(args: argparse.Namespace) -> Study:
    """The study of ``--config`` (``ctxpolicy.study.load_study``), with the benchmark, models and
    endpoint URLs the flags name checked against it."""
    from ctxpolicy.study.config import ConfigError
    from ctxpolicy.study import load_study

    study = load_study(args.config)
    for kind, name, known in (("benchmarks", args.benchmark, study.benchmarks), ("models", args.model, study.models)):
        if name is not None and name not in known:
            raise ConfigError(f"{args.config}: {kind}.{name}: not defined; defined: {', '.join(known)}")
    if args.summarizer and args.summarizer not in study.models:
        raise ConfigError(f"{args.config}: models.{args.summarizer}: not defined (--summarizer)")
    check_endpoint_urls(args)
    return study


def cell_from_flags(args: argparse.Namespace, cohort: str) -> Cell:
    """The ``ctxpolicy.study.grid.Cell`` the flags describe (an ad-hoc cell, in a grid or not); the
    policy is parsed here, once."""
    from ctxpolicy.study.grid import Cell
    from ctxpolicy.policies import parse_spec

    spec = parse_spec(args.policy)
    setting = (args.setting or "primary") if spec.needs_threshold else None
    return Cell(args.track or "full", args.benchmark, args.model, spec, setting, cohort, args.summarizer)


def check_endpoint_urls(args: argparse.Namespace) -> None:
    """Bad ``--endpoint`` URLs are input errors, found before any lock is taken or server started."""
    from urllib.parse import urlsplit

    from ctxpolicy.agent.plan import PlanError

    for option, flag in (("endpoint", "--endpoint"), ("summarizer_endpoint", "--summarizer-url")):
        url = getattr(args, option, None)
        if url is None:
            continue
        try:
            parts = urlsplit(url)
            host, _ = parts.hostname, parts.port  # .port raises ValueError for a port that is not a number
        except ValueError as exc:
            raise PlanError(f"{flag}: {url!r} is not a URL ({exc})") from None
        if parts.scheme not in ("http", "https") or not host:
            raise PlanError(f"{flag}: {url!r} is not an http(s) URL with a host, such as http://127.0.0.1:8000/v1")


def settings_overrides(args: argparse.Namespace) -> dict:
    from ctxpolicy.agent.settings import SettingsError

    for option, value in (("--step-limit", args.step_limit), ("--max-tokens", args.max_tokens)):
        if value is not None and value < 1:
            raise SettingsError(f"{option}: {value} must be 1 or more")
    return {"mode": args.mode, "step_limit": args.step_limit, "max_tokens": args.max_tokens}
