"""The independent counts import neither ``ctxpolicy.metrics`` nor ``ctxpolicy.figures``
(only ``pipeline.py``, the pipeline's side, does): read on the modules' syntax trees."""

from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).resolve().parent
PIPELINE_SIDE = {"pipeline.py", "conftest.py"}  # they produce the data.csv frames; they count nothing
FORBIDDEN = ("ctxpolicy.metrics", "ctxpolicy.figures")


def imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def forbidden(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN))


def test_counts_import_neither_metrics_nor_figures():
    modules = sorted(p for p in HERE.glob("*.py") if p.name not in PIPELINE_SIDE)
    assert {"records.py", "study.py", "test_counts.py"} <= {p.name for p in modules}
    for path in modules:
        bad = forbidden(imported(ast.parse(path.read_text(encoding="utf-8"))))
        assert not bad, f"{path.name} imports {bad}"


def test_the_import_check_sees_nested_and_from_imports():
    tree = ast.parse("def f():\n    from ctxpolicy.metrics import compare\nimport ctxpolicy.figures.sweep as s\n")
    assert forbidden(imported(tree)) == ["ctxpolicy.figures.sweep", "ctxpolicy.metrics", "ctxpolicy.metrics.compare"]
    assert forbidden(imported(ast.parse("from ctxpolicy.rundir import read_run_json"))) == []
