"""The typed study (ctxpolicy.study): cells by id and track, the cells shared between tracks,
the runs behind a number selected by cell id (the same numbers from the whole runs table as
from a scope's table), the two rules (time-limited for resource comparisons, A.5), and no
reader of a config mapping outside the study module."""

from __future__ import annotations

import ast
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ctxpolicy.study.grid import SCOPES  # noqa: E402
from ctxpolicy.study import Pair, load_study  # noqa: E402
from ctxpolicy.testing.studies import study_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BOOT = 20


@pytest.fixture(scope="module")
def paper():
    return load_study(ROOT / "config" / "synthetic-paper.yaml")


# ---------------------------------------------------------------- the study


def test_pairs_are_model_benchmark_in_one_order(paper):
    pairs = paper.pairs("sweeps")
    assert all(isinstance(p, Pair) for p in pairs)
    assert pairs[0] == Pair("synth-a", "swebench") and str(pairs[0]) == "synth-a/swebench"
    assert paper.pairs("sweeps") == paper.pairs("sweep")  # the section key or the track name
    assert paper.thresholds_file(Pair("synth-a", "swebench")) == Path(
        "results/synthetic-paper/thresholds/swebench/synth-a.json"
    )


def test_the_design_names_the_one_cell_behind_each_entry_shared_cells_included(paper):
    pair = Pair("synth-a", "swebench")
    sweep = {(d.policy, d.setting): d.cell for d in paper.design("sweeps", pair)}
    # the sweep's primary D = 0.5 cell is the full comparison's
    shared = sweep[("TR/Th/0.5", "primary")]
    assert shared.track == "full" and shared.cohort == "main"
    assert sweep[("TR/Th/0.5", "tight")].track == "sweep"
    # the summarizer comparison's self-summarizing cell is the sweep's; the others are its own
    summ = {(d.policy, d.summarizer): d.cell for d in paper.design("summarizer", pair)}
    own = [c for (p, s), c in summ.items() if s is None]
    assert own and all(c.track in {"sweep", "full"} for c in own)
    others = [c for (p, s), c in summ.items() if s is not None]
    assert others and all(c.track == "summarizer" for c in others)
    # the FC reference is the calibration cell
    assert paper.reference_cell(pair).track == "calibration"
    assert paper.cell_for("swebench", "synth-a", "TR/Th/0.5", "primary") is shared
    assert paper.cell_by_id(shared.id) is shared


def test_the_grids_configurations_are_each_policy_and_setting_once_whatever_its_models(paper):
    """An imported-only grid (no models): FC first, an untriggered policy once whatever the
    settings that list it, a summarizer entry its (policy, setting) alone, a section's own list
    including what an earlier section claimed; the replay plan groups them by setting."""
    study = study_of(
        {
            "study": "x",
            "imported": {"path": "c", "benchmark": "b", "model": "m"},
            "models": {k: v for k, v in paper.config["models"].items() if k in ("synth-sum-a", "synth-sum-b")},
            "grid": {
                "full_comparison": {"setting": "primary", "policies": ["FC", "TR/Th/0.5", "OTRC/St"]},
                "sweeps": {
                    "settings": ["loose", "tight"],
                    "depths": [0.5],
                    "tunable": ["TR"],
                    "invariant": ["OTRC/St"],
                },
                "summarizer": {
                    "setting": "tight",
                    "policies": ["SU/Th/0.5"],
                    "summarizers": ["synth-sum-a", "synth-sum-b"],
                },
            },
        }
    )
    assert [(c.policy, c.setting, c.section) for c in study.configurations()] == [
        ("FC", None, "calibration"),
        ("TR/Th/0.5", "primary", "full_comparison"),
        ("OTRC/St", None, "full_comparison"),
        ("TR/Th/0.5", "loose", "sweeps"),
        ("TR/Th/0.5", "tight", "sweeps"),
        ("SU/Th/0.5", "tight", "summarizer"),
    ]
    assert [(c.policy, c.setting) for c in study.configurations("sweep")] == [
        ("TR/Th/0.5", "loose"),
        ("OTRC/St", None),
        ("TR/Th/0.5", "tight"),
    ]
    assert study.imported_replay_plan() == {  # settings in SETTINGS order, not the grid's
        "untriggered": ["FC", "OTRC/St"],
        "tight": ["TR/Th/0.5", "SU/Th/0.5"],
        "primary": ["TR/Th/0.5"],
        "loose": ["TR/Th/0.5"],
    }


def test_tasks_and_attempts_come_from_the_study(paper):
    cell = paper.cells_of("sweeps")[0]
    assert paper.attempts == 3 and len(paper.tasks(cell)) == 25
    assert paper.planned_runs(cell) == 75


# ---------------------------------------------------------------- runs by cell id, at scale


@pytest.fixture(scope="module")
def paper_runs(paper_tables):
    from ctxpolicy.figures import inputs

    tables_dir, config_path = paper_tables
    study = inputs.read_study(config_path)
    runs = inputs.read_runs(tables_dir)
    calls = inputs.read_calls(tables_dir)
    return runs, calls, study


def _scope(table: pd.DataFrame, scope: str, runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """A scope's table as ``ctxpolicy aggregate`` writes it: its tracks' runs (calls: those runs')."""
    if runs is not None:
        return table[table["run_dir"].isin(set(_scope(runs, scope)["run_dir"]))].reset_index(drop=True)
    return table[table["track"].astype(str).isin(SCOPES[scope])].reset_index(drop=True)


def test_fig3_all_attempts_table_is_possible_and_the_same_from_the_whole_table(paper_runs):
    from ctxpolicy.figures import sweep

    runs, calls, study = paper_runs
    assert (runs["track"] == "summarizer").any()  # the whole table holds the summarizer comparison
    for pair in (Pair("synth-a", "swebench"), Pair("synth-b", "terminalbench")):
        whole = sweep.compute(runs, study, n_boot=BOOT, seed=0, calls=calls, pairs=[tuple(pair)])
        scoped = sweep.compute(
            _scope(runs, "sweep"), study, n_boot=BOOT, seed=0, calls=_scope(calls, "sweep", runs), pairs=[tuple(pair)]
        )
        summary = whole.extra["summary"]
        assert not summary.empty
        assert summary["resolve_rate"].between(0, 1).all(), summary.loc[summary["resolve_rate"] > 1]
        pd.testing.assert_frame_equal(summary, scoped.extra["summary"])
        pd.testing.assert_frame_equal(whole.extra["frequency"], scoped.extra["frequency"])
        pd.testing.assert_frame_equal(whole.table, scoped.table)
        # a row's runs are one cell's: never more attempts than its tasks x the planned attempts
        n = summary.set_index(["setting", "policy"])["n_tasks"]
        assert (n <= 25).all()


@pytest.mark.parametrize("setting", ["tight", "primary", "loose"])
def test_figures_16_to_18_are_the_same_from_the_whole_table(paper_runs, setting):
    from ctxpolicy.figures import coverage

    runs, _, study = paper_runs
    pairs = [("synth-a", "swebench")]
    whole = coverage.compute_sweep(runs, study, setting=setting, pairs=pairs)
    scoped = coverage.compute_sweep(_scope(runs, "sweep"), study, setting=setting, pairs=pairs)
    assert not whole.table.empty
    pd.testing.assert_frame_equal(whole.table, scoped.table)


def test_figure_19_is_the_same_from_the_whole_table(paper_runs):
    from ctxpolicy.figures import summarizers

    runs, _, study = paper_runs
    whole = summarizers.compute(runs, study, n_boot=BOOT, seed=0)
    scoped = summarizers.compute(_scope(runs, "summarizer"), study, n_boot=BOOT, seed=0)
    assert not whole.table.empty
    pd.testing.assert_frame_equal(whole.table, scoped.table)
    # each row is one cell's runs: the resolve rate is a rate
    assert whole.table["resolve_rate_est"].between(0, 1).all()


# ---------------------------------------------------------------- A.5: one definition of time-limited


def _run(policy: str, task: str, **values) -> dict:
    row = {
        "run_dir": f"runs/{policy}/{task}",
        "benchmark": "terminalbench",
        "model": "m",
        "cohort": "main",
        "track": "full",
        "policy": policy,
        "setting": None if policy == "FC" else "primary",
        "summarizer": None,
        "cell": "FC" if policy == "FC" else "TR_Th_0.5__primary",
        "primitive": policy.split("/")[0],
        "trigger": None if policy == "FC" else "Th",
        "depth": None if policy == "FC" else 0.5,
        "threshold_tokens": None if policy == "FC" else 3000.0,
        "task_id": task,
        "attempt": 1,
        "outcome": "submitted",
        "resolved": False,
        "has_verdict": True,
        "outcome_class": "submitted_unsuccessful",
        "time_limited": False,
        "wall_s": 100.0,
        "agent_calls": 10,
        "summary_calls": 0,
        "n_prompt_counts": 5,
        "prompt_tokens": 1000,
        "total_tokens": 1000,
        "billed_exact": 500.0,
        "billed_est": 500.0,
        "billed_measured": 500.0,
        "retrieval_cmds": 1,
        "execution_cmds": 1,
        "compression_events": 0,
        "compression_freq": 0.0,
    }
    row.update(values)
    return row


def test_a_harness_timeout_with_agent_outcome_submitted_is_out_of_the_ratios_and_in_the_resolve_rate():
    """Hand-worked: FC and TR on two Terminal-Bench tasks. TR's run of t1 was stopped by the
    harness (failure_mode agent_timeout) after its agent recorded ``submitted``, and the verdict
    says resolved. It counts in the resolve rate (TR 1 of 2 = 0.5, FC 0 of 2), and not in the
    token ratio: only t2 counts, TR 500 / FC 1000 = 0.5 (with t1's 100 000 tokens: 2.3)."""
    from ctxpolicy.metrics.compare import compare_to_baseline, resource_eligible
    from ctxpolicy.metrics.outcomes import harness_timed_out, is_time_limited, outcome_class

    verdict = {"resolved": True, "report": {"failure_mode": "agent_timeout"}}
    assert harness_timed_out(verdict) and is_time_limited("submitted", harness_timed_out(verdict))
    assert outcome_class("submitted", True, True) == "success"  # Figure 20 keeps success first
    assert not is_time_limited("submitted") and is_time_limited("time_limit")
    runs = pd.DataFrame(
        [
            _run("FC", "t1", prompt_tokens=1000, total_tokens=1000),
            _run("FC", "t2", prompt_tokens=1000, total_tokens=1000),
            _run(
                "TR/Th/0.5",
                "t1",
                resolved=True,
                outcome_class="success",
                time_limited=True,
                prompt_tokens=100_000,
                total_tokens=100_000,
            ),
            _run("TR/Th/0.5", "t2", prompt_tokens=500, total_tokens=500),
        ]
    )
    assert list(resource_eligible(runs)["task_id"]) == ["t1", "t2", "t2"]
    row = compare_to_baseline(runs, model="m", benchmark="terminalbench", attempts=1, n_boot=50).iloc[0]
    assert row["resolve_rate"] == 0.5 and row["baseline_resolve_rate"] == 0.0 and row["resolve_delta_est"] == 0.5
    assert row["tokens_ratio_est"] == pytest.approx(0.5) and row["tokens_ratio_n_tasks"] == 1


# ---------------------------------------------------------------- no reader supplies a default


# the study's config mapping by the names it travels under (a model's or benchmark's own block,
# ``cfg``/``model_cfg``, handed to its server or adapter, is not the study's mapping)
CONFIG_NAMES = {"config", "CONFIG", "study_config"}


def _config_root(node: ast.AST) -> str | None:
    """The config name an expression reads from: ``config``, ``config["a"]["b"]``,
    ``config.get("a")``, ``(config.get("a") or {})``, ``study.config[...]``, ``load_config(path)``."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            node = node.func.value
        elif isinstance(node, ast.BoolOp):
            node = node.values[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "load_config":
            return "load_config"  # a mapping read in passing: load_config(path).get(...)
        elif isinstance(node, ast.Attribute) and node.attr in CONFIG_NAMES:
            return node.attr
        elif isinstance(node, ast.Name):
            return node.id if node.id in CONFIG_NAMES else None
        else:
            return None


def _sources() -> list[tuple[str, str]]:
    import json

    found = []
    for path in sorted((ROOT / "src" / "ctxpolicy").rglob("*.py")):
        if path.parent == ROOT / "src" / "ctxpolicy" / "study":
            continue  # the one reader of the config mapping (and its command, `ctxpolicy grid`)
        found.append((str(path.relative_to(ROOT)), path.read_text()))
    for path in sorted((ROOT / "workflow").rglob("*.smk")) + sorted((ROOT / "workflow").rglob("*.py")):
        found.append((str(path.relative_to(ROOT)), path.read_text()))
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        found.append((str(path.relative_to(ROOT)), code))
    return found


def _parse(name: str, text: str) -> ast.AST | None:
    if name.endswith(".smk"):  # Snakemake's rule blocks are not Python: keep its functions
        kept, inside = [], False
        for line in text.splitlines():
            if line and not line[0].isspace():
                inside = line.startswith(("def ", "@"))
            if inside or not line.strip():
                kept.append(line)
        text = "\n".join(kept)
    try:
        return ast.parse(text)
    except SyntaxError:
        return None


def test_no_reader_of_a_config_mapping_outside_the_study_calls_get():
    offenders, parsed = [], 0
    for name, text in _sources():
        tree = _parse(name, text)
        if tree is None:
            assert name.endswith(".smk"), f"{name}: not valid Python"
            continue
        parsed += 1
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and _config_root(node.func.value)
            ):
                offenders.append(f"{name}:{node.lineno}")
    assert parsed > 100
    assert offenders == [], f"config.get(...) outside ctxpolicy.study (ask the Study): {offenders}"


def test_the_ast_check_finds_what_it_looks_for():
    tree = ast.parse(
        'a = config.get("x", 1)\nb = (config.get("m") or {}).get("c")\nc = plan.study.config["y"].get("z")\n'
        'd = (load_config(path).get("metrics") or {}).get("price")'
    )
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "get"]
    assert calls and all(_config_root(n.func.value) for n in calls)
    assert _config_root(ast.parse("spec.get('x')").body[0].value.func.value) is None


def test_compare_with_the_config_compares_the_designs_cells_by_id(paper_tables, paper_runs):
    from types import SimpleNamespace

    from ctxpolicy.metrics.cli_compare import compare

    tables_dir, config_path = paper_tables
    runs, _, study = paper_runs
    args = SimpleNamespace(
        runs=Path(tables_dir) / "runs.parquet",
        config=config_path,
        benchmark="swebench",
        model="synth-a",
        track="sweep",
        setting=None,
        baseline="FC",
        attempts=None,
        resamples=BOOT,
        seed=0,
        cost_method=None,
        replay=None,
    )
    table, attempts = compare(args)
    pair = Pair("synth-a", "swebench")
    wanted = {c.slug for c in study.design_cells("sweeps", pair, reference=False)}
    assert attempts == study.attempts and args.cost_method == study.cost_method
    assert set(table["cell"]) == wanted  # the shared full-comparison cells in, no summarizer cell
    assert table["summarizer"].isna().all() and (table["resolve_rate"] <= 1).all()


def test_the_paper_shaped_data_holds_the_studys_edge_shapes(paper_runs):
    from ctxpolicy.testing.paper import unsolvable

    runs, _, _ = paper_runs
    tb = runs[runs["benchmark"] == "terminalbench"]
    harness = tb[(tb["outcome"] == "submitted") & tb["time_limited"].astype(bool)]
    assert len(harness) and (harness["outcome_class"].isin(["success", "time_limited"])).all()
    assert (runs["outcome"] == "time_limit").any()  # the agent's own clock too
    assert (runs["track"] == "summarizer").any() and runs["summarizer"].notna().any()
    assert (~runs["has_verdict"].astype(bool)).any()  # ungraded runs
    never = runs.groupby("task_id")["resolved"].sum()
    hard = [t for t in never.index if unsolvable(str(t))]
    assert hard and (never[hard] == 0).all()


def test_fig4_terminal_bench_variant_keeps_its_rows_with_a_dozen_long_task_names(paper_runs):
    import matplotlib.pyplot as plt

    from ctxpolicy.figures import coverage, layout

    runs, _, study = paper_runs
    pair = ("synth-b", "terminalbench")
    own = runs[(runs["model"] == pair[0]) & (runs["benchmark"] == pair[1])]
    tasks = sorted(own["task_id"].astype(str).unique())[:6]
    own = own[own["task_id"].astype(str).isin(tasks)]
    long_names = {t: f"configure-reverse-proxy-with-tls-termination-{i:02d}" for i, t in enumerate(tasks)}
    twelve = pd.concat(
        [
            own.assign(task_id=own["task_id"].astype(str).map(long_names)),
            own.assign(task_id=own["task_id"].astype(str).map(lambda t: long_names[t] + "-and-caching")),
        ],
        ignore_index=True,
    )
    fig = coverage.plot(coverage.compute(twelve, study, pairs=[pair]), name="fig4-synth-b-terminalbench")
    try:
        layout.check(fig, name="fig4-synth-b-terminalbench")
        ax = fig.axes[0]
        n_rows = len(ax.get_yticklabels())
        row_in = ax.get_position().height * fig.get_figheight() / n_rows
        assert row_in >= 0.8 * coverage.ROW_IN, f"rows squashed to {row_in:.3f} in"
    finally:
        plt.close(fig)
