"""Terminal-Bench 1.0 (terminal-bench-core 0.1.1): cohorts, task instructions from a local copy
of the dataset, and verdicts from the harness that ran each trial in its own containers with its
own tests: ``harness: tb`` (the default), the terminal-bench harness with our agent
`ctxpolicy.benchmarks.tb_agent:CtxpolicyAgent`; ``harness: harbor`` (the study's), Harbor 0.20.0
with `ctxpolicy.benchmarks.harbor_agent:CtxpolicyHarborAgent` (``ctxpolicy.benchmarks.harbor``).

The terminal-bench package needs Python >= 3.12 and Docker: it lives in envs/terminal-bench.yaml
and nothing here imports it.
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from ctxpolicy.benchmarks import containers, harbor
from ctxpolicy.benchmarks.base import (
    TERMINAL_SUBMISSION,
    BenchmarkError,
    RunRecord,
    Task,
    Verdict,
    read_run,
    write_verdict,
)
from ctxpolicy.benchmarks.cohorts import cohort_file, read_cohort, require_known
from ctxpolicy.sandbox.limits import limits_from_config

INDEX_FILE = Path(__file__).with_name("data") / "terminal_bench_core_0.1.1.json"
DATASET, VERSION = "terminal-bench-core", "0.1.1"
STRATUM = "terminal-bench"
DIFFICULTY_RANK = {"easy": 0, "medium": 1, "hard": 2}
# the study: 40 tasks, and a sweep subset of 15 drawn from them
STUDY_DESIGN = {"main": {"strata": {STRATUM: 40}}, "sweep": {"from": "main", "strata": {STRATUM: 15}}}
HARNESS = "terminal-bench"
HARNESSES = ("tb", harbor.HARNESS)
AGENT_IMPORT_PATH = "ctxpolicy.benchmarks.tb_agent:CtxpolicyAgent"
HARNESS_OUTPUT = "terminal-bench"  # the harness's --output-path, inside the cell directory
TRIAL_NAME = re.compile(r"^(?P<task>.+)\.(?P<attempt>\d+)-of-\d+\.(?P<run>.+)$")


@lru_cache(maxsize=1)
def core_index() -> dict[str, Any]:
    return json.loads(INDEX_FILE.read_text(encoding="utf-8"))


def default_dataset_dir(name: str = DATASET, version: str = VERSION) -> Path:
    """Where `tb` caches a downloaded dataset."""
    return Path.home() / ".cache" / "terminal-bench" / name / version


def read_task_yaml(task_dir: Path) -> dict[str, Any]:
    data = yaml.safe_load((task_dir / "task.yaml").read_text(encoding="utf-8"))
    if "instruction" not in data:  # early 0.1.x tasks: descriptions: [{key: base, description: ...}]
        base = [d for d in data.get("descriptions", []) if d.get("key") == "base"]
        if not base:
            raise BenchmarkError(f"{task_dir / 'task.yaml'}: field instruction is missing")
        data["instruction"] = base[0]["description"]
    return data


def index_items(task_ids: list[str], difficulty_of: dict[str, str] | None = None) -> list[tuple[str, str, int]]:
    """(task_id, stratum, rank) items; ranked by difficulty when the dataset is at hand, else equal."""
    difficulty_of = difficulty_of or {}
    return [(t, STRATUM, DIFFICULTY_RANK.get(difficulty_of.get(t, ""), 0)) for t in task_ids]


def trial_identity(trial_name: str) -> tuple[str, int]:
    """(task_id, attempt) from a harness trial name such as 'hello-world.2-of-3.my-run'."""
    m = TRIAL_NAME.match(trial_name)
    if not m:
        raise ValueError(f"not a terminal-bench trial name: {trial_name!r}")
    return m["task"], int(m["attempt"])


def harness_trials(output_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """Every trial result found in the harness's run-level results.json files under output_dir."""
    trials: dict[tuple[str, int], dict[str, Any]] = {}
    for results_file in sorted(Path(output_dir).glob("*/results.json")):
        for trial in json.loads(results_file.read_text(encoding="utf-8")).get("results", []):
            task_id, attempt = trial_identity(trial["trial_name"])
            trials[(task_id, attempt)] = {**trial, "results_file": str(results_file)}
    return trials


def verdict_from_trial(run: RunRecord, trial: dict[str, Any] | None) -> Verdict:
    if trial is None:
        report = {"resolved": False, "error": "no terminal-bench trial for this run (run the cell through `tb run`)"}
        return Verdict(False, HARNESS, report, "")
    report = {
        "resolved": trial.get("is_resolved") is True,
        "failure_mode": trial.get("failure_mode"),
        "tests_status": trial.get("parser_results") or {},
        "trial_name": trial["trial_name"],
    }
    return Verdict(report["resolved"], HARNESS, report, trial["results_file"])


def tb_run_argv(
    *,
    dataset_path: Path | None,
    task_ids: list[str],
    model: str,
    run_id: str,
    output_path: Path,
    n_concurrent: int,
    n_attempts: int,
    agent_kwargs: dict[str, str],
) -> list[str]:
    """The `tb run` command that runs a cell's tasks with our agent class (from envs/terminal-bench)."""
    argv = [
        "tb",
        "run",
        "--agent-import-path",
        AGENT_IMPORT_PATH,
        "--model",
        model,
        "--run-id",
        run_id,
        "--output-path",
        str(output_path),
        "--n-concurrent",
        str(n_concurrent),
        "--n-attempts",
        str(n_attempts),
    ]
    argv += ["--dataset-path", str(dataset_path)] if dataset_path else ["--dataset", f"{DATASET}=={VERSION}"]
    for task_id in task_ids:
        argv += ["--task-id", task_id]
    for key, value in agent_kwargs.items():
        argv += ["--agent-kwarg", f"{key}={value}"]
    return argv


class TerminalBenchAdapter:
    name = "terminalbench"
    grades_in_environment = False  # the harness already judged each trial; evaluation reads its files

    def __init__(self, bench_cfg: dict[str, Any], repo_root: Path, name: str = "terminalbench"):
        self.name = name
        self.cfg = bench_cfg
        self.repo_root = Path(repo_root)
        self.environment = bench_cfg.get("environment", "docker")
        self.harness = bench_cfg.get("harness", "tb")
        if self.harness not in HARNESSES:
            raise BenchmarkError(
                f"benchmarks.{name}.harness: {self.harness!r} unknown; allowed: {', '.join(HARNESSES)}"
            )
        dataset = bench_cfg.get("dataset") or {}
        self.dataset_path = self.repo_root / dataset["path"] if dataset.get("path") else None

    @property
    def dataset_dir(self) -> Path:
        return self.dataset_path or default_dataset_dir()

    def task_dir(self, task_id: str) -> Path:
        if not self.dataset_dir.is_dir():
            raise BenchmarkError(
                f"benchmark {self.name}: {DATASET} {VERSION} not found at {self.dataset_dir}. Either set "
                f"benchmarks.{self.name}.dataset.path to a local copy of the dataset's tasks, or download "
                f"it (online) with `tb datasets download --dataset {DATASET}=={VERSION}` in envs/terminal-bench"
            )
        path = self.dataset_dir / task_id
        if not (path / "task.yaml").is_file():
            raise BenchmarkError(f"benchmark {self.name}: task {task_id!r} has no task.yaml under {self.dataset_dir}")
        return path

    def cohort_ids(self, cohort: str) -> list[str]:
        path = cohort_file(self.name, self.cfg, self.repo_root, cohort)
        ids = read_cohort(path)
        require_known(ids, core_index()["task_ids"], str(path))
        return ids

    def tasks(self, cohort: str) -> list[Task]:
        return [self.task(task_id) for task_id in self.cohort_ids(cohort)]

    def task(self, task_id: str) -> Task:
        data = read_task_yaml(self.task_dir(task_id))
        timeout = data.get("max_agent_timeout_sec")
        return Task(
            task_id=task_id,
            stratum=STRATUM,
            kind="terminal",
            instruction=data["instruction"],
            timeout_s=int(timeout) if timeout else None,
            metadata={
                "difficulty": data.get("difficulty"),
                "category": data.get("category"),
                "max_test_timeout_sec": data.get("max_test_timeout_sec"),
                "image": self.image(task_id),
            },
        )

    def image(self, task_id: str) -> str:
        return f"ctxpolicy/tb.{task_id}:{VERSION}"

    def check_environment(self) -> None:
        if self.environment != "docker":
            raise BenchmarkError(
                f"benchmarks.{self.name}.environment: {self.environment!r}: the terminal-bench harness "
                "runs its tasks with docker compose, so Terminal-Bench needs docker"
            )
        ok, reason = containers.environment_available("docker")
        if not ok:
            raise BenchmarkError(f"benchmarks.{self.name}.environment: docker is not available here ({reason})")

    def prepare_workspace(self, task: Task, workspace: Path) -> None:
        Path(workspace).mkdir(parents=True, exist_ok=True)
        argv = containers.docker_build_argv(self.image(task.task_id), self.task_dir(task.task_id))
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            raise BenchmarkError(f"task {task.task_id}: docker build failed: {result.stderr[-500:]}")

    def release_workspace(self, task: Task, workspace: Path) -> None:
        pass  # nothing mounted: the container holds the task's files

    def make_environment(self, task: Task, workspace: Path, command_timeout_s: int) -> Any:
        from minisweagent.environments import get_environment

        return get_environment(
            containers.minisweagent_environment_config(
                "docker",
                self.image(task.task_id),
                cwd="/app",
                timeout=command_timeout_s,
                env={"PAGER": "cat"},
                limits=limits_from_config(self.cfg.get("sandbox")),
            )
        )

    def submission_instructions(self, task: Task) -> str:
        return TERMINAL_SUBMISSION

    def collect_submission(self, task: Task, workspace: Path, submission_text: str) -> str:
        return submission_text

    def harness_argv(
        self,
        task_ids: list[str],
        *,
        model: str,
        run_id: str,
        cell_dir: Path,
        n_concurrent: int,
        n_attempts: int,
        agent_kwargs: dict[str, str],
        prefix: list[str] | None = None,
    ) -> list[str]:
        """The harness command for some tasks. Harbor: ``prefix`` (the rule's, see
        ``harbor.cell_prefix``) or the same built here, then the tasks and agent kwargs (with the
        attempts, which our Harbor agent numbers itself)."""
        if self.harness == harbor.HARNESS:
            fixed = prefix or harbor.harbor_run_prefix(
                model=model,
                jobs_dir=Path(cell_dir) / harbor.JOBS_DIR,
                n_attempts=n_attempts,
                n_concurrent=n_concurrent,
                dataset_path=self.dataset_path,
            )
            return [*fixed, *harbor.harbor_task_args(task_ids, {**agent_kwargs, "attempts": str(n_attempts)})]
        return tb_run_argv(
            dataset_path=self.dataset_path,
            task_ids=task_ids,
            model=model,
            run_id=run_id,
            output_path=Path(cell_dir) / HARNESS_OUTPUT,
            n_concurrent=n_concurrent,
            n_attempts=n_attempts,
            agent_kwargs=agent_kwargs,
        )

    def _trials(self, cell_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
        if self.harness == harbor.HARNESS:
            return harbor.harbor_trials(cell_dir / harbor.JOBS_DIR)
        return harness_trials(cell_dir / HARNESS_OUTPUT)

    def evaluate(self, run_dirs: list[Path], log_dir: Path) -> dict[Path, Verdict]:
        """The harness has already judged every trial; map its verdicts onto our run records."""
        verdicts: dict[Path, Verdict] = {}
        trials_by_cell: dict[Path, dict] = {}
        for run_dir in run_dirs:
            run = read_run(run_dir)
            cell_dir = Path(run_dir).parent
            if cell_dir not in trials_by_cell:
                trials_by_cell[cell_dir] = self._trials(cell_dir)
            trial = trials_by_cell[cell_dir].get((run.task_id, run.attempt))
            if self.harness == harbor.HARNESS:
                verdict = harbor.verdict_from_harbor_trial(run, trial)
            else:
                verdict = verdict_from_trial(run, trial)
            write_verdict(run_dir, verdict)
            verdicts[Path(run_dir)] = verdict
        return verdicts
