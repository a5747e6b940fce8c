"""Benchmarks: task lists, workspaces, environments and grading behind one adapter interface.

`get_adapter(name, bench_cfg, repo_root)` picks the adapter named by the config entry's
`adapter:` key (local | swebench | terminalbench). Adding a benchmark means adding one
adapter module, one entry in ADAPTERS and one cohort file (docs/benchmarks.md).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ctxpolicy.benchmarks.base import BenchmarkAdapter, BenchmarkError, Task, Verdict

# adapter key -> "module:class"; modules are imported on demand
ADAPTERS = {
    "local": "ctxpolicy.benchmarks.local:LocalAdapter",
    "swebench": "ctxpolicy.benchmarks.swe_bench:SWEBenchAdapter",
    "terminalbench": "ctxpolicy.benchmarks.terminal_bench:TerminalBenchAdapter",
}

__all__ = ["ADAPTERS", "BenchmarkAdapter", "BenchmarkError", "Task", "Verdict", "get_adapter"]


def get_adapter(name: str, bench_cfg: dict[str, Any], repo_root: Path) -> BenchmarkAdapter:
    kind = (bench_cfg or {}).get("adapter")
    if kind not in ADAPTERS:
        raise BenchmarkError(f"benchmarks.{name}.adapter: {kind!r} is not one of {', '.join(sorted(ADAPTERS))}")
    module_name, class_name = ADAPTERS[kind].split(":")
    adapter_class = getattr(importlib.import_module(module_name), class_name)
    return adapter_class(bench_cfg, Path(repo_root), name=name)
