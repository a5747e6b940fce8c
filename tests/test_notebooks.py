"""Every figure and table notebook runs on the paper-shaped synthetic data set (``paper_tables``:
the study's grid, 3 models × 2 benchmarks × 3 attempts, a few tasks per cohort) through the
catalog, with the parameters the workflow gives it for config/synthetic-paper.yaml (its pairs
and name), and writes all its outputs; one target of each figure module (and two of the tables)
is also run here, in the test's own process, and must write the same bytes (a render in another
process, with another hash seed, is the same render); and a representative set of notebooks runs
on the three fixed edge data sets of the small fixture (empty, every FC run time-limited, one task
with one attempt).

Every figure module's compute and plot functions run on those edge sets in-process in
tests/test_figures_edge.py; here the papermill path (parameters, reading the tables from
disk, the writers) is exercised for the figures that broke or went blank in a real study
(Figures 2 and 3) and for the planned-attempt accounting (Figure 20)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxpolicy.figures.catalog import TARGETS, is_imported, papermill_args
from ctxpolicy.figures.output import CHECK_LAYOUT
from figure_helpers import legend_look_clashes

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path("tests/fixtures/figures")  # relative: the fixture config names paths from the root
TEST_BOOT = 20
# Run again in-process for the byte-identity check: a target of every figure module (every quoted
# view: each is its own computation) and the tables.
REPEATED = (
    *("fig2", "fig3", "fig4", "fig5", "fig6", "fig9", "fig10", "fig16", "fig17", "fig19", "fig20", "fig21"),
    *("reacquisition", "retention", "cost_sensitivity", "cost_decomposition", "cost_methods"),
    *("quoted_calls", "quoted_summary_share", "quoted_shared_tokens", "quoted_compressions", "peak_context"),
    *("table1_4", "table5"),
)
# Figures 2-18 draw no two policies alike in a legend (test_figures_scale.py checks the rest of them)
LEGENDS = ("fig2", "fig3", "fig4", "fig5", "fig6", "fig9", "fig10", "fig16", "fig17")
# Figures drawn for every pair they are given ('' in the catalog: every pair of the full comparison)
EVERY_PAIR = ("fig19", "fig20", "fig21", "reacquisition", "retention", "cost_sensitivity", "cost_decomposition")
EDGE_NOTEBOOKS = ("fig2", "fig3", "fig20")
# The paper-shaped data set's targets: all but the imported corpus's (tests/test_workflow_imported.py)
DRAWN = [name for name, spec in TARGETS.items() if not is_imported(spec)]
sys.path.insert(0, str(ROOT / FIXTURE))
import edge_cases  # noqa: E402


def papermill(args: list[str]) -> subprocess.CompletedProcess:
    """papermill with the layout check on: a figure whose texts collide or are cut off fails."""
    return subprocess.run(
        [sys.executable, "-m", "papermill", "--no-progress-bar", "-k", "python3", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, CHECK_LAYOUT: "1"},
    )


def execute_edge(name: str, out_dir: Path, executed_dir: Path, tables_dir: Path) -> subprocess.CompletedProcess:
    """A notebook on one of the fixture's edge data sets."""
    return papermill(
        papermill_args(
            name,
            config_path=str(FIXTURE / "config.yaml"),
            tables_dir=str(tables_dir),
            out_dir=str(out_dir),
            executed=str(executed_dir / f"{name}.ipynb"),
            extra={"n_boot": TEST_BOOT},
        )
    )


@functools.cache
def paper_targets(config_path: Path) -> dict[str, dict]:
    """The main targets for the paper-shaped data set's config, each with its pairs and name."""
    from ctxpolicy.figures.catalog import targets_for
    from ctxpolicy.figures.inputs import read_study

    return {n: s for n, s in targets_for(read_study(config_path)).items() if s["variant_of"] is None}


def paper_parameters(name: str, out: Path, paper_tables) -> dict:
    tables_dir, config_path = paper_tables
    spec = paper_targets(config_path)[name]
    return {
        "tables_dir": str(tables_dir),
        "config_path": str(config_path),
        "out_dir": str(out),
        **spec["params"],
        "n_boot": TEST_BOOT,
    }


def execute_paper(name: str, tmp: Path, paper_tables) -> Path:
    """The named target's notebook on the paper-shaped data set, its outputs in TMP/figures
    (papermill's Python API, the layout check on: the edge runs above use its command line; this
    saves a Python start and papermill's imports per notebook, the kernel is its own process)."""
    import papermill as pm

    out, executed = tmp / "figures", tmp / "notebooks"
    executed.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CHECK_LAYOUT, "1")  # the kernel inherits this process's environment
        pm.execute_notebook(
            str(ROOT / TARGETS[name]["notebook"]),
            str(executed / f"{name}.ipynb"),
            parameters=paper_parameters(name, out, paper_tables),
            kernel_name="python3",
            progress_bar=False,
            cwd=str(ROOT),
        )
    return out


def execute_here(notebook: str, params: dict) -> dict:
    """The notebook's code cells run in this process, from the repository root, with the
    parameters set after its parameters cell (where papermill puts them); its namespace after."""
    import matplotlib
    import nbformat

    matplotlib.use("Agg")
    namespace: dict = {}
    with contextlib.chdir(ROOT), matplotlib.rc_context():
        matplotlib.rcdefaults()  # what a fresh kernel starts from, whatever earlier tests set
        for cell in nbformat.read(ROOT / notebook, as_version=4).cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, notebook, "exec"), namespace)
                if "parameters" in cell.metadata.get("tags", []):
                    namespace.update(params)
    return namespace


def produced(name: str, out_dir: Path) -> list[Path]:
    return [out_dir / Path(p).name for p in TARGETS[name]["outputs"]]


# One test per notebook, each executing its own (no module fixture holding all of them): the
# notebooks spread over the xdist workers instead of queueing on one.
@pytest.mark.parametrize("name", DRAWN)
def test_notebook_writes_its_outputs_and_nothing_else(name, tmp_path, paper_tables):
    out_dir = execute_paper(name, tmp_path / "first", paper_tables)  # a failing cell raises
    for path in produced(name, out_dir):
        assert path.exists(), f"{name} did not write {path.name}"
        data = path.read_bytes()
        if path.name.endswith(".notes.json"):
            said = json.loads(data)
            assert isinstance(said, list) and all(isinstance(n, str) for n in said)
            continue
        assert len(data) > 40
        magic = {".pdf": b"%PDF", ".png": b"\x89PNG"}.get(path.suffix)
        if magic:
            assert data.startswith(magic)
    assert {p.name for p in out_dir.iterdir()} == {p.name for p in produced(name, out_dir)}, "stray outputs"
    if name in REPEATED:
        check_again_here(name, out_dir, tmp_path / "again", paper_tables)


def check_again_here(name: str, out_dir: Path, again: Path, paper_tables) -> None:
    """The target run again in this process writes the same bytes; its figure has the synthetic
    mark, no two legend entries that look alike (LEGENDS), and no visible panel without data and without a
    note (the layout check ran in the notebook: the same bytes are the same picture)."""
    import matplotlib.pyplot as plt

    from ctxpolicy.figures import inputs, notes, style

    try:
        here = execute_here(TARGETS[name]["notebook"], paper_parameters(name, again, paper_tables))
        for path in produced(name, out_dir):
            assert (again / path.name).read_bytes() == path.read_bytes(), f"{path.name} differs"
        fig = here.get("fig")
        if fig is None:
            return
        assert style.SYNTHETIC_MARK in {t.get_text() for t in fig.texts}
        if name in LEGENDS:
            assert legend_look_clashes(fig) == []
        visible = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax for ax in visible if not notes.has_plotted_data(ax) and not notes.has_note(ax)] == []
        if name in EVERY_PAIR:
            table = here["data"].table
            given = inputs.parse_pairs(paper_targets(paper_tables[1])[name]["params"]["pairs"])
            expected = len(given) if given else len(inputs.combos(here["study"], "full_comparison"))
            assert len(set(zip(table["benchmark"], table["model"]))) == expected
    finally:
        plt.close("all")


def execute_edge_set(edge: str, tmp: Path) -> dict[str, subprocess.CompletedProcess]:
    """The edge data set written as tables under TMP, and the edge notebooks run on it (outputs
    in TMP/figures)."""
    runs, calls = edge_cases.EDGE_SETS[edge](*edge_cases.load())
    tables = tmp / "tables"
    tables.mkdir(parents=True)
    runs.to_parquet(tables / "runs.parquet", index=False)
    calls.to_parquet(tables / "calls.parquet", index=False)
    (tmp / "notebooks").mkdir()
    return {name: execute_edge(name, tmp / "figures", tmp / "notebooks", tables) for name in EDGE_NOTEBOOKS}


@pytest.mark.parametrize("edge", list(edge_cases.EDGE_SETS))
def test_edge_notebooks_render_and_say_what_is_missing(edge, tmp_path):
    results = execute_edge_set(edge, tmp_path)
    figures = tmp_path / "figures"
    for name in EDGE_NOTEBOOKS:
        result = results[name]
        assert result.returncode == 0, f"{name} on {edge} failed:\n{result.stderr[-3000:]}"
        for path in produced(name, figures):
            assert path.exists(), f"{name} on {edge} did not write {path.name}"
    said = {name: json.loads((figures / f"{name}.notes.json").read_text()) for name in EDGE_NOTEBOOKS}
    if edge == "empty":
        assert all(said.values()), said
    if edge == "fc_time_limited":
        for name in ("fig2", "fig3"):
            assert any("finished within the time limit: resource ratios undefined" in n for n in said[name])
