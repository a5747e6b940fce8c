"""Every figure and table notebook runs on the paper-shaped synthetic data set (``paper_tables``:
the study's grid, 3 models × 2 benchmarks × 3 attempts, a few tasks per cohort) through papermill
and the catalog, with the parameters the workflow gives it for config/synthetic-paper.yaml (its
pairs and name), and writes all its outputs; one target of each figure module (and two of the
tables) is also run here, in the test's own process, and must write the same data, notes and PDF
bytes (a render in another process, with another hash seed, is the same render); and a
representative set of notebooks runs, in this process, on the three fixed edge data sets of the
small fixture (empty, every FC run time-limited, one task with one attempt).

Every figure module's compute and plot functions run on those edge sets in tests/test_figures_edge.py;
here the notebook's own path (parameters, reading the tables from disk, the writers, the layout
check) is exercised on them for the figures that broke or went blank in a real study (Figures 2
and 3) and for the planned-attempt accounting (Figure 20). Papermill's path (a kernel, its
parameters cell) is the main test's."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path

import pytest

from ctxpolicy.figures.catalog import TARGETS, is_imported, papermill_parameters
from ctxpolicy.figures.output import CHECK_LAYOUT
from figure_helpers import legend_look_clashes, silent_empty_panels

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path("tests/fixtures/figures")  # relative: the fixture config names paths from the root
TEST_BOOT = 20
# The paper-shaped data set's targets: all but the imported corpus's (tests/test_workflow_imported.py)
DRAWN = [name for name, spec in TARGETS.items() if not is_imported(spec)]
# Through papermill (a kernel, the parameters cell, the layout check): one target of each notebook,
# its first or, of a notebook of several figures, its cheapest; the notebook's other targets run
# the same cells with their own name and pairs in this process, the layout check on.
CHEAPEST = {"notebooks/fig9_15.ipynb": "fig10", "notebooks/fig16_18.ipynb": "fig18"}
PAPERMILL = {
    CHEAPEST.get(notebook, name) for notebook, name in {TARGETS[n]["notebook"]: n for n in reversed(DRAWN)}.items()
}
# Run again in-process for the byte-identity check across processes: a target of every figure
# module drawn through papermill, and the tables.
REPEATED = (
    *("fig2", "fig3", "fig4", "fig5", "fig6", "fig19", "fig20", "fig21", "quoted_calls"),
    *("reacquisition", "retention", "cost_sensitivity", "cost_decomposition", "cost_methods"),
    *("table1_4", "table5"),
)
# Figures 2-18 draw no two policies alike in a legend (the figure drawn in this process is checked)
LEGENDS = ("fig2", "fig3", "fig4", "fig5", "fig6", *(f"fig{n}" for n in range(9, 19)))
# Figures drawn for every pair they are given ('' in the catalog: every pair of the full comparison)
EVERY_PAIR = ("fig19", "fig20", "fig21", "reacquisition", "retention", "cost_sensitivity", "cost_decomposition")
# The sweep ablations given one pair: their table holds that pair alone
ONE_PAIR = ("fig9", "fig12", "fig13", "fig15")
EDGE_NOTEBOOKS = ("fig2", "fig3", "fig20")
sys.path.insert(0, str(ROOT / FIXTURE))
import edge_cases  # noqa: E402


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


def execute_paper(name: str, out: Path, paper_tables) -> Path:
    """The named target's notebook on the paper-shaped data set, its outputs in OUT (papermill's
    Python API, the layout check on: no Python start and papermill imports per notebook; the
    kernel is its own process)."""
    import papermill as pm

    executed = out.parent / "notebooks"
    executed.mkdir(parents=True)
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CHECK_LAYOUT, "1")  # the kernel inherits this process's environment
        # no inline copy of each figure in the executed notebook (ipykernel's default backend draws
        # every open figure again, as a PNG, after each cell): the test reads the files written
        env.setenv("MPLBACKEND", "Agg")
        pm.execute_notebook(
            str(ROOT / TARGETS[name]["notebook"]),
            str(executed / f"{name}.ipynb"),
            parameters=paper_parameters(name, out, paper_tables),
            kernel_name="python3",
            progress_bar=False,
            cwd=str(ROOT),
        )
    return out


def execute_here(notebook: str, params: dict, formats: tuple[str, ...] | None = None) -> dict:
    """The notebook's code cells run in this process, from the repository root, with the
    parameters set after its parameters cell (where papermill puts them); its namespace after.
    ``formats``: the picture formats ``output.save_figure`` writes (None: the notebook's own)."""
    import matplotlib
    import nbformat

    from ctxpolicy.figures import output

    matplotlib.use("Agg")
    namespace: dict = {}
    with contextlib.chdir(ROOT), matplotlib.rc_context(), pytest.MonkeyPatch.context() as patch:
        matplotlib.rcdefaults()  # what a fresh kernel starts from, whatever earlier tests set
        if formats is not None:
            patch.setattr(output, "save_figure", functools.partial(output.save_figure, formats=formats))
        for cell in nbformat.read(ROOT / notebook, as_version=4).cells:
            if cell.cell_type == "code":
                exec(compile(cell.source, notebook, "exec"), namespace)
                if "parameters" in cell.metadata.get("tags", []):
                    namespace.update(params)
    return namespace


def produced(name: str, out_dir: Path) -> list[Path]:
    return [out_dir / Path(p).name for p in TARGETS[name]["outputs"]]


def execute_here_checked(name: str, out: Path, paper_tables) -> dict:
    """The named target's notebook on the paper-shaped data set in this process, the layout
    check on (outputs in OUT)."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CHECK_LAYOUT, "1")  # save_figure raises on colliding or cut-off texts
        return execute_here(TARGETS[name]["notebook"], paper_parameters(name, out, paper_tables))


# One test per target, each executing its own (no module fixture holding all of them): the
# notebooks spread over the xdist workers instead of queueing on one.
@pytest.mark.parametrize("name", DRAWN)
def test_notebook_writes_its_outputs_and_nothing_else(name, tmp_path, paper_tables):
    import matplotlib.pyplot as plt

    out_dir = tmp_path / "first"
    try:
        if name in PAPERMILL:
            execute_paper(name, out_dir, paper_tables)  # a failing cell raises
            here = run_again_here(name, out_dir, tmp_path / "again", paper_tables) if name in REPEATED else None
        else:
            here = execute_here_checked(name, out_dir, paper_tables)
        check_outputs(name, out_dir)
        if here is not None and here.get("fig") is not None:
            check_figure(name, here, paper_tables)
    finally:
        plt.close("all")


def test_every_notebook_runs_through_papermill():
    assert {TARGETS[n]["notebook"] for n in PAPERMILL} == {TARGETS[n]["notebook"] for n in DRAWN}
    assert PAPERMILL <= set(DRAWN) and set(REPEATED) <= PAPERMILL


def check_outputs(name: str, out_dir: Path) -> None:
    """Every output the catalog names, well formed, and nothing else."""
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


# The same bytes again: the data and notes files and the PDF (its fonts are subset from sets
# and dicts, where another hash seed would show); the PNG is the same drawing rasterised.
AGAIN_FORMATS = ("pdf",)


def run_again_here(name: str, out_dir: Path, again: Path, paper_tables) -> dict:
    """The target run again in this process writes the same bytes (AGAIN_FORMATS for the
    picture); its namespace after."""
    here = execute_here(TARGETS[name]["notebook"], paper_parameters(name, again, paper_tables), formats=AGAIN_FORMATS)
    skipped = {f".{fmt}" for fmt in ("pdf", "png") if fmt not in AGAIN_FORMATS}
    compared = [p for p in produced(name, out_dir) if p.suffix not in skipped]
    assert sorted(p.name for p in again.iterdir()) == sorted(p.name for p in compared)
    for path in compared:
        assert (again / path.name).read_bytes() == path.read_bytes(), f"{path.name} differs"
    return here


def check_figure(name: str, here: dict, paper_tables) -> None:
    """The figure drawn in this process has the synthetic mark, no two legend entries that look
    alike (LEGENDS), no visible panel without data and without a note, (EVERY_PAIR) a pair for
    each pair it was given, (ONE_PAIR) only the pair it was given, and (Figure 5) ranks in (a) on
    the first benchmark shown and differences of both benchmarks in (b)."""
    from ctxpolicy.figures import inputs, notes, style

    fig = here["fig"]
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
    if name in ONE_PAIR:
        table = here["data"].table
        given = inputs.parse_pairs(paper_targets(paper_tables[1])[name]["params"]["pairs"])
        assert len(given) == 1 and set(zip(table["model"], table["benchmark"])) == set(given)
    if name == "fig5":
        data = here["data"]
        assert data.meta["ranks_benchmark"] == "swebench" and set(data.table["benchmark"]) == {"swebench"}
        assert set(data.meta["pairs"]["benchmark"]) == {"swebench", "terminalbench"}
        assert {b for b, _ in data.meta["compared_combos"]} == {"swebench", "terminalbench"}
        assert any("terminal" in ax.get_title(loc="left").lower() for ax in fig.axes)


def execute_edge_set(edge: str, tmp: Path) -> dict[str, dict]:
    """The edge data set written as tables under TMP, and the edge notebooks run on it in this
    process with the layout check on (outputs in TMP/figures): each one's namespace after."""
    runs, calls = edge_cases.EDGE_SETS[edge](*edge_cases.load())
    tables = tmp / "tables"
    tables.mkdir(parents=True)
    runs.to_parquet(tables / "runs.parquet", index=False)
    calls.to_parquet(tables / "calls.parquet", index=False)
    done = {}
    with pytest.MonkeyPatch.context() as env:
        env.setenv(CHECK_LAYOUT, "1")  # save_figure raises on colliding or cut-off texts
        for name in EDGE_NOTEBOOKS:
            done[name] = execute_here(
                TARGETS[name]["notebook"],
                papermill_parameters(
                    name,
                    config_path=str(FIXTURE / "config.yaml"),
                    tables_dir=str(tables),
                    out_dir=str(tmp / "figures"),
                    extra={"n_boot": TEST_BOOT},
                ),
            )
    return done


@pytest.mark.parametrize("edge", list(edge_cases.EDGE_SETS))
def test_edge_notebooks_render_and_say_what_is_missing(edge, tmp_path):
    import matplotlib.pyplot as plt

    try:
        done = execute_edge_set(edge, tmp_path)  # a failing cell raises
        figures = tmp_path / "figures"
        for name in EDGE_NOTEBOOKS:
            for path in produced(name, figures):
                assert path.exists(), f"{name} on {edge} did not write {path.name}"
            assert silent_empty_panels(done[name]["fig"]) == [], (name, edge)
    finally:
        plt.close("all")
    said = {name: json.loads((figures / f"{name}.notes.json").read_text()) for name in EDGE_NOTEBOOKS}
    if edge == "empty":
        assert all(said.values()), said
    if edge == "fc_time_limited":
        for name in ("fig2", "fig3"):
            assert any("finished within the time limit: resource ratios undefined" in n for n in said[name])
