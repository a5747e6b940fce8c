"""The environment: every imported package declared, requirements.lock agreeing with pyproject.toml
and with the conda files in envs/, and the lock recorded in provenance."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
import sys
import tomllib
from importlib.metadata import packages_distributions, version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from ctxpolicy.provenance import read_sidecar, write_sidecar
from ctxpolicy.provenance.bundle import export_bundle
from ctxpolicy.provenance.chain import trace
from ctxpolicy.provenance.lockfile import (
    LOCK_FILE,
    LockError,
    lock_differences,
    lock_record,
    normalize,
    read_pins,
)
from ctxpolicy.provenance.render import render_tree
from ctxpolicy.provenance.sidecar import SidecarError

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def declared(groups: tuple[str, ...]) -> dict[str, Requirement]:
    """The requirements of pyproject.toml: "runtime" is [project] dependencies, others are extras."""
    requirements = {}
    for group in groups:
        lines = (
            PYPROJECT["project"]["dependencies"]
            if group == "runtime"
            else PYPROJECT["project"]["optional-dependencies"][group]
        )
        for line in lines:
            requirement = Requirement(line)
            requirements[normalize(requirement.name)] = requirement
    return requirements


def excluded(path: Path) -> bool:
    """Task material and notebooks: the paths ruff leaves alone (pyproject's tool.ruff.extend-exclude)."""
    relative = path.relative_to(REPO).as_posix()
    return any(
        relative == entry or relative.startswith(entry.rstrip("/") + "/")
        for entry in PYPROJECT["tool"]["ruff"]["extend-exclude"]
        if "*" not in entry
    )


def top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def env_files() -> list[Path]:
    return sorted((REPO / "envs").glob("*.yaml"))


def conda_env(path: Path) -> tuple[list[str], list[str]]:
    """(conda dependencies, pip lines) of a conda environment file."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    conda = [d for d in data["dependencies"] if isinstance(d, str)]
    pip = [line for d in data["dependencies"] if isinstance(d, dict) for line in d.get("pip", [])]
    return conda, pip


def pip_pins(lines: list[str]) -> dict[str, str]:
    pins = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line.strip())
        if match:
            pins[normalize(match[1])] = match[2]
    return pins


def distributions_pinned_in_envs() -> set[str]:
    return {name for path in env_files() for name in pip_pins(conda_env(path)[1])}


# where code lives, and the pyproject groups its imports may come from
CODE_ROOTS = {
    "src/ctxpolicy": ("runtime",),
    "tests": ("runtime", "dev"),
    "benchmarks": ("runtime", "dev"),
    "workflow/scripts": ("runtime", "dev"),
    "scripts": ("runtime", "dev"),
}


@pytest.mark.parametrize("root", sorted(CODE_ROOTS))
def test_every_third_party_import_maps_to_a_declared_dependency(root):
    allowed = set(declared(CODE_ROOTS[root]))
    distributions = packages_distributions()
    env_only = distributions_pinned_in_envs()
    files = [path for path in sorted((REPO / root).rglob("*.py")) if not excluded(path)]
    assert files, f"no Python files under {root}"
    local = {path.stem for path in files} | {path.parent.name for path in files}
    undeclared = []
    for path in files:
        for module in sorted(top_level_imports(path)):
            if module in sys.stdlib_module_names or module in ("__future__", "ctxpolicy") or module in local:
                continue
            if module in distributions:
                if not {normalize(d) for d in distributions[module]} & allowed:
                    undeclared.append(f"{path.relative_to(REPO)}: {module} (from {', '.join(distributions[module])})")
            elif normalize(module) not in env_only:  # e.g. terminal_bench: envs/terminal-bench.yaml
                undeclared.append(f"{path.relative_to(REPO)}: {module} (not installed, in no envs/*.yaml)")
    assert not undeclared, f"imported but not declared in pyproject.toml {CODE_ROOTS[root]}: {undeclared}"


def test_the_lock_pins_every_declared_dependency_within_its_specifier():
    pins = read_pins(LOCK_FILE)
    for name, requirement in declared(("runtime", "dev")).items():
        assert name in pins, f"requirements.lock lacks {name}: run scripts/lock.sh"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, pyproject.toml asks {requirement}: run scripts/lock.sh"
        )


def test_the_lock_has_hashes_for_every_pin_and_no_compromised_litellm():
    text = LOCK_FILE.read_text(encoding="utf-8")
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    for block in blocks:
        name = block.split("==")[0]
        assert "--hash=sha256:" in block, f"requirements.lock: {name} has no hash"
    assert len(blocks) == len(read_pins(LOCK_FILE))
    litellm = read_pins(LOCK_FILE)["litellm"]
    assert litellm not in ("1.82.7", "1.82.8") and not litellm.startswith("1.107."), litellm
    assert "torch" not in read_pins(LOCK_FILE)


def test_analysis_env_pins_exactly_the_lock_and_its_python():
    conda, pip = conda_env(REPO / "envs/analysis.yaml")
    assert pip_pins(pip) == read_pins(LOCK_FILE), (
        "envs/analysis.yaml differs from requirements.lock: run scripts/lock.sh"
    )
    assert ".." in pip
    locked_python = re.search(r"--python-version (\d+\.\d+)", (REPO / "scripts/lock.sh").read_text())[1]
    assert f"python={locked_python}" in conda


@pytest.mark.parametrize("path", env_files(), ids=lambda path: path.name)
def test_every_env_pin_of_a_locked_package_equals_the_lock(path):
    pins = read_pins(LOCK_FILE)
    differing = {
        name: (pinned, pins[name])
        for name, pinned in pip_pins(conda_env(path)[1]).items()
        if name in pins and pins[name] != pinned
    }
    assert not differing, f"{path.name}: pins differ from requirements.lock (env, lock): {differing}"


def test_read_pins_takes_names_extras_and_markers_and_refuses_ranges(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text(
        "# header\nPyYAML==6.0.4 \\\n    --hash=sha256:ab\n    # via x\n"
        "uvicorn[standard]==0.54.0 ; sys_platform != 'win32'\n\nzope.interface==7.0\n"
    )
    assert read_pins(lock) == {"pyyaml": "6.0.4", "uvicorn": "0.54.0", "zope-interface": "7.0"}
    lock.write_text("numpy==2.4.6\npandas>=2\n")
    with pytest.raises(LockError, match=r"requirements.lock:2: expected an exact pin NAME==VERSION, got 'pandas>=2'"):
        read_pins(lock)
    with pytest.raises(LockError, match="unreadable lock file"):
        read_pins(tmp_path / "missing.lock")


def test_lock_record_hashes_the_lock_and_lists_packages_not_installed_as_locked(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"pytest=={version('pytest')}\nnumpy==0.0.1\nno-such-distribution-xyz==1.0\n")
    record = lock_record(lock)
    assert record["path"] == "requirements.lock"
    assert record["sha256"] == hashlib.sha256(lock.read_bytes()).hexdigest()
    assert record["differs"] == {
        "no-such-distribution-xyz": {"locked": "1.0", "installed": None},
        "numpy": {"locked": "0.0.1", "installed": version("numpy")},
    }
    assert lock_record(tmp_path / "absent.lock") is None
    assert lock_differences({"a": "1"}, {"a": "1"}) == {}


def test_sidecars_and_bundles_record_the_checkouts_lock(tmp_path):
    target = tmp_path / "tables" / "t.csv"
    target.parent.mkdir()
    target.write_text("a\n1\n")
    data = read_sidecar(write_sidecar(target, config_path=None, inputs=[], repo_root=tmp_path))
    assert data["lock"]["path"] == "requirements.lock"
    assert data["lock"]["sha256"] == hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()
    assert isinstance(data["lock"]["differs"], dict)
    assert any(
        line.strip().startswith("lock      requirements.lock  sha256 " + data["lock"]["sha256"][:12])
        for line in render_tree(trace(target))
    )
    manifest = export_bundle(tmp_path, tmp_path / "bundle.tar.gz")
    assert manifest["lock"]["sha256"] == data["lock"]["sha256"]


def test_a_malformed_lock_field_in_a_sidecar_is_named(tmp_path):
    target = tmp_path / "t.csv"
    target.write_text("a\n")
    sidecar = write_sidecar(target, config_path=None, inputs=[], repo_root=tmp_path)
    data = json.loads(sidecar.read_text(encoding="utf-8"))
    data["lock"] = {"path": "requirements.lock"}
    sidecar.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SidecarError, match="field 'lock'"):
        read_sidecar(sidecar)


def _conda_pins_module():
    spec = importlib.util.spec_from_file_location("conda_pins", REPO / "scripts/conda_pins.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_conda_pins_replaces_only_the_lines_between_the_markers():
    conda_pins = _conda_pins_module()
    text = (
        "dependencies:\n  - pip:\n      - keep-before==1\n"
        f"      {conda_pins.BEGIN}\n      - old==0.1\n      {conda_pins.END}\n      - ..\n"
    )
    assert conda_pins.with_pins(text, {"zeta": "2", "alpha": "1.0"}) == (
        "dependencies:\n  - pip:\n      - keep-before==1\n"
        f"      {conda_pins.BEGIN}\n      - alpha==1.0\n      - zeta==2\n      {conda_pins.END}\n      - ..\n"
    )
    with pytest.raises(LockError, match=r"envs/x.yaml: expected one .* line followed by one"):
        conda_pins.with_pins("dependencies: []\n", {}, "envs/x.yaml")
