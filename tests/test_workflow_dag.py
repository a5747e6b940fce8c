"""The DAG as Snakemake plans it: jobs per cell, one figure needs only its own cells, a bad config
stops with one clear line, and an imported results bundle leaves no run to do."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml

from ctxpolicy.study.config import load_config
from ctxpolicy.study.grid import expand_grid
from workflow_helpers import planned_jobs, planned_priorities, snakemake, write_study

MAIN = ["hello-world", "tinyweb-001", "tinylearn-001"]
SWEEP = ["hello-world", "tinyweb-001"]


@pytest.fixture
def study(tmp_path):
    return tmp_path, write_study(tmp_path, "config.yaml", {"main": MAIN, "sweep": SWEEP})


@pytest.fixture(scope="module")
def default_plan(tmp_path_factory) -> tuple:
    """(config, the finished dry run) of the default target, planned once for the tests that read
    it (each Snakemake start costs seconds)."""
    workdir = tmp_path_factory.mktemp("default-plan")
    config = write_study(workdir, "config.yaml", {"main": MAIN, "sweep": SWEEP})
    done = snakemake(workdir, config, "--dry-run")
    assert done.returncode == 0, done.stderr[-3000:]
    return config, done


def dry_run(workdir, config, *targets):
    done = snakemake(workdir, config, *targets, "--dry-run")
    assert done.returncode == 0, done.stderr[-3000:]
    return planned_jobs(done.stdout + done.stderr)


def test_all_tables_plan_one_job_per_cell(study):
    workdir, config = study
    cells = expand_grid(load_config(config))
    jobs = dry_run(workdir, config, "results/tables/runs.parquet")
    assert jobs["run_cell_qwen05b"] == len(cells) == 13
    assert jobs["evaluate"] == len(cells)
    assert jobs["thresholds"] == 1 and jobs["aggregate"] == 1


def test_cells_start_longest_first_after_thresholds_and_calibration_and_before_every_light_job(default_plan):
    _config, done = default_plan
    jobs = planned_priorities(done.stdout)
    by_rule: dict[str, list[float]] = {}
    for (rule, _), priority in jobs.items():
        by_rule.setdefault(rule, []).append(priority)
    cells = {wc.rsplit("slug=", 1)[1]: p for (rule, wc), p in jobs.items() if rule == "run_cell_qwen05b"}
    assert len(cells) == 13
    calibration = cells.pop("FC")  # the thresholds of every triggered cell wait for it
    assert max(by_rule["thresholds"]) > calibration > max(cells.values())
    summarizing = {cells.pop(slug) for slug in ("SU_Th_0.5__primary", "S-p_Th_0.5__primary")}  # 3 runs, summaries
    main = {
        cells.pop(slug)
        for slug in ("TR_Th_0.5__primary", "TRC_Th__primary", "OTRC_St", "OTRCplusTR_StplusTh_0.5__primary")
    }
    assert min(summarizing) > max(main) > max(cells.values())  # the rest: sweep cells of 2 runs
    # two cells hold the shared server's threads on both cores: a light job waits for them, and
    # among the light jobs what others wait for goes first (grading, tables, then the leaves)
    grading = by_rule["evaluate"]
    pages = [p for rule, priorities in by_rule.items() if rule.startswith("view_") for p in priorities]
    tables = [
        p
        for rule in ("aggregate", "aggregate_scope", "audit_scope", "replay", "aggregate_replay")
        for p in by_rule[rule]
    ]
    figures = [p for rule, priorities in by_rule.items() if rule.startswith("figure_") for p in priorities]
    assert len(grading) == 13 and len(pages) == 3 and figures  # pages: one job per track
    assert min(cells.values()) > max(grading) and min(grading) > max(tables) and min(tables) > max(figures + pages)
    assert min(figures + pages) >= 0  # the ILP scheduler never starts a job of negative priority


def test_without_a_shared_server_light_jobs_come_before_the_cells_that_hold_their_cores(study):
    """A cell that starts its own server (CTXPOLICY_SHARED_SERVERS=off, or a cluster job) asks for
    its model's cpus, so nothing runs beside it: grading, tables and pages go first, as on a
    cluster, where each has a node of its own; the thresholds stay above all."""
    workdir, config = study
    done = snakemake(workdir, config, "--dry-run", env={"CTXPOLICY_SHARED_SERVERS": "off"})
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = planned_priorities(done.stdout)
    cells = [p for (rule, _), p in jobs.items() if rule == "run_cell_qwen05b"]
    light = [p for (rule, _), p in jobs.items() if rule.startswith(("evaluate", "view_", "aggregate", "audit"))]
    thresholds = [p for (rule, _), p in jobs.items() if rule == "thresholds"]
    assert len(cells) == 13 and len(light) == 13 + 3 + 1 + 3 + 2 + 1
    assert min(thresholds) > max(cells) and min(light) > sorted(cells)[-2]  # all but the calibration cell
    assert re.search(r"rule run_cell_qwen05b:(?:(?!\nrule ).)*threads: 2", done.stdout, flags=re.S)


def figure_rule(target: str) -> str:
    return "figure_" + re.sub(r"\W", "_", target)


def test_default_target_makes_every_figure_and_table_from_any_working_directory(default_plan):
    from ctxpolicy.figures.catalog import TARGETS, is_imported

    config, done = default_plan
    jobs = planned_jobs(done.stdout + done.stderr)
    study_targets = {name for name, spec in TARGETS.items() if not is_imported(spec)}  # it imports no corpus
    assert {rule for rule in jobs if rule.startswith("figure_")} == {figure_rule(name) for name in study_targets}
    assert not {rule for rule in jobs if "imported" in rule}
    assert jobs["aggregate"] == 1 and jobs["aggregate_scope"] == 3 and jobs["all"] == 1
    assert jobs["replay"] == 1 and jobs["aggregate_replay"] == 1  # one FC cell replayed, no model calls
    # view.in_all: every cell's pages, one job per benchmark, model and track
    tracks = {(c.benchmark, c.model, c.track) for c in expand_grid(load_config(config))}
    assert {rule for rule in jobs if rule.startswith("view_")} == {f"view_{b}_{m}_{t}" for b, m, t in tracks}


def test_one_figure_runs_only_the_cells_it_draws(study):
    workdir, config = study
    cells = expand_grid(load_config(config))
    jobs = dry_run(workdir, config, "figures/fig2.pdf")
    compared = [c for c in cells if c.track in ("calibration", "full")]
    assert jobs["run_cell_qwen05b"] == len(compared) == 7
    assert jobs["aggregate_scope"] == 1 and "aggregate" not in jobs
    assert jobs["figure_fig2"] == 1 and len(jobs) == 5


@pytest.mark.parametrize(
    ("name", "benchmarks"), [("workstation.yaml", {"local"}), ("workstation-swebench.yaml", {"local", "swebench"})]
)
def test_single_gpu_configs_plan_every_cell_and_figure(tmp_path, name, benchmarks):
    from ctxpolicy.study.config import REPO_ROOT

    config = REPO_ROOT / "config" / name
    cells = expand_grid(load_config(config))
    jobs = dry_run(tmp_path, config)
    assert {c.benchmark for c in cells} == benchmarks and {c.model for c in cells} == {"coder"}
    assert jobs["run_cell_coder"] == jobs["evaluate"] == len(cells)
    assert jobs["thresholds"] == len(benchmarks) and jobs["figure_fig2"] == 1
    assert not [rule for rule in jobs if rule.startswith("view_")]  # the pages are a target here, not in all


def test_bad_config_stops_with_one_line_naming_key_value_and_allowed(study):
    workdir, config = study
    data = yaml.safe_load(config.read_text())
    data["grid"]["sweeps"]["settings"] = ["tight", "medium"]
    config.write_text(yaml.safe_dump(data))
    done = snakemake(workdir, config, "--dry-run")
    assert done.returncode != 0
    assert (
        "config.yaml: grid.sweeps.settings[1]: 'medium' is not allowed; allowed: tight, primary, loose"
        in done.stdout + done.stderr
    )


def fake_cell(workdir, cell) -> None:
    cell_dir = workdir / cell.run_root("results")
    run_dir = cell_dir / "hello-world__a1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"schema_version": 1, "complete": True}))
    (run_dir / "verdict.json").write_text(json.dumps({"resolved": True}))
    (cell_dir / "cell.json").write_text(json.dumps({"runs": [{"dir": run_dir.name, "outcome": "submitted"}]}))
    (cell_dir / "eval.json").write_text(json.dumps({"resolved": 1}))


def fake_results(workdir, config) -> None:
    """What the real commands leave, in the order the DAG makes it: the FC calibration cell, its
    thresholds, then every other cell (runs, cell.json, verdicts, eval.json)."""
    calibration, *others = expand_grid(load_config(config))
    assert calibration.track == "calibration"
    fake_cell(workdir, calibration)
    thresholds = workdir / "results/thresholds/local/qwen05b.json"
    thresholds.parent.mkdir(parents=True)
    thresholds.write_text(json.dumps({"source": "calibrated", "tight": 1000, "primary": 1500, "loose": 2000}))
    for cell in others:
        fake_cell(workdir, cell)


def test_imported_bundle_leaves_no_run_evaluation_or_calibration_to_do(study, tmp_path_factory):
    workdir, config = study
    fake_results(workdir, config)
    bundle = workdir / "bundle.tar.gz"
    ctx = [sys.executable, "-m", "ctxpolicy", "bundle"]
    subprocess.run(
        [*ctx, "export", "--results", str(workdir / "results"), "--out", str(bundle)], check=True, capture_output=True
    )

    reviewer = tmp_path_factory.mktemp("reviewer")
    reviewer_config = reviewer / "config.yaml"
    reviewer_config.write_text(config.read_text())
    subprocess.run(
        [*ctx, "import", str(bundle), "--results", str(reviewer / "results")], check=True, capture_output=True
    )
    jobs = dry_run(reviewer, reviewer_config, "results/tables/runs.parquet")
    assert jobs == {"aggregate": 1}


def job_resources(output: str, rule: str) -> dict[str, str]:
    block = output.split(f"rule {rule}:", 1)[1]
    line = next(line for line in block.splitlines() if line.strip().startswith("resources:"))
    return dict(item.split("=", 1) for item in line.split(":", 1)[1].strip().split(", "))


@pytest.mark.parametrize("request_gpus", [True, False])
def test_cell_jobs_ask_for_the_config_resources(tmp_path, request_gpus):
    from workflow_helpers import ROOT

    data = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    data["slurm"].update(account="lab42", partition="gpu", request_gpus=request_gpus)
    config = tmp_path / "paper.yaml"
    config.write_text(yaml.safe_dump(data))
    cell = "results/runs/swebench/qwen/SU_Th_0.5__primary__sum-gemma/cell.json"
    done = snakemake(tmp_path, config, cell, "--dry-run")
    assert done.returncode == 0, done.stderr[-3000:]
    resources = job_resources(done.stdout, "run_cell_qwen")
    assert resources["slurm_account"] == "lab42" and resources["slurm_partition"] == "gpu"
    assert (resources["runtime"], resources["cpus_per_task"], resources["mem_mb"]) == ("2880", "16", "128000")
    # the agent's four GPUs and the summarizer's one, or none on a CPU-only cluster
    assert resources.get("gpu", "0") == ("5" if request_gpus else "0")
    analysis = job_resources(done.stdout, "thresholds")
    assert "gpu" not in analysis and analysis["mem_mb"] == "8000"


def test_paper_default_target_renders_every_appendix_variant(tmp_path):
    from ctxpolicy.study.config import REPO_ROOT
    from ctxpolicy.figures.catalog import targets_for
    from ctxpolicy.study import load_study

    config = REPO_ROOT / "config/paper.yaml"
    targets = targets_for(load_study(config))
    jobs = dry_run(tmp_path, config)
    assert {rule for rule in jobs if rule.startswith("figure_")} == {figure_rule(name) for name in targets}
    assert jobs["figure_fig2_devstral_swebench"] == 1 and jobs["figure_fig17_qwen_terminalbench"] == 1
    assert "figure_fig9_devstral_swebench" not in jobs  # Figure 15 shows it


def planned_commands(workdir, config, target) -> str:
    done = snakemake(workdir, config, target, "--dry-run", "--printshellcmds")
    assert done.returncode == 0, done.stderr[-3000:]
    return " ".join((done.stdout + done.stderr).split())


def test_preset_thresholds_come_from_calibrate_preset_with_a_sidecar(tmp_path):
    from ctxpolicy.study.config import REPO_ROOT

    commands = planned_commands(tmp_path, REPO_ROOT / "config/paper.yaml", "results/thresholds/terminalbench/glm.json")
    assert (
        "calibrate --preset --config" in commands
        and "--benchmark terminalbench --model glm --out results/thresholds/terminalbench/glm.json && " in commands
    )
    assert "provenance record results/thresholds/terminalbench/glm.json --config" in commands


def test_run_cell_is_given_the_cell_id_and_nothing_else_about_the_cell(study):
    workdir, config = study
    commands = planned_commands(workdir, config, "results/runs/local/qwen05b/TRC_Th__tight/cell.json")
    assert (
        "run-cell --config config.yaml --cell local/qwen05b/TRC_Th__tight "
        "--out results/runs/local/qwen05b/TRC_Th__tight > " in commands
    )
    assert "--policy" not in commands.split("run-cell", 1)[1]


def test_bad_figures_block_stops_the_workflow_naming_file_key_and_value(study):
    workdir, config = study
    data = yaml.safe_load(config.read_text())
    data["figures"] = {"fig2": ["qwen05b/swebench"]}
    config.write_text(yaml.safe_dump(data))
    done = snakemake(workdir, config, "--dry-run")
    assert done.returncode != 0
    assert (
        "config.yaml: figures.fig2[0]: 'qwen05b/swebench': unknown benchmark 'swebench'; allowed: local"
        in done.stdout + done.stderr
    )


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_snakemake_lint_finds_nothing(name):
    from workflow_helpers import ROOT, SNAKEMAKE, workflow_env

    done = subprocess.run(
        [SNAKEMAKE, "--lint", "-n", "--configfile", str(ROOT / "config" / name)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=workflow_env(),
    )
    assert done.returncode == 0 and "Congratulations, your workflow is in a good condition" in done.stdout, (
        done.stdout + done.stderr
    )[-3000:]


def test_preset_thresholds_file_and_its_sidecar(study):
    """Runs `ctxpolicy calibrate --preset` for real (needs the run-cell/calibrate branch)."""
    workdir, config = study
    data = yaml.safe_load(config.read_text())
    data["thresholds"]["local"]["qwen05b"] = {"source": "preset", "tight": 900, "primary": 1200, "loose": 1500}
    config.write_text(yaml.safe_dump(data))
    target = "results/thresholds/local/qwen05b.json"
    done = snakemake(workdir, config, target, "--cores", "1")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    written = json.loads((workdir / target).read_text())
    assert (written["source"], written["tight"], written["primary"], written["loose"]) == ("preset", 900, 1200, 1500)
    sidecar = json.loads((workdir / f"{target}.prov.json").read_text())
    assert "config.yaml" in json.dumps(sidecar.get("config"))


def test_paper_terminal_bench_cell_prints_its_harbor_command(tmp_path):
    """config/paper.yaml runs Terminal-Bench through Harbor: the dry run shows the cell's `harbor run`
    with our agent's import path, the dataset, the cell's jobs directory, attempts and concurrency."""
    import shlex

    from ctxpolicy.benchmarks.harbor import AGENT_IMPORT_PATH, DATASET
    from ctxpolicy.study.config import REPO_ROOT

    config = load_config(REPO_ROOT / "config/paper.yaml")
    cell_dir = "results/runs/terminalbench/qwen/TR_Th_0.5__primary"
    swe_cell = "results/runs/swebench/qwen/TR_Th_0.5__primary"
    done = snakemake(
        tmp_path, REPO_ROOT / "config/paper.yaml", f"{cell_dir}/cell.json", f"{swe_cell}/cell.json", "-n", "-p"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cells = {
        part.split("--cell ", 1)[1].split()[0]: part
        for part in " ".join((done.stdout + done.stderr).split()).split("run-cell")[1:]
    }
    command = cells["terminalbench/qwen/TR_Th_0.5__primary"]
    assert f"--out {cell_dir} --harness-argv " in command
    argv = shlex.split(shlex.split(command.split("--harness-argv ", 1)[1].split(" > ", 1)[0])[0])
    assert argv[:2] == ["harbor", "run"]
    options = dict(zip(argv[2::2], argv[3::2]))
    assert options == {
        "--agent-import-path": AGENT_IMPORT_PATH,
        "--model": config["models"]["qwen"]["served_name"],
        "--dataset": DATASET,
        "--jobs-dir": f"{cell_dir}/harbor",
        "--n-attempts": str(config["attempts"]),
        "--n-concurrent": str(config["benchmarks"]["terminalbench"]["concurrency"]),
    }
    assert argv[-1] == "--yes"
    swe = cells["swebench/qwen/TR_Th_0.5__primary"]
    assert "--harness-argv" not in swe and "harbor run" not in swe
