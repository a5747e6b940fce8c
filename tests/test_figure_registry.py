"""The figures' registry (workflow/figures.yaml's `module` field): every target names the module
that draws it, docs/figures.md lists them as the registry says, and a throwaway figure added
through a module and a row alone reaches the catalog, the workflow's rules and the docs' list."""

from __future__ import annotations

import importlib
import json
import re

import pytest
import yaml

from ctxpolicy.figures import catalog
from ctxpolicy.study import load_study
from ctxpolicy.study.config import ConfigError
from workflow_helpers import ROOT, planned_jobs, snakemake, write_study

THROWAWAY_MODULE = '''"""A throwaway figure: the registry's test adds it through its module and its row alone."""


def compute(runs, study, **_):
    return runs.head(0)


def plot(data, name="throwaway"):
    raise NotImplementedError
'''
THROWAWAY_ROW = {
    "shows": "a throwaway figure (tests/test_figure_registry.py)",
    "number": None,
    "notebook": "fig21",
    "module": "throwaway_figure",
    "data": ["runs"],
    "scope": "full",
    "pairs": {"from": "full_comparison", "default": "all"},
}


def test_every_target_names_the_module_its_notebook_draws_with():
    for name, spec in catalog.TARGETS.items():
        importlib.import_module(spec["module"])
        package, _, module = spec["module"].rpartition(".")
        notebook = json.loads((ROOT / spec["notebook"]).read_text())
        code = "\n".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
        imported = re.findall(rf"^from {re.escape(package)} import (.+)$", code, flags=re.M)
        assert any(module in [n.strip() for n in names.split(",")] for names in imported), (name, spec["module"])
    assert catalog.TARGETS["fig2"]["module"] == "ctxpolicy.figures.tradeoffs"
    assert catalog.TARGETS["fig9"]["module"] == catalog.TARGETS["fig3"]["module"] == "ctxpolicy.figures.sweep"


def test_the_docs_list_is_the_registry():
    docs = (ROOT / "docs" / "figures.md").read_text()
    assert catalog.with_module_list(docs) == docs, "run: .venv/bin/python -m ctxpolicy.figures.catalog"
    for name, spec in catalog.TARGETS.items():
        assert f"| `{name}` |" in docs and f"`{spec['module']}`" in docs


@pytest.fixture
def throwaway(tmp_path, monkeypatch):
    """A throwaway module on the import path and the repository's catalog with its row added,
    named by CTXPOLICY_FIGURE_CATALOG: (catalog file, the module's folder)."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "throwaway_figure.py").write_text(THROWAWAY_MODULE)
    rows = yaml.safe_load(catalog.CATALOG_FILE.read_text())
    rows["throwaway"] = THROWAWAY_ROW
    path = tmp_path / "figures.yaml"
    path.write_text(yaml.safe_dump(rows, sort_keys=False))
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.setenv(catalog.CATALOG_ENV, str(path))
    return path, modules


def test_a_throwaway_figure_reaches_the_catalog_and_the_docs_list_through_its_row(throwaway):
    targets = catalog.targets_for(load_study(ROOT / "config" / "config.yaml"))
    spec = targets["throwaway"]
    assert spec["module"] == "throwaway_figure" and spec["kind"] == "figure"
    assert spec["outputs"] == [f"figures/throwaway{s}" for s in catalog.FIGURE_SUFFIXES]
    assert spec["params"] == {"name": "throwaway", "pairs": ""}
    assert "| `throwaway` | ours | `throwaway_figure` | `notebooks/fig21.ipynb` |" in catalog.module_list()
    assert "throwaway" in catalog.report_captions(targets)


def test_a_throwaway_figure_gets_its_workflow_rule_through_its_row(throwaway, tmp_path):
    path, modules = throwaway
    config = write_study(tmp_path, "config.yaml", {"main": ["hello-world"], "sweep": ["hello-world"]})
    env = {catalog.CATALOG_ENV: str(path), "PYTHONPATH": str(modules)}
    done = snakemake(tmp_path, config, "figures/throwaway.pdf", "--dry-run", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = planned_jobs(done.stdout + done.stderr)
    assert jobs.get("figure_throwaway") == 1 and "figure_fig2" not in jobs


def test_a_row_naming_a_module_that_does_not_exist_names_file_target_and_value(throwaway, monkeypatch):
    path, _ = throwaway
    rows = yaml.safe_load(path.read_text())
    rows["throwaway"]["module"] = "ctxpolicy.figures.no_such_figure"
    path.write_text(yaml.safe_dump(rows, sort_keys=False))
    catalog._read_catalog.cache_clear()
    with pytest.raises(ConfigError, match=re.escape(f"{path}: throwaway: module 'ctxpolicy.figures.no_such_figure'")):
        catalog.targets_for(load_study(ROOT / "config" / "config.yaml"))
    del rows["throwaway"]["module"]
    path.write_text(yaml.safe_dump(rows, sort_keys=False))
    catalog._read_catalog.cache_clear()
    with pytest.raises(ConfigError, match=re.escape(f"{path}: throwaway: module None")):
        catalog.targets_for(load_study(ROOT / "config" / "config.yaml"))
