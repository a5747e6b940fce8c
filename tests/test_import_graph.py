"""The package's import graph, read from the source: no cycles, and no room imports a later one.

Every import statement counts, at module level, inside a function (an import hidden in a
function is still a door) or under ``if TYPE_CHECKING:`` (a type names a room too). The
room order is the row order of docs/architecture.md's table; the only imports against it are
the ``ignore_imports`` of pyproject.toml's contracts, which tests/test_architecture.py ties to
the exceptions the table states."""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "ctxpolicy"


def modules(package: Path) -> dict[str, Path]:
    """Every module of ``package`` by dotted name, descending only into packages (folders with an
    ``__init__.py``): the task material under benchmarks/ is data, not code of ours."""
    found = {}

    def walk(folder: Path, name: str) -> None:
        for path in sorted(folder.iterdir()):
            if path.is_dir() and (path / "__init__.py").exists():
                walk(path, f"{name}.{path.name}")
            elif path.suffix == ".py":
                found[name if path.stem == "__init__" else f"{name}.{path.stem}"] = path

    walk(package, package.name)
    return found


def import_graph(package: Path) -> dict[str, set[str]]:
    """module -> the modules of the package it imports (``from a import b`` counts as ``a.b``
    where that is a module, else as ``a``)."""
    known = modules(package)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(parent + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            else:
                continue
            for target in targets:
                while target not in known and "." in target:
                    target = target.rpartition(".")[0]
                if target in known and target != name:
                    graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def room_order() -> list[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    return re.findall(r"^\| \w+ \| `ctxpolicy\.(\w+)` \|", text, re.MULTILINE)


def stated_exceptions() -> set[tuple[str, str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    pairs = set()
    for contract in config["contracts"]:
        for line in contract.get("ignore_imports", []):
            importer, imported = (part.strip() for part in line.split("->"))
            pairs.add((importer, imported))
    return pairs


def against_the_order(graph: dict[str, set[str]], order: list[str], allowed: set[tuple[str, str]]) -> list[str]:
    rank = {room: i for i, room in enumerate(order)}

    def room(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 and parts[1] in rank else None

    wrong = []
    for importer, imported in sorted((a, b) for a, targets in graph.items() for b in targets):
        source, target = room(importer), room(imported)
        if source and target and rank[target] > rank[source] and (importer, imported) not in allowed:
            wrong.append(f"{importer} -> {imported} ({target} is listed after {source})")
    return wrong


@functools.cache
def package_graph() -> dict[str, set[str]]:
    return import_graph(PACKAGE)


def test_the_package_has_no_import_cycle():
    assert cycles(package_graph()) == []


def test_no_room_imports_one_listed_after_it():
    order = room_order()
    assert {"tokens", "policies", "serving", "study", "agent", "preflight"} <= set(order)
    assert against_the_order(package_graph(), order, stated_exceptions()) == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a/__init__.py": "",
            "a/one.py": "from pkg.a.two import thing\n",
            "a/two.py": "def thing():\n    from pkg.a import one\n    return one\n",
            "a/three.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a.one import x\n",
            "b.py": "from . import a\nfrom .a import three\n",
            "data/no_package.py": "import pkg.b\n",  # not a package: never read
        },
    )
    graph = import_graph(package)
    assert graph["pkg.a.two"] == {"pkg.a.one"} and graph["pkg.a.three"] == {"pkg.a.one"}
    assert graph["pkg.b"] == {"pkg.a", "pkg.a.three"} and "pkg.data.no_package" not in graph
    assert cycles(graph) == [["pkg.a.one", "pkg.a.two"]]


def test_an_import_of_a_later_room_is_found_unless_stated():
    graph = {"ctxpolicy.policies.engine": {"ctxpolicy.metrics.cost", "ctxpolicy.tokens"}}
    order = ["tokens", "policies", "metrics"]
    assert against_the_order(graph, order, set()) == [
        "ctxpolicy.policies.engine -> ctxpolicy.metrics.cost (metrics is listed after policies)"
    ]
    assert against_the_order(graph, order, {("ctxpolicy.policies.engine", "ctxpolicy.metrics.cost")}) == []
