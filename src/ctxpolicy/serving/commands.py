"""Command lines of the model servers, built from a model's entry in the config (pure)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxpolicy.errors import CtxpolicyError

DTYPES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "fp16": "float16", "float16": "float16", "auto": "auto"}


class ModelConfigError(CtxpolicyError, ValueError):
    """A model entry of the config that cannot be served; the message names the field and value."""


def require_field(model_cfg: Mapping[str, Any], field: str) -> Any:
    value = model_cfg.get(field)
    if value in (None, ""):
        raise ModelConfigError(f"model config: field {field!r} is required for server {model_cfg.get('server')!r}")
    return value


def vllm_command(model_cfg: Mapping[str, Any], port: int) -> list[str]:
    """``vllm serve`` for one model: tensor parallel, bf16, prefix caching on or off, and
    cached prompt tokens reported in ``usage.prompt_tokens_details``."""
    dtype = str(model_cfg.get("dtype") or "bfloat16")
    if dtype not in DTYPES:
        raise ModelConfigError(f"model config: field 'dtype' has value {dtype!r}; allowed: {', '.join(DTYPES)}")
    cmd = [
        str(model_cfg.get("vllm_executable") or "vllm"),
        "serve",
        str(require_field(model_cfg, "hub_id")),
        "--served-model-name",
        str(require_field(model_cfg, "served_name")),
        "--host",
        str(model_cfg.get("host") or "127.0.0.1"),
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(model_cfg.get("tensor_parallel") or 1),
        "--max-model-len",
        str(require_field(model_cfg, "max_model_len")),
        "--dtype",
        DTYPES[dtype],
        "--enable-prefix-caching" if model_cfg.get("prefix_caching", True) else "--no-enable-prefix-caching",
        "--enable-prompt-tokens-details",
    ]
    if model_cfg.get("revision"):
        cmd += ["--revision", str(model_cfg["revision"])]
    if model_cfg.get("max_num_seqs"):
        cmd += ["--max-num-seqs", str(model_cfg["max_num_seqs"])]
    if model_cfg.get("gpu_memory_utilization"):
        cmd += ["--gpu-memory-utilization", str(model_cfg["gpu_memory_utilization"])]
    if model_cfg.get("seed") is not None:
        cmd += ["--seed", str(model_cfg["seed"])]
    cmd += [str(a) for a in model_cfg.get("extra_args") or []]
    return cmd


def llamacpp_command(
    model_cfg: Mapping[str, Any],
    model_path: Path,
    *,
    port: int,
    address_file: Path,
    parent_pid: int | None = None,
) -> list[str]:
    """The embedded llama.cpp server (``ctxpolicy.serving.llamacpp_main``) for one GGUF file."""
    cmd = [
        sys.executable,
        "-m",
        "ctxpolicy.serving.llamacpp_main",
        "--model",
        str(model_path),
        "--alias",
        str(require_field(model_cfg, "served_name")),
        "--host",
        str(model_cfg.get("host") or "127.0.0.1"),
        "--port",
        str(port),
        "--ctx-size",
        str(model_cfg.get("ctx_size") or 16384),
        "--parallel",
        str(model_cfg.get("parallel") or 1),
        "--threads",
        str(model_cfg.get("threads") or 2),
        "--address-file",
        str(address_file),
    ]
    if not model_cfg.get("prefix_caching", True):
        cmd.append("--no-prefix-caching")
    if model_cfg.get("cache_ram_mib") is not None:
        cmd += ["--cache-ram-mib", str(model_cfg["cache_ram_mib"])]
    if model_cfg.get("seed") is not None:
        cmd += ["--seed", str(model_cfg["seed"])]
    if parent_pid is not None:
        cmd += ["--parent-pid", str(parent_pid)]
    return cmd
