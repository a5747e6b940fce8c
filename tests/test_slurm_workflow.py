"""The real workflow through the slurm profile (`snakemake --profile slurm ...` from the repository
root) against the single-node SLURM of scripts/slurm-local.sh: two cells of the embedded model,
grading, tables and Figure 2 with its provenance sidecar, every job submitted with sbatch and
followed with sacct, GPU requests off for the CPU node."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from datetime import datetime

import pytest

from conftest import LLM_THREADS, require
from workflow_helpers import ROOT, SMALL_MODEL_RUNS, bubblewrap_ready, embedded_model_ready, snakemake, write_study

ACCOUNT = "ctxpolicy"  # created by scripts/slurm-local.sh, named in config/test_workflow.yaml


def slurm_ready() -> bool:
    if not all(shutil.which(tool) for tool in ("sbatch", "sacct", "sinfo", "scontrol")):
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True)
    nodes = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True)
    accounting = subprocess.run(["sacct", "-n", "-X", "-S", "now"], capture_output=True, text=True)
    return (
        "UP" in ping.stdout
        and accounting.returncode == 0
        and any(state.strip() in ("idle", "mixed", "allocated") for state in nodes.stdout.splitlines())
    )


def sacct_jobs(since: str) -> list[dict]:
    done = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", since, "-A", ACCOUNT, "-o", "JobID,JobName,State,Account,ReqTRES,WorkDir"],
        capture_output=True,
        text=True,
        check=True,
    )
    keys = ("id", "name", "state", "account", "tres", "workdir")
    return [dict(zip(keys, line.split("|"))) for line in done.stdout.splitlines() if line.strip()]


def test_slurm_profile_is_found_as_typed_from_the_repository_root():
    from snakemake.cli import get_profile_dir

    found = get_profile_dir("slurm")
    assert found is not None
    assert found[1].resolve() == (ROOT / "slurm" / "config.yaml").resolve()


@pytest.mark.slurm
@pytest.mark.llm
@pytest.mark.sandbox
def test_figure_through_the_slurm_profile(tmp_path):
    require(slurm_ready(), "the local single-node SLURM (bash scripts/slurm-local.sh start)")
    require(embedded_model_ready(), "the embedded model (scripts/bootstrap.sh assembles it)")
    require(bubblewrap_ready(), "bubblewrap (Debian package bubblewrap)")
    # a cell asks SLURM for the CPUs of its model's server, one thread here: the two cells share
    # the 2-CPU node instead of waiting for each other; a few tokens a call make a run (what the
    # figure draws is no concern here), so the cell jobs end sooner
    one_cpu = {"models.qwen05b.resources.cpus": LLM_THREADS, "models.qwen05b.max_tokens": 16}
    config = write_study(
        tmp_path,
        "test_workflow.yaml",
        {"main": ["hello-world"], "sweep": ["hello-world"]},
        **SMALL_MODEL_RUNS,
        **one_cpu,
    )
    since = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    time.sleep(1)

    done = snakemake(
        tmp_path,
        config,
        "figures/fig2.pdf",
        "--profile",
        "slurm",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--seconds-between-status-checks",
        "2",
        timeout=1800,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]

    for cell in ("FC", "TR_Th_0.5__primary"):
        cell_dir = tmp_path / "results/runs/local/qwen05b" / cell
        assert json.loads((cell_dir / "cell.json").read_text())["runs"]
        assert (cell_dir / "eval.json").is_file()
        assert (cell_dir / "hello-world__a1" / "run.json").is_file()
    for output in ("figures/fig2.pdf", "figures/fig2.png"):
        assert (tmp_path / output).stat().st_size > 0
        sidecar = json.loads((tmp_path / f"{output}.prov.json").read_text())
        assert "config.yaml" in json.dumps(sidecar.get("config"))
    assert (tmp_path / "results/tables/full/runs.parquet.prov.json").is_file()

    report = tmp_path / "report.html"
    made = snakemake(tmp_path, config, "figures/fig2.pdf", "--report", str(report))
    assert made.returncode == 0, made.stderr[-3000:]
    assert "fig2.png" in report.read_text(errors="replace")

    jobs = [j for j in sacct_jobs(since) if j["workdir"].rstrip("/") == str(tmp_path)]
    # thresholds, two cells, two evaluations, the tables and the figure: each its own sbatch job
    assert len(jobs) == 7, jobs
    assert {j["state"] for j in jobs} == {"COMPLETED"}
    assert all(j["account"] == ACCOUNT and "gres/gpu" not in j["tres"] for j in jobs)


@pytest.mark.slurm
def test_slurm_local_status_reports_a_node_taking_jobs():
    require(slurm_ready(), "the local single-node SLURM (bash scripts/slurm-local.sh start)")
    done = subprocess.run(["bash", str(ROOT / "scripts/slurm-local.sh"), "status"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "node: " in done.stdout and "not taking jobs" not in done.stdout
