"""Helpers of the workflow tests: a study in a scratch directory, and Snakemake run against it.

Each test gets its own working directory (snakemake -d DIR), so its results, figures and
.snakemake/ never touch the repository's own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import LLM_THREADS

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
# write_study's overrides for a workflow test that runs the embedded model: one step per run (what
# is under test is the workflow, not the model's work) and the server on conftest's LLM_THREADS
SMALL_MODEL_RUNS = {"benchmarks.local.limits.step_limit": 1, "models.qwen05b.threads": LLM_THREADS}


def write_study(workdir: Path, base: str, cohorts: dict[str, list[str]], **overrides) -> Path:
    """A copy of config/BASE in WORKDIR with its local cohorts replaced by the given task ids."""
    config = yaml.safe_load((ROOT / "config" / base).read_text())
    bench = config["benchmarks"]["local"]
    bench.pop("cohort_limit", None)
    for cohort, tasks in cohorts.items():
        path = workdir / f"cohort_{cohort}.txt"
        path.write_text("".join(f"{t}\n" for t in tasks))
        bench["cohorts"][cohort] = str(path)
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = config
        for key in parents:
            node = node[key]
        node[leaf] = value
    path = workdir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def snakemake_command(workdir: Path, config: Path, *args: str) -> list[str]:
    # --configfile takes several values, so it comes last, after the targets
    return [SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "-d", str(workdir), *args, "--configfile", str(config)]


def snakemake(
    workdir: Path, config: Path, *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Snakemake on the repository's Snakefile; ``env``: variables set for it beyond ``workflow_env``."""
    return subprocess.run(
        snakemake_command(workdir, config, *args),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**workflow_env(), **(env or {})},
    )


def workflow_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("SNAKEMAKE_PROFILE", None)
    return env


def planned_jobs(output: str) -> dict[str, int]:
    """Rule -> job count from the 'Job stats' table of a dry run."""
    table = output.split("Job stats:", 1)[1] if "Job stats:" in output else ""
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)\s*$", table, flags=re.M) if rule != "total"}


def planned_priorities(output: str) -> dict[tuple[str, str], float]:
    """(rule, wildcards text) -> Snakemake priority of each job of a dry run (0 when none is shown)."""
    jobs = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", output):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        if rule:
            wildcards = re.search(r"^\s+wildcards: (.*)$", block, flags=re.M)
            priority = re.search(r"^\s+priority: (\S+)$", block, flags=re.M)
            jobs[(rule[1], wildcards[1] if wildcards else "")] = float(priority[1]) if priority else 0.0
    return jobs


def embedded_model_ready() -> bool:
    from ctxpolicy.serving import cached_model

    return cached_model("qwen2.5-coder-0.5b-instruct-q4_k_m") is not None


def bubblewrap_ready() -> bool:
    from ctxpolicy.sandbox import bwrap_available

    return bool(bwrap_available())
