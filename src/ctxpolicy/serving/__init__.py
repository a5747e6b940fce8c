"""Model servers: model files (``models``), the embedded llama.cpp server, vLLM on GPU hosts,
and health checks for any OpenAI-compatible endpoint. Nothing here imports vLLM.

Names are loaded on first use, so that ``python -m ctxpolicy.serving.models`` and
``python -m ctxpolicy.serving.llamacpp_main`` do not import their own module twice.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ModelConfigError": "ctxpolicy.serving.commands",
    "llamacpp_command": "ctxpolicy.serving.commands",
    "vllm_command": "ctxpolicy.serving.commands",
    "ModelError": "ctxpolicy.serving.models",
    "cached_model": "ctxpolicy.serving.models",
    "ensure_model": "ctxpolicy.serving.models",
    "ServerError": "ctxpolicy.serving.server",
    "ServerHandle": "ctxpolicy.serving.server",
    "launch_server": "ctxpolicy.serving.server",
    "start_server": "ctxpolicy.serving.server",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
