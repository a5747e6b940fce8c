"""The imported-corpus path of the workflow (config `imported`, workflow/rules/imported.smk): an
imported-only config validates, resolves to the imported figures alone, and Snakemake imports,
calibrates, replays every configuration of the grid over the tests' small corpus and draws it
with provenance back to its files; a dry run of config/paper.yaml's grid plans all 65."""

from __future__ import annotations

import importlib.util
import json
import re

import pandas as pd
import pytest
import yaml

from ctxpolicy.study.config import ConfigError, validate_config
from ctxpolicy.figures.catalog import targets_for
from ctxpolicy.figures.output import CHECK_LAYOUT
from ctxpolicy.rundir import read_calls, read_record
from ctxpolicy.study import load_study
from ctxpolicy.testing.trajectories import write_corpus
from ctxpolicy.testing.studies import study_of
from independent.test_ranges import check_ranges
from workflow_helpers import ROOT, snakemake

EXAMPLE = ROOT / "config" / "imported-example.yaml"
IMPORTED_FIGURES = ["imported_replay", "imported_sweep", "imported_cost_sensitivity"]


def test_the_example_is_an_imported_only_study_with_the_three_imported_figures():
    study = load_study(EXAMPLE)
    assert not study.has_study and study.imported["format"] == "auto"
    targets = targets_for(study)
    assert list(targets) == IMPORTED_FIGURES
    for target in targets.values():
        assert target["inputs"] == ["results/imported-example/tables/imported/replay/runs.parquet"]


def test_the_example_replays_every_configuration_of_its_grid_once():
    plan = load_study(EXAMPLE).imported_replay_plan()
    assert plan == {
        "untriggered": ["FC", "OTRC/St"],
        "tight": ["TR/Th/0.3", "TR/Th/0.5", "TRC/Th"],
        "primary": ["TR/Th/0.5"],
        "loose": ["TR/Th/0.3", "TR/Th/0.5", "TRC/Th"],
    }


def test_a_study_config_has_no_imported_figure():
    assert "imported_replay" not in targets_for(load_study(ROOT / "config" / "config.yaml"))


def test_a_grid_without_sweeps_draws_a_note_in_the_sweep_figure():
    import matplotlib

    matplotlib.use("Agg")
    from ctxpolicy.figures import imported_sweep

    config = {"study": "x", "imported": {"path": "c", "benchmark": "b", "model": "m"}}
    config["grid"] = {"full_comparison": {"policies": ["FC", "TR/Th/0.5"]}}
    replays = pd.DataFrame({"benchmark": ["b"], "model": ["m"], "policy": ["FC"], "setting": [None], "task_id": ["t"]})
    data = imported_sweep.compute(replays, study_of(config), n_boot=10, seed=0)
    assert data.table.empty and any("no sweep" in n for n in data.notes)
    assert imported_sweep.plot(data) is not None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"study": "x"}, "missing required key 'models'"),
        ({"study": "x", "models": {}, "benchmarks": {}, "grid": {}}, "must not be empty"),
        ({"study": "x", "imported": {"path": "c", "benchmark": "b"}}, "imported: missing required key 'model'"),
        ({"study": "x", "imported": {"path": "c", "benchmark": "b", "model": "m", "format": "x"}}, "imported.format"),
    ],
)
def test_a_config_without_a_study_needs_an_imported_corpus(data, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(data)


@pytest.fixture(scope="module")
def imported_workflow(tmp_path_factory):
    """config/imported-example.yaml as it is, its corpus written where it says (relative to -d),
    every figure saved with the layout check on (no colliding or cut-off text)."""
    workdir = tmp_path_factory.mktemp("imported")
    sources = write_corpus(workdir / yaml.safe_load(EXAMPLE.read_text())["imported"]["path"])
    done = snakemake(workdir, EXAMPLE, "--cores", "2", timeout=240, env={CHECK_LAYOUT: "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return workdir, sources


def test_the_imported_corpus_is_replayed_and_drawn(imported_workflow):
    workdir, sources = imported_workflow
    figures = workdir / "figures" / "imported-example"
    for stem in IMPORTED_FIGURES:
        for suffix in (".pdf", ".png", ".data.csv", ".notes.json"):
            assert (figures / f"{stem}{suffix}").stat().st_size > 0
    numbers = pd.read_csv(figures / "imported_replay.data.csv")
    assert set(numbers["policy"]) == {"TR/Th/0.5", "OTRC/St"}
    assert (numbers["n_tasks"] == len(sources) + 1).all()  # the chat log holds two conversations
    tr = numbers.set_index("policy").loc["TR/Th/0.5"]
    assert tr["tokens_ratio_est"] < 1.0 and tr["tokens_ratio_lo"] <= tr["tokens_ratio_est"] <= tr["tokens_ratio_hi"]
    thresholds = json.loads((workdir / "results" / "imported-example" / "imported" / "thresholds.json").read_text())
    assert thresholds["counts"] == "mixed" and thresholds["runs_by_counts"]["local"] >= 1


def test_every_sweep_configuration_is_drawn_with_possible_numbers(imported_workflow):
    workdir, sources = imported_workflow
    figures = workdir / "figures" / "imported-example"
    sweep = pd.read_csv(figures / "imported_sweep.data.csv")
    assert sorted(zip(sweep["policy"], sweep["setting"])) == sorted(
        (p, s) for s in ("tight", "loose") for p in ("TR/Th/0.3", "TR/Th/0.5", "TRC/Th")
    )
    for stem in IMPORTED_FIGURES:
        assert check_ranges(stem, pd.read_csv(figures / f"{stem}.data.csv"), len(sources) + 1) > 0
    tokens = sweep.set_index(["policy", "setting"])["tokens_ratio_est"]
    # the settings are replayed apart: the tight threshold cuts, the loose one (above most of the
    # corpus's peaks) less; the deeper cut sends fewer tokens; no truncation sends more than FC
    assert tokens[("TR/Th/0.5", "tight")] < tokens[("TR/Th/0.5", "loose")]
    assert tokens[("TR/Th/0.5", "tight")] <= tokens[("TR/Th/0.3", "tight")] < 1.0
    assert (sweep["tokens_ratio_est"] <= 1.0).all()


def test_a_sweep_ratio_recomputed_from_the_replay_records(imported_workflow):
    """TR/Th/0.3 at the tight threshold, tokens: the sum over tasks of each replayed run's prompt
    and completion tokens (its calls.jsonl), over the same sum for the FC replay."""
    workdir, _ = imported_workflow
    replay = workdir / "results" / "imported-example" / "imported" / "replay"

    def tokens_by_task(cell: str) -> dict[str, int]:
        out = {}
        for run in replay.glob(f"*/*/*/{cell}/*__a1"):
            calls = read_calls(run)
            out[read_record(run / "run.json")["identity"]["task_id"]] = sum(
                (c["prompt_tokens"] or 0) + (c["completion_tokens"] or 0) for c in calls
            )
        return out

    fc, tr = tokens_by_task("FC"), tokens_by_task("TR_Th_0.3__tight")
    assert fc and set(tr) == set(fc)
    by_hand = sum(tr.values()) / sum(fc.values())
    sweep = pd.read_csv(workdir / "figures" / "imported-example" / "imported_sweep.data.csv")
    drawn = sweep.set_index(["policy", "setting"]).loc[("TR/Th/0.3", "tight"), "tokens_ratio_est"]
    assert drawn == pytest.approx(by_hand, rel=1e-9)
    identity = read_record(next(replay.glob("*/*/*/TR_Th_0.3__tight/*/run.json")))["identity"]
    assert (identity["policy"], identity["threshold_setting"]) == ("TR/Th/0.3", "tight")


def test_every_imported_ratio_recounted_from_the_replay_records(imported_workflow):
    """Both imported figures, every ratio, counted a second time from the replay records
    (tests/independent/records.py) on Figure 2's rules: runs not time-limited with at least two
    prompt counts, per task the mean, a task on both sides or on neither, agent calls only, cost
    by the config's method; the policy's mean over the tasks / FC's."""
    from independent.records import read_runs

    workdir, _ = imported_workflow
    runs = read_runs(workdir / "results" / "imported-example" / "imported" / "replay")
    method = load_study(EXAMPLE).cost_method
    values = {
        "tokens": lambda r: r.tokens,
        "calls": lambda r: r.agent_calls,
        "cost": lambda r: getattr(r, f"billed_{method}"),
    }

    def means(policy, setting, value):
        per: dict[str, list[float]] = {}
        for r in runs:
            if r.policy == policy and (setting is None or r.setting == setting) and not r.time_limited:
                v = value(r)
                if r.prompt_counts >= 2 and v is not None and v == v:
                    per.setdefault(r.task, []).append(float(v))
        return {t: sum(v) / len(v) for t, v in per.items()}

    checked = 0
    for stem in ("imported_replay", "imported_sweep"):
        table = pd.read_csv(workdir / "figures" / "imported-example" / f"{stem}.data.csv")
        for row in table.to_dict("records"):
            setting = row["setting"] if row["setting"] == row["setting"] else None
            for resource, value in values.items():
                if f"{resource}_ratio_est" not in row:
                    continue
                mine, fc = means(row["policy"], setting, value), means("FC", None, value)
                shared = sorted(set(mine) & set(fc))
                want = sum(mine[t] for t in shared) / sum(fc[t] for t in shared)
                assert row[f"{resource}_ratio_est"] == pytest.approx(want, rel=1e-9), (stem, row["policy"], resource)
                assert row[f"{resource}_ratio_n_tasks"] == len(shared)
                checked += 1
    assert checked >= 10


def test_the_cost_sensitivity_of_the_corpus_is_imported_replay_s_by_cache(imported_workflow):
    """imported_cost_sensitivity's exact and measured-profile ratios equal imported_replay's by-cache
    ratios for the same policies (two computations: metrics.sensitivity and imported_replay's
    ratio_rows), and its exact and estimated ratios are recounted from the replay records
    (tests/independent/records.py) on Figure 2's rules."""
    from independent.records import read_runs

    workdir, sources = imported_workflow
    figures = workdir / "figures" / "imported-example"
    sensitivity = pd.read_csv(figures / "imported_cost_sensitivity.data.csv").set_index("policy")
    replay = pd.read_csv(figures / "imported_replay.data.csv").set_index("policy")
    assert set(sensitivity.index) == set(replay.index) == {"TR/Th/0.5", "OTRC/St"}
    for policy in replay.index:
        for model, drawn in (("exact", "cost_exact"), ("measured-profile", "cost_profile")):
            mine, theirs = sensitivity.loc[policy], replay.loc[policy]
            assert mine[f"cost_ratio_{model}_est"] == pytest.approx(theirs[f"{drawn}_ratio_est"], rel=1e-12)
            assert mine[f"cost_ratio_{model}_n_tasks"] == theirs[f"{drawn}_ratio_n_tasks"] > 1
    assert sensitivity["cost_ratio_measured_est"].isna().all()  # a replay sends nothing to a server

    runs = read_runs(workdir / "results" / "imported-example" / "imported" / "replay")
    setting = load_study(EXAMPLE).section("full_comparison")["setting"]

    def mean_by_task(policy: str, billed: str) -> dict[str, float]:
        per: dict[str, list[float]] = {}
        for r in runs:
            value = getattr(r, billed)
            if r.policy == policy and r.setting in (None, setting) and not r.time_limited and r.prompt_counts >= 2:
                if value is not None and value == value:
                    per.setdefault(r.task, []).append(float(value))
        return {t: sum(v) / len(v) for t, v in per.items()}

    for policy in sensitivity.index:
        for model, billed in (("exact", "billed_exact"), ("estimated", "billed_estimated")):
            mine, fc = mean_by_task(policy, billed), mean_by_task("FC", billed)
            shared = sorted(set(mine) & set(fc))
            want = sum(mine[t] for t in shared) / sum(fc[t] for t in shared)
            assert sensitivity.loc[policy, f"cost_ratio_{model}_est"] == pytest.approx(want, rel=1e-9), (policy, model)
            assert sensitivity.loc[policy, f"cost_ratio_{model}_n_tasks"] == len(shared)


def test_the_paper_grid_has_65_configurations_and_the_benchmark_replays_them():
    spec = importlib.util.spec_from_file_location("bench_replay", ROOT / "benchmarks" / "bench_replay.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    study = load_study(ROOT / "config" / "paper.yaml")
    every = study.configurations()
    assert len(every) == 65 and len(set(every)) == 65 and every[0] == ("FC", None, "calibration")
    plan = study.imported_replay_plan()
    assert {g: len(p) for g, p in plan.items()} == {"untriggered": 2, "tight": 21, "primary": 21, "loose": 21}
    assert sorted(bench.configurations(str(ROOT / "config" / "paper.yaml"))) == sorted(
        (c.policy, c.setting) for c in every
    )


def test_a_paper_grid_over_an_imported_corpus_plans_all_65_configurations(tmp_path):
    """config/paper.yaml's grid (its policies and settings; no models to run, so no summarizer
    names: the summarizer comparison's entries are full-comparison configurations without one)
    over a corpus: the dry run plans one replay job per part of the corpus (`--shard K/N`, one per
    4 trajectory files, at most 8), each replaying all 65 configurations once, the triggered ones at
    their setting (POLICY@SETTING)."""
    paper = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    grid = {
        section: {k: v for k, v in block.items() if k not in ("models", "benchmarks", "cohort", "summarizers")}
        for section, block in paper["grid"].items()
    }
    config = {
        "study": "imported-paper",
        "results_dir": "results/p",
        "figures_dir": "figures/p",
        "imported": {"path": "corpus", "benchmark": "swebench", "model": "frontier"},
        "grid": grid,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    sources = write_corpus(tmp_path / "corpus")
    done = snakemake(tmp_path, path, "-n", "-p", "--cores", "1", timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    commands = [line for line in done.stdout.splitlines() if " replay --runs " in line]
    shards = -(-len(sources) // 4)  # one job per 4 trajectory files
    assert sorted(re.search(r"--shard (\d+/\d+) ", line).group(1) for line in commands) == sorted(
        f"{k}/{shards}" for k in range(1, shards + 1)
    )
    wanted = [
        policy if setting == "untriggered" else f"{policy}@{setting}"
        for setting, policies in load_study(ROOT / "config" / "paper.yaml").imported_replay_plan().items()
        for policy in policies
    ]
    for line in commands:
        assert re.search(rf"--out \S*/imported/replay/\d+-of-{shards}\)", line)
        policies = re.search(r"--policies (.*?) --thresholds", line).group(1).replace("'", "").split()
        assert policies == wanted
    assert len(wanted) == len(set(wanted)) == 65 and wanted[:2] == ["FC", "OTRC/St"]
    assert {p.partition("@")[2] for p in wanted[2:]} == {"tight", "primary", "loose"}


def test_the_figure_and_the_tables_point_back_to_the_source_files(imported_workflow):
    workdir, sources = imported_workflow
    sidecars = [
        workdir / "figures" / "imported-example" / "imported_replay.pdf.prov.json",
        workdir / "results" / "imported-example" / "tables" / "imported" / "replay" / "runs.parquet.prov.json",
        workdir / "results" / "imported-example" / "imported" / "thresholds.json.prov.json",
    ]
    for sidecar in sidecars:
        inputs = json.loads(sidecar.read_text())["inputs"]
        named = {(sidecar.parent / i["path"]).resolve(): i["sha256"] for i in inputs}
        for source in sources.values():
            assert source.resolve() in named, f"{sidecar} does not name {source}"
    run = next((workdir / "results" / "imported-example" / "imported" / "runs").rglob("run.json"))
    imported = json.loads(run.read_text())["imported"]
    assert (workdir / "results" / "imported-example" / "imported" / "runs" / imported["source_file"]).resolve() in {
        s.resolve() for s in sources.values()
    }


def test_the_corpus_benchmark_is_shaped_like_a_submission_over_the_paper_grid(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_corpus", ROOT / "benchmarks" / "bench_corpus.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    calls = [c for c, _ in bench.corpus_plan(500, seed=0)]
    assert len(calls) == 500 and max(calls) == 145 and 30 <= sorted(calls)[250] <= 42 and min(calls) >= 6
    shape = bench.write_corpus(tmp_path / "corpus", 2, seed=0, workers=1)
    assert [c for c, _ in shape] == [c for c, _ in bench.corpus_plan(2, seed=0)]
    assert all(peak > 1000 for _, peak in shape)
    config = bench.study_config(tmp_path, tmp_path / "corpus")
    study = load_study(config)
    paper = load_study(ROOT / "config" / "paper.yaml")
    assert not study.has_study and len(study.configurations()) == 65
    assert {(c.policy, c.setting) for c in study.configurations()} == {
        (c.policy, c.setting) for c in paper.configurations()
    }
