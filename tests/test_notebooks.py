"""Every figure and table notebook runs on the fixed fixture, through the catalog, as the
workflow runs it (papermill), writes all its outputs, and writes them byte-identically when
run again."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ctxpolicy.figures.catalog import TARGETS, papermill_args

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path("tests/fixtures/figures")  # relative: the fixture config names paths from the root
TEST_BOOT = 50
# Re-executed for the byte-identity check: one of each kind of drawing and the tables.
REPEATED = ("fig2", "fig5", "fig16", "table1_4", "table5")


def execute(name: str, out_dir: Path, executed_dir: Path) -> subprocess.CompletedProcess:
    args = papermill_args(name, config_path=str(FIXTURE / "config.yaml"),
                          tables_dir=str(FIXTURE / "tables"), out_dir=str(out_dir),
                          executed=str(executed_dir / f"{name}.ipynb"), extra={"n_boot": TEST_BOOT})
    return subprocess.run([sys.executable, "-m", "papermill", "--no-progress-bar", "-k", "python3", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def execute_all(names, tmp: Path) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    out, executed = tmp / "figures", tmp / "notebooks"
    executed.mkdir(parents=True)
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip(names, pool.map(lambda n: execute(n, out, executed), names)))
    return out, results


def produced(name: str, out_dir: Path) -> list[Path]:
    return [out_dir / Path(p).name for p in TARGETS[name]["outputs"]]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    return execute_all(list(TARGETS), tmp_path_factory.mktemp("first"))


@pytest.mark.parametrize("name", list(TARGETS))
def test_notebook_writes_its_outputs(first_run, name):
    out_dir, results = first_run
    result = results[name]
    assert result.returncode == 0, f"{name} failed:\n{result.stderr[-3000:]}"
    for path in produced(name, out_dir):
        assert path.exists(), f"{name} did not write {path.name}"
        data = path.read_bytes()
        assert len(data) > 40
        magic = {".pdf": b"%PDF", ".png": b"\x89PNG"}.get(path.suffix)
        if magic:
            assert data.startswith(magic)


def test_no_stray_outputs(first_run):
    out_dir, _ = first_run
    expected = {Path(p).name for spec in TARGETS.values() for p in spec["outputs"]}
    assert {p.name for p in out_dir.iterdir()} == expected


def test_second_execution_is_byte_identical(first_run, tmp_path):
    out_dir, _ = first_run
    again, results = execute_all(list(REPEATED), tmp_path)
    for name in REPEATED:
        assert results[name].returncode == 0, results[name].stderr[-3000:]
        for path in produced(name, out_dir):
            assert (again / path.name).read_bytes() == path.read_bytes(), f"{path.name} differs"
