"""The room table of docs/architecture.md and the import contracts of pyproject.toml are one rule.

The contracts (``[tool.importlinter]``, checked by ``scripts/lint.sh``) are the one source that CI
enforces; these tests check that the table a reader sees says the same, that every room of the
package has a row, and that the lint really fails on an import the table forbids."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

from conftest import require

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| (?P<label>\w+) \| `ctxpolicy\.(?P<room>\w+)` \| (?P<owns>.*) \| (?P<may>.*) \|$")
# top-level modules that are no room: the command dispatcher and the synthetic-data generators
NOT_ROOMS = {"__init__", "__main__", "cli", "testing"}


def _table() -> dict[str, str]:
    rows = {}
    for line in ARCHITECTURE.read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match["room"]] = match["may"]
    return rows


def _leaves() -> set[str]:
    """The rooms the text names as importable by every room."""
    text = ARCHITECTURE.read_text()
    sentence = re.search(r"((?:`ctxpolicy\.\w+`,?\s*(?:and\s*)?)+)are left out of the\s+\"may import\" column", text)
    assert sentence, "docs/architecture.md no longer names the leaves every room may import"
    return set(re.findall(r"`ctxpolicy\.(\w+)`", sentence[1]))


def _may_import(cell: str, rooms: set[str]) -> set[str]:
    """The rooms named in a "may import" cell: comma-separated, before any ';', without the
    parenthetical remarks."""
    cell = re.sub(r"\([^)]*\)", "", cell.split(";")[0])
    names = {part.strip() for part in cell.split(",")} - {"—", ""}
    unknown = names - rooms
    assert not unknown, f"docs/architecture.md names rooms that have no row: {sorted(unknown)}"
    return names


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["root_package"] == "ctxpolicy"
    return {contract["id"]: contract for contract in config["contracts"]}


def test_every_module_of_the_package_is_a_room_of_the_table():
    package = ROOT / "src" / "ctxpolicy"
    modules = {p.stem for p in package.glob("*.py")} | {
        p.name for p in package.iterdir() if (p / "__init__.py").exists()
    }
    assert modules - NOT_ROOMS == set(_table())


def test_the_contracts_forbid_exactly_what_the_table_does_not_allow():
    table = _table()
    rooms = set(table)
    leaves = _leaves()
    contracts = _contracts()
    assert set(contracts) == rooms | {"testing"}
    for room, cell in table.items():
        contract = contracts[room]
        assert contract["type"] == "forbidden" and contract["source_modules"] == [f"ctxpolicy.{room}"]
        assert contract.get("allow_indirect_imports") is True, f"{room}: the table is about direct imports"
        allowed = _may_import(cell, rooms) | (set() if room in leaves else leaves)
        expected = {f"ctxpolicy.{other}" for other in rooms - allowed - {room}}
        assert set(contract["forbidden_modules"]) == expected, room
        for ignored in contract.get("ignore_imports", []):  # an exception the table must state
            importer, imported = (part.strip().removeprefix("ctxpolicy.") for part in ignored.split("->"))
            assert f"`{importer}`" in cell and imported in cell, f"{room}: {ignored} is not in the table"


def test_no_room_imports_the_synthetic_data_generators():
    contract = _contracts()["testing"]
    assert contract["forbidden_modules"] == ["ctxpolicy.testing"]
    assert set(contract["source_modules"]) == {f"ctxpolicy.{room}" for room in _table()}


def test_lint_fails_on_an_import_that_breaks_the_room_table(tmp_path):
    require((ROOT / ".venv" / "bin" / "lint-imports").exists(), "lint-imports (a dev dependency: scripts/bootstrap.sh)")
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "lint.sh", checkout / "scripts")
    shutil.copy(ROOT / "pyproject.toml", checkout)
    shutil.copytree(ROOT / "src", checkout / "src", ignore=shutil.ignore_patterns("__pycache__"))
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def lint() -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "scripts/lint.sh", "lint-imports"], cwd=checkout, env=env, capture_output=True, text=True
        )

    clean = lint()
    assert clean.returncode == 0, clean.stdout + clean.stderr
    policies = checkout / "src" / "ctxpolicy" / "policies" / "engine.py"
    policies.write_text(policies.read_text() + "\nfrom ctxpolicy.metrics import cost  # noqa: E402,F401\n")
    broken = lint()
    assert broken.returncode == 1
    assert "room policies BROKEN" in broken.stdout
    assert "ctxpolicy.policies.engine -> ctxpolicy.metrics.cost" in broken.stdout
