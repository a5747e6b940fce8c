"""The shared figure style, the deterministic writers, the tables and the catalog."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ctxpolicy.figures import catalog, inputs, notes, output, style, tables  # noqa: E402
from ctxpolicy.testing.studies import study_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests/fixtures/figures"
REQUIRED = [
    "fig2",
    "fig3",
    "fig4",
    "fig5",
    "fig6",
    *[f"fig{n}" for n in range(9, 22)],
    "reacquisition",
    "retention",
    "cost_sensitivity",
    "cost_decomposition",
    "cost_methods",
    "imported_replay",  # a config's imported corpus (workflow/rules/imported.smk)
    "imported_sweep",
    "imported_cost_sensitivity",
    "quoted_calls",  # the numbers the study's observations quote (metrics.quoted)
    "quoted_summary_share",
    "quoted_shared_tokens",
    "quoted_compressions",
    "peak_context",
    "table1_4",
    "table2",
    "table3",
    "table5",
    "table6",
]


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the fixture config names its files relative to the repository root


@pytest.fixture
def config(in_root):
    from ctxpolicy.study.config import load_config

    return load_config("tests/fixtures/figures/config.yaml")  # a mapping the tests change


# ---------------------------------------------------------------- style


def test_policy_order_puts_fc_first_then_primitive_trigger_depth():
    specs = ["SU/Th/0.5", "TR/Th/0.7", "FC", "TR/Th/0.3", "OTRC/St", "TRC/Th", "TR/Th/0.3"]
    assert style.order_policies(specs) == ["FC", "TR/Th/0.3", "TR/Th/0.7", "TRC/Th", "OTRC/St", "SU/Th/0.5"]


def test_every_known_primitive_has_its_own_colour():
    colours = [style.policy_color(p) for p in style.PRIMITIVE_ORDER]
    assert len(set(colours)) == len(colours)


def test_colour_depends_on_primitive_only_and_is_stable_for_unknown_strings():
    assert style.policy_color("TR/Th/0.3") == style.policy_color("TR/Th/0.7")
    assert style.policy_color("XY/Th/0.5") == style.policy_color("XY/Th/0.5")
    assert style.policy_color("XY/Th/0.5") in {e.color for e in style.SPARE_ENCODINGS}


def test_label_shows_non_primary_settings():
    assert style.policy_label("TR/Th/0.5", "tight") == "TR/Th/0.5 (tight)"
    assert style.policy_label("TR/Th/0.5", "primary") == "TR/Th/0.5"
    assert style.policy_label("FC", "tight") == "FC"


# ---------------------------------------------------------------- writers


def _figure():
    style.apply()
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.errorbar([1, 2], [1, 3], yerr=[[0.2, 0.1], [0.3, 0.4]], fmt="o", label="TR/Th/0.5")
    ax.set_title("Δ resolve (pp)")
    ax.legend()
    return fig


def test_figure_bytes_are_identical_across_renders_and_carry_no_date():
    first = {fmt: output.figure_bytes(_figure(), fmt) for fmt in ("pdf", "png", "svg")}
    second = {fmt: output.figure_bytes(_figure(), fmt) for fmt in ("pdf", "png", "svg")}
    assert first == second
    assert b"CreationDate" not in first["pdf"]
    assert b"Matplotlib" not in first["pdf"]
    assert b"Software" not in first["png"]
    plt.close("all")


def test_save_figure_writes_picture_numbers_and_notes_atomically(tmp_path):
    numbers = pd.DataFrame({"policy": ["TR/Th/0.5"], "cost_ratio_est": [0.1 + 0.2]})
    paths = output.save_figure(_figure(), tmp_path / "out", "figX", numbers)
    names = ["figX.pdf", "figX.png", "figX.data.csv", "figX.notes.json"]
    assert [p.name for p in paths] == names
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(names)
    back = pd.read_csv(tmp_path / "out/figX.data.csv")
    assert back["cost_ratio_est"].iloc[0] == 0.1 + 0.2  # full precision: the numbers round-trip
    assert json.loads((tmp_path / "out/figX.notes.json").read_text()) == []
    plt.close("all")


def test_notes_drawn_on_a_figure_are_written_to_notes_json(tmp_path):
    fig, (a, b) = plt.subplots(1, 2)
    a.plot([1, 2], [3, 4])
    notes.finish(fig, ["no FC run for m on b finished within the time limit: resource ratios undefined."])
    output.save_figure(fig, tmp_path, "figY")
    said = json.loads((tmp_path / "figY.notes.json").read_text())
    assert said[0].startswith("no FC run for m on b finished within the time limit")
    assert notes.has_note(b) and not notes.has_note(a)  # the empty panel got a note, the drawn one not
    assert "note" in pd.read_csv(tmp_path / "figY.data.csv").columns  # no numbers: the note instead
    plt.close("all")


def test_reference_lines_and_nan_points_are_not_plotted_data():
    fig, ax = plt.subplots()
    ax.axhline(1.0)
    ax.axhspan(1.0, 2.0)
    ax.plot([0, 1], [0, 1], gid=notes.REFERENCE)
    ax.errorbar([float("nan")], [float("nan")], yerr=[[0.0], [0.0]], fmt="o")
    ax.bar([0], [float("nan")])
    assert not notes.has_plotted_data(ax)
    ax.bar([1], [2.0])
    assert notes.has_plotted_data(ax)
    plt.close("all")


def test_save_table_writes_csv_markdown_and_latex(tmp_path):
    table = pd.DataFrame({"policy": ["TR/Th/0.5", "FC"], "ratio": [0.8125, 1.0], "mark": ["●", "○"], "n": [3, 12]})
    output.save_table(table, tmp_path, "tableX", caption="A & B", note="5% missing")
    csv = (tmp_path / "tableX.csv").read_text()
    assert csv.splitlines() == ["policy,ratio,mark,n", "TR/Th/0.5,0.8125,●,3", "FC,1,○,12"]
    md = (tmp_path / "tableX.md").read_text()
    assert "| TR/Th/0.5 " in md and "0.812" in md and "_5% missing_" in md
    tex = (tmp_path / "tableX.tex").read_text()
    assert r"\caption{A \& B}" in tex and r"$\bullet$" in tex and r"5\% missing" in tex
    assert r"\toprule" in tex and r"\label{tab:tableX}" in tex


def test_empty_table_keeps_its_note_in_the_csv(tmp_path):
    output.save_table(pd.DataFrame(columns=["a"]), tmp_path, "t", note="no thresholds yet")
    assert "no thresholds yet" in (tmp_path / "t.csv").read_text()


def test_note_figure_says_what_is_missing():
    fig = notes.note_figure("Figure 19", "the config has no summarizer comparison")
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("summarizer comparison" in t for t in texts)
    plt.close("all")


# ---------------------------------------------------------------- tables


def test_table1_marks_full_comparison_filled_and_sweep_only_open(config):
    t1 = tables.table1(tables.grid_cells(study_of(config))).set_index("policy")
    assert t1.loc["TR/Th/0.3", "tight"] == tables.OPEN
    assert t1.loc["TR/Th/0.5", "primary"] == tables.FILLED
    assert t1.loc["SU/Th/0.5", "summarizers"] == "tiny"
    assert t1.loc["OTRC/St", "no threshold"] == tables.FILLED
    assert t1.loc["FC", "models"] == "qwen05b, tiny"


def test_table4_counts_tasks_and_runs_from_the_cohort_files(config):
    t4, note = tables.table4(tables.grid_cells(study_of(config)), study_of(config))
    assert note is None
    sweep = t4[t4["track"] == tables.TRACK_LABELS["sweep"]].iloc[0]
    assert sweep["tasks"] == 8 and sweep["runs"] == 8 * sweep["cells"]


def test_table3_counts_tasks_per_cohort_and_stratum(config):
    t3, note = tables.table3(study_of(config), inputs.read_runs("tests/fixtures/figures/tables"))
    assert note is None
    rows = t3.set_index(["benchmark", "cohort", "stratum"])["tasks"]
    assert rows[("local", "main", "all")] == 12 and rows[("local", "sweep", "all")] == 8
    assert rows[("term", "main", "stratum-0")] == 4


def test_table3_counts_only_the_tasks_cohort_limit_lets_the_study_run(config):
    config["benchmarks"]["local"]["cohort_limit"] = {"main": 5, "sweep": 50}  # 50 > the file's 8
    t3, note = tables.table3(study_of(config), inputs.read_runs("tests/fixtures/figures/tables"))
    rows = t3.set_index(["benchmark", "cohort", "stratum"])["tasks"]
    assert rows[("local", "main", "all")] == 5
    assert rows[[k for k in rows.index if k[:2] == ("local", "main") and k[2] != "all"]].sum() == 5
    assert rows[("local", "sweep", "all")] == 8 and rows[("term", "main", "all")] == 12
    assert note.startswith("cohort_limit:") and "local/main 5 of 12" in note and "sweep" not in note


def test_default_stratum_without_runs():
    assert tables.default_stratum("tinyweb-003") == "tinyweb"
    assert tables.default_stratum("astropy__astropy-12907") == "astropy/astropy"
    assert tables.default_stratum("hello-world") == "other"


def test_table3_never_meets_a_missing_cohort_file(config):
    """The study's checks refuse a config whose cohort file is missing (naming it), so no table is
    drawn from a study without its task lists."""
    from ctxpolicy.study.config import ConfigError

    config["benchmarks"]["local"]["cohorts"]["main"] = "tests/fixtures/figures/nowhere.txt"
    with pytest.raises(ConfigError, match="nowhere.txt"):
        tables.table3(study_of(config))


def test_table5_reads_versions_and_settings_from_run_records(in_root):
    runs = inputs.read_runs("tests/fixtures/figures/tables")
    t5, note = tables.table5(runs)
    fields = set(t5["field"])
    assert {"settings.temperature", "settings.step_limit", "versions.ctxpolicy"} <= fields
    assert note is None  # the fixture keeps the first run.json of every cell
    values = t5.set_index(["model", "field"])["value"]
    assert values[("qwen05b", "settings.max_tokens")] == "512"


def test_table5_notes_cells_without_records(in_root):
    runs = inputs.read_runs("tests/fixtures/figures/tables")
    runs = runs.assign(run_dir=runs["run_dir"].str.replace("/runs/term/", "/gone/term/"))
    _, note = tables.table5(runs)
    assert note.startswith("cells without a readable run.json: term/qwen05b/")


def test_table6_marks_presets_and_notes_missing_files(config):
    t6, note = tables.table6(study_of(config))
    rows = t6.set_index(["benchmark", "model"])
    assert rows.loc[("local", "qwen05b"), "source"] == "calibrated"
    assert rows.loc[("term", "tiny"), "source"] == "preset*"
    assert rows.loc[("term", "tiny"), "primary"] == 2400
    assert "preset" in note
    config["results_dir"] = "tests/fixtures/figures/nowhere"
    t6, note = tables.table6(study_of(config))
    assert "no thresholds file yet" in note and len(t6) == 2


# ---------------------------------------------------------------- catalog


def test_catalog_covers_every_figure_and_table_of_the_study():
    assert sorted(catalog.TARGETS) == sorted(REQUIRED)


def test_catalog_outputs_are_unique_and_under_figures():
    outputs = [p for spec in catalog.TARGETS.values() for p in spec["outputs"]]
    assert len(outputs) == len(set(outputs))
    assert all(p.startswith("figures/") for p in outputs)
    for name, spec in catalog.TARGETS.items():
        suffixes = {"".join(Path(p).suffixes) for p in spec["outputs"]}
        assert suffixes in ({".pdf", ".png", ".data.csv", ".notes.json"}, {".csv", ".md", ".tex"}), name


@pytest.mark.parametrize("name", sorted(catalog.TARGETS))
def test_every_notebook_has_the_parameters_the_catalog_passes(name):
    spec = catalog.TARGETS[name]
    book = nbformat.read(ROOT / spec["notebook"], as_version=4)
    tagged = [c for c in book.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "one cell tagged 'parameters'"
    namespace: dict = {}
    exec(tagged[0].source, namespace)  # the parameters cell is plain assignments
    for key in ("tables_dir", "config_path", "out_dir", "n_boot", "seed", *spec["params"]):
        assert key in namespace, f"{spec['notebook']}: no parameter {key}"


def test_every_target_declares_a_scope_the_workflow_knows():
    from ctxpolicy.study.grid import SCOPES

    assert {spec["scope"] for spec in catalog.TARGETS.values()} <= set(SCOPES)
    assert catalog.TARGETS["fig12"]["scope"] == "sweep" and catalog.TARGETS["fig19"]["scope"] == "summarizer"


def test_targets_for_resolves_inputs_from_the_config(config):
    resolved = catalog.targets_for(study_of(config))
    results = "tests/fixtures/figures/results"
    assert resolved["table3"]["inputs"] == [
        f"{results}/tables/full/runs.parquet",
        "tests/fixtures/figures/cohorts/local_main.txt",
        "tests/fixtures/figures/cohorts/local_sweep.txt",
        "tests/fixtures/figures/cohorts/term_main.txt",
        "tests/fixtures/figures/cohorts/term_sweep.txt",
    ]
    assert f"{results}/thresholds/term/tiny.json" in resolved["table6"]["inputs"]
    assert resolved["fig6"]["inputs"] == [f"{results}/tables/full/runs.parquet", f"{results}/tables/full/calls.parquet"]
    assert resolved["fig3"]["tables_dir"] == f"{results}/tables/sweep"  # the scope's own tables
    assert resolved["table5"]["inputs"] == [f"{results}/tables/runs.parquet"]  # scope all: every cell
    assert resolved["fig2"]["executed"] == f"{results}/notebooks/fig2.ipynb"
    assert resolved["fig2"]["outputs"] == catalog.TARGETS["fig2"]["outputs"]  # figures_dir: figures
    assert catalog.TARGETS["table3"]["inputs"] == ["results/tables/full/runs.parquet"]  # static one unchanged


def test_papermill_args_pass_the_target_parameters():
    args = catalog.papermill_args("fig17", config_path="config/config.yaml")
    assert args[:2] == ["notebooks/fig16_18.ipynb", "results/notebooks/fig17.ipynb"]
    pairs = dict(zip(args[3::3], args[4::3]))
    assert pairs == {
        "tables_dir": "results/tables",
        "config_path": "config/config.yaml",
        "out_dir": "figures",
        "setting": "primary",
        "name": "fig17",
    }


def test_numbers_flatten_lists_in_plain_and_categorical_columns():
    """The local study's tables hold categorical columns (fig6's phases); lists become ';'-text."""
    from ctxpolicy.figures.prepared import Prepared

    # one category: pandas maps it one-to-one and keeps the result categorical
    table = pd.DataFrame({"policy": pd.Categorical(["FC", "FC"]), "tasks": [["a", "b"], []], "n": [1, 2]})
    numbers = Prepared(table).numbers()
    assert numbers["tasks"].tolist() == ["a;b", ""]
    assert numbers["policy"].astype(str).tolist() == ["FC", "FC"] and numbers["n"].tolist() == [1, 2]
    assert Prepared(table[["policy", "n"]]).numbers().equals(table[["policy", "n"]])
