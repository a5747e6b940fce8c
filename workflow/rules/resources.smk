# What each job asks of the machine or the cluster (Snakemake resources, read by
# snakemake-executor-plugin-slurm), the order jobs start in, and the model servers a local run's
# cells share.

import os
from pathlib import Path

from snakemake.settings.types import ExecMode

from ctxpolicy.serving import shared as shared_servers
from ctxpolicy.study import Pair

# ---------------------------------------------------------------- resources


def job_resources(spec: dict) -> dict:
    """Snakemake resources (read by snakemake-executor-plugin-slurm) from a config resources block."""
    res = {
        "mem_mb": spec["mem_mb"],
        "runtime": spec["runtime"],
        "cpus_per_task": spec["cpus"],
    }
    partition = spec.get("partition") or SLURM["partition"]
    if partition:
        res["slurm_partition"] = partition
    if SLURM["account"]:
        res["slurm_account"] = SLURM["account"]
    for key in ("constraint", "slurm_extra"):
        if spec.get(key):
            res[key] = spec[key]
    return res


def cell_gpus(wildcards) -> int:
    """The agent model's GPUs plus the summarizer's (0 asks for none)."""
    cell = cell_of(wildcards)
    gpus = STUDY.model(cell.model)["resources"]["gpus"]
    if cell.summarizer:
        gpus += STUDY.model(cell.summarizer)["resources"]["gpus"]
    return gpus


def cell_resources(model: str) -> dict:
    res = job_resources(STUDY.model(model)["resources"])
    if SLURM["request_gpus"]:
        res["gpu"] = cell_gpus
    return res


ANALYSIS = job_resources(SLURM["analysis"])


# ---------------------------------------------------------------- job order (Snakemake priority)
# Where jobs wait for a free core, Snakemake starts the ready jobs of highest priority (its ILP
# scheduler maximizes their summed priority; none is below 0, which it would never start).
# Locally the model server's threads are the machine's cores: two cells keep its slots, and so
# both cores, busy. A light job beside them gets no core of its own; it stalls the server, whose
# threads wait for each other at every step. So on a local run with a shared server every cell
# comes before every light job, and the light jobs fill the cores where fewer than two cells are
# ready (a cell waiting for its thresholds, the last cells) and after the cells, two at a time.
# On a cluster a light job runs on a node of its own and holds one of the profile's `jobs` for
# seconds: there it comes before the cells, and frees what waits on it. Thresholds come first
# (every threshold-triggered cell waits for them), then the calibration cell, then the cells
# longest first (the last to finish is a short one); among the light jobs, what others wait for
# first: grading, then the tables, then the trajectory pages and the figures (nothing waits for
# those; the figures keep Snakemake's default priority, 0).

PAGES_RANK, TABLES_RANK, GRADING_RANK = 0, 1, 2
CELL_PRIORITY_BASE = GRADING_RANK + 1  # above every light job of a local run
CLUSTER_LIGHT_BASE = 10**9  # above any cell's
THRESHOLDS_PRIORITY = CLUSTER_LIGHT_BASE + GRADING_RANK + 2  # above everything, the calibration cells next


def light_priority(rank: int):
    """A light job's priority: ``rank`` below every cell with a shared local server, above every
    cell on a cluster (a callable: Snakemake asks once it knows the executor)."""
    return lambda wildcards: rank if shares_servers() else CLUSTER_LIGHT_BASE + rank


def cell_priority(wildcards) -> int:
    """A cell's planned model work above CELL_PRIORITY_BASE: its runs, twice for a policy that
    summarizes (its summary calls are model calls too); the calibration cells get
    THRESHOLDS_PRIORITY - 1, above every other job but the thresholds."""
    cell = cell_of(wildcards)
    if STUDY.calibration_cell(Pair(cell.model, cell.benchmark)) == cell:
        return THRESHOLDS_PRIORITY - 1
    work = STUDY.planned_runs(cell) * (2 if cell.spec.needs_summarizer else 1)
    return min(CELL_PRIORITY_BASE + work, CLUSTER_LIGHT_BASE - 1)


# ---------------------------------------------------------------- shared model servers
# Local runs share one model server per model between all their cells (ctxpolicy.serving.shared,
# workflow/rules/servers.smk).

SHARED_SESSION = shared_servers.Session(os.getpid(), Path(RESULTS).resolve() / ".servers")


def shares_servers() -> bool:
    if os.environ.get(shared_servers.ENV) == "off":
        return False
    return workflow.local_exec and workflow.exec_mode == ExecMode.DEFAULT


def cell_threads(cpus: int) -> int:
    """A run cell's threads: its model's cpus, or 1 when the cell is a client of a shared server
    (the server's CPU is outside every job), so that a second cell keeps the server's other slot
    busy while a cell waits for its last run, and a light job takes the second core only where no
    second cell is ready (the job order above).
    """
    return 1 if shares_servers() else cpus


def stop_shared_servers() -> None:
    if os.environ.get(shared_servers.ENV) == SHARED_SESSION.announce():
        shared_servers.stop_all(SHARED_SESSION.directory, SHARED_SESSION.owner_pid)
