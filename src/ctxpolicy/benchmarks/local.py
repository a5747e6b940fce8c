"""The offline suite's adapter: workspaces on disk, commands and grading inside bubblewrap.

Who does what (docs/sandbox.md): the pipeline's own user copies a snapshot and makes its base
commit, then hands the directory over to the sandbox user; everything after that (setup.sh,
the agent's commands, taking the diff, applying a submission, the tests) runs in the sandbox as
that user, so git only ever meets a repository its own user owns.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ctxpolicy import sandbox
from ctxpolicy.sandbox import SandboxLimits, quota
from ctxpolicy.benchmarks import grading
from ctxpolicy.benchmarks.base import (
    BenchmarkError,
    RunRecord,
    Task,
    Verdict,
    read_run,
    submission_instructions_for,
    write_verdict,
)
from ctxpolicy.benchmarks.cohorts import cohort_file, read_cohort, require_known
from ctxpolicy.benchmarks.local_suite import repo_instances, snapshot_dir, terminal_tasks
from ctxpolicy.rundir import WORKSPACE

HARNESS = "ctxpolicy-local/swebench-grading"
TERMINAL_STRATUM = "terminal"
SETUP_TIMEOUT_S = 60
TEST_TIMEOUT_S = 120
AGENT_ENV = {"PAGER": "cat", "MANPAGER": "cat", "GIT_PAGER": "cat", "PYTHONDONTWRITEBYTECODE": "1", "TQDM_DISABLE": "1"}
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "ctxpolicy",
    "GIT_AUTHOR_EMAIL": "ctxpolicy@localhost",
    "GIT_COMMITTER_NAME": "ctxpolicy",
    "GIT_COMMITTER_EMAIL": "ctxpolicy@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}
# never part of a submission: byte code and caches the agent's own test runs leave behind
GIT_EXCLUDE = "__pycache__/\n*.pyc\n.pytest_cache/\n.ctxpolicy-*\n"
# the order swebench's harness tries (swebench.harness.run_evaluation.GIT_APPLY_CMDS)
GIT_APPLY_CMDS = (
    "git apply --verbose",
    "git apply --verbose --3way",
    "git apply --verbose --reject",
    "patch --batch --forward --fuzz=5 -p1 -i",
)


class LocalAdapter:
    name = "local"

    def __init__(self, bench_cfg: dict[str, Any], repo_root: Path, name: str = "local"):
        self.name = name
        self.cfg = bench_cfg
        self.repo_root = Path(repo_root)
        self.environment = bench_cfg.get("environment", "bwrap")
        self.limits = sandbox.limits_from_config(bench_cfg.get("sandbox"))
        self.keep_workspaces = bool(bench_cfg.get("keep_workspaces", False))
        self.instances = repo_instances()
        self.terminal = terminal_tasks()

    # --- tasks -----------------------------------------------------------------------------
    def all_tasks(self) -> dict[str, Task]:
        tasks = {iid: _repo_task(inst) for iid, inst in self.instances.items()}
        tasks.update({tid: _terminal_task(t) for tid, t in self.terminal.items()})
        return tasks

    def cohort_path(self, cohort: str) -> Path:
        return cohort_file(self.name, self.cfg, self.repo_root, cohort)

    def tasks(self, cohort: str) -> list[Task]:
        path = self.cohort_path(cohort)
        ids = read_cohort(path)
        known = self.all_tasks()
        require_known(ids, known, str(path))
        return [known[i] for i in ids]

    def task(self, task_id: str) -> Task:
        known = self.all_tasks()
        if task_id not in known:
            raise BenchmarkError(f"benchmark {self.name}: unknown task id {task_id!r}")
        return known[task_id]

    # --- environment -----------------------------------------------------------------------
    def check_environment(self) -> None:
        if self.environment != "bwrap":
            raise BenchmarkError(
                f"benchmarks.{self.name}.environment: {self.environment!r} is not supported by the "
                "local suite (use bwrap)"
            )
        if not sandbox.bwrap_available():
            raise BenchmarkError(
                f"benchmarks.{self.name}.environment: bwrap is not available on this machine "
                "(install the Debian package bubblewrap)"
            )
        if quota.mount_method() is None:
            raise BenchmarkError(
                f"benchmarks.{self.name}.sandbox.disk_mb: the workspace's disk quota needs storage of the "
                "limit's size, and this machine can mount none (run as root, or install fuse2fs with a "
                "usable /dev/fuse; docs/sandbox.md, 'Disk quota')"
            )

    def prepare_workspace(self, task: Task, workspace: Path) -> None:
        """The task's files in `workspace`, a filesystem of the disk quota's size (released by
        `release_workspace` at the end of the run, or here if the setup fails)."""
        workspace = Path(workspace)
        if workspace.exists() and any(workspace.iterdir()):
            raise BenchmarkError(f"workspace {workspace} is not empty")
        try:
            quota.mount(workspace, self.limits)
        except quota.QuotaUnavailable as e:
            raise BenchmarkError(f"task {task.task_id}: {e}") from e
        try:
            self._fill_workspace(task, workspace)
        except BaseException:
            quota.release(workspace)
            raise

    def release_workspace(self, task: Task, workspace: Path) -> None:
        """The run is over: its workspace becomes a plain folder holding what the quota let in."""
        quota.release(Path(workspace))

    def _fill_workspace(self, task: Task, workspace: Path) -> None:
        if task.kind == "repo":
            init_repository(snapshot_dir(self.instances[task.task_id]), workspace)
        sandbox.hand_over(workspace, self.limits)
        if task.kind != "repo":
            setup = (self.terminal[task.task_id]["path"] / "setup.sh").read_text(encoding="utf-8")
            result = sandbox.run_sandboxed(
                setup, workspace, timeout_s=SETUP_TIMEOUT_S, env=AGENT_ENV, limits=self.limits
            )
            if result.returncode != 0 or result.timed_out:
                raise BenchmarkError(
                    f"task {task.task_id}: setup.sh failed ({result.returncode}): {result.output[-500:]}"
                )

    def make_environment(self, task: Task, workspace: Path, command_timeout_s: int) -> Any:
        return sandbox.SandboxEnvironment(
            Path(workspace), timeout=command_timeout_s, env=dict(AGENT_ENV), limits=self.limits
        )

    def submission_instructions(self, task: Task) -> str:
        return submission_instructions_for(task)

    def collect_submission(self, task: Task, workspace: Path, submission_text: str) -> str:
        """Repository tasks: the workspace's own diff against the snapshot (what the agent
        changed, whatever it printed); terminal tasks: the submission text (the state is graded)."""
        if task.kind != "repo" or not (Path(workspace) / ".git").is_dir():
            return submission_text
        result = sandbox.run_sandboxed(
            "git add -A && git diff --cached --binary HEAD",
            Path(workspace),
            timeout_s=60,
            env=AGENT_ENV,
            max_output_bytes=None,  # a patch must stay whole
            limits=self.limits,
        )
        return result.output if result.returncode == 0 and not result.timed_out else submission_text

    # --- grading ---------------------------------------------------------------------------
    def evaluate(self, run_dirs: list[Path], log_dir: Path) -> dict[Path, Verdict]:
        runs = [read_run(d) for d in run_dirs]
        for run in runs:
            self.task(run.task_id)  # every id known before anything is graded
        log_dir = Path(log_dir).resolve()  # the sandbox reads a relative cwd as inside its workspace
        workers = int(self.cfg.get("eval_workers") or self.cfg.get("concurrency") or 1)
        verdicts: dict[Path, Verdict] = {}
        with (
            ThreadPoolExecutor(max_workers=workers) as pool,
            tqdm(total=len(runs), desc=f"grading {self.name}", unit="run", disable=None) as bar,
        ):
            futures = {pool.submit(self.grade_run, run, Path(log_dir) / run.run_dir.name): run for run in runs}
            for future in as_completed(futures):
                verdicts[futures[future].run_dir] = future.result()
                bar.update()
        return verdicts

    def grade_run(self, run: RunRecord, log_dir: Path) -> Verdict:
        log_dir.mkdir(parents=True, exist_ok=True)
        if self.task(run.task_id).kind == "repo":
            verdict = self.grade_patch(run.task_id, run.model_patch, log_dir)
        else:
            verdict = self.grade_state(run.task_id, run.run_dir / WORKSPACE, log_dir)
        write_verdict(run.run_dir, verdict)
        if not self.keep_workspaces:  # graded: the workspace has served (keep_workspaces keeps it)
            quota.release(run.run_dir / WORKSPACE, keep=False)
            shutil.rmtree(run.run_dir / WORKSPACE, ignore_errors=True)
        return verdict

    def grade_patch(self, instance_id: str, model_patch: str, log_dir: Path) -> Verdict:
        """SWE-bench's procedure on a fresh copy of the snapshot: apply, run the eval script, grade."""
        instance = self.instances[instance_id]
        log_path = log_dir / "test_output.txt"
        (log_dir / "patch.diff").write_text(model_patch, encoding="utf-8")
        with (
            tempfile.TemporaryDirectory(prefix="grade-", dir=log_dir) as tmp,
            quota.bounded_directory(Path(tmp) / "root", self.limits) as root,
        ):
            repo = root / "repo"
            repo.mkdir()
            init_repository(snapshot_dir(instance), repo)
            patch_file = root / "patch.diff"  # beside the repository, so that it is no part of it
            patch_file.write_text(model_patch, encoding="utf-8")
            sandbox.hand_over(root, self.limits)
            if model_patch.strip():
                applied, output = apply_patch(root, repo, patch_file, self.limits)
                log = grading.apply_log(applied, output)
            else:
                applied, log = True, "no patch submitted: the tests run on the unchanged snapshot\n"
            if applied:
                result = sandbox.run_sandboxed(
                    instance["eval_script"],
                    root,
                    timeout_s=TEST_TIMEOUT_S,
                    env=AGENT_ENV,
                    cwd=repo,
                    limits=self.limits,
                )
                log += result.output
                if result.timed_out:
                    log += f"\n>>>>> Tests Timed Out after {TEST_TIMEOUT_S} s\n"
        log_path.write_text(log, encoding="utf-8")
        report = grading.grade_repo_log(instance, model_patch, log_path)
        return Verdict(resolved=bool(report["resolved"]), harness=HARNESS, report=report, log=str(log_path))

    def grade_state(self, task_id: str, workspace: Path, log_dir: Path) -> Verdict:
        """Terminal-Bench's procedure on a copy of the final state: copy the tests in, run them."""
        task_dir = self.terminal[task_id]["path"]
        log_path = log_dir / "test_output.txt"
        if not workspace.is_dir():
            log_path.write_text(f"no workspace at {workspace}\n", encoding="utf-8")
            report = {"resolved": False, "tests_status": {}, "returncode": None, "error": "workspace missing"}
            return Verdict(resolved=False, harness=HARNESS, report=report, log=str(log_path))
        with (
            tempfile.TemporaryDirectory(prefix="grade-", dir=log_dir) as tmp,
            quota.bounded_directory(Path(tmp) / "root", self.limits) as root,
        ):
            (root / "app").mkdir()
            problem = quota.copy_tree(workspace, root / "app")  # holes and hard links kept, never a FIFO opened
            if problem:
                log_path.write_text(f"the final workspace cannot be copied for grading: {problem}\n", encoding="utf-8")
                report = {"resolved": False, "tests_status": {}, "returncode": None, "error": "workspace not copied"}
                return Verdict(resolved=False, harness=HARNESS, report=report, log=str(log_path))
            shutil.copytree(task_dir / "tests", root / "tests")
            shutil.copy2(task_dir / "run-tests.sh", root / "run-tests.sh")
            timeout = int(self.terminal[task_id].get("max_test_timeout_sec") or TEST_TIMEOUT_S)
            sandbox.hand_over(root, self.limits)
            result = sandbox.run_sandboxed(
                f"bash {root / 'run-tests.sh'}",
                root,
                timeout_s=timeout,
                env={**AGENT_ENV, "TEST_DIR": str(root / "tests")},
                cwd=root / "app",
                limits=self.limits,
            )
        log_path.write_text(result.output, encoding="utf-8")
        report = grading.grade_terminal_log(result.output, -1 if result.timed_out else result.returncode)
        return Verdict(resolved=report["resolved"], harness=HARNESS, report=report, log=str(log_path))


def _repo_task(instance: dict[str, Any]) -> Task:
    return Task(
        task_id=instance["instance_id"],
        stratum=instance["stratum"],
        kind="repo",
        instruction=instance["problem_statement"],
        timeout_s=None,
        metadata={"repo": instance["repo"], "difficulty": instance["difficulty"], "version": instance["version"]},
    )


def _terminal_task(task: dict[str, Any]) -> Task:
    timeout = task.get("max_agent_timeout_sec")
    return Task(
        task_id=task["task_id"],
        stratum=TERMINAL_STRATUM,
        kind="terminal",
        instruction=task["instruction"],
        timeout_s=int(timeout) if timeout else None,
        metadata={"difficulty": task.get("difficulty"), "category": task.get("category")},
    )


def init_repository(snapshot: Path, workspace: Path) -> None:
    """Copy a snapshot into `workspace` and commit it, so that a submission is a `git diff`.

    Runs as the pipeline's user on our own files only; the caller hands the result over to the
    sandbox user. Fixed identity and dates make the base commit the same on every machine.
    """
    shutil.copytree(snapshot, workspace, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), **GIT_IDENTITY}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "snapshot"]):
        subprocess.run(argv, cwd=workspace, env=env, check=True, capture_output=True)
    (workspace / ".git" / "info").mkdir(exist_ok=True)
    (workspace / ".git" / "info" / "exclude").write_text(GIT_EXCLUDE, encoding="utf-8")


def apply_patch(root: Path, repo: Path, patch_file: Path, limits: SandboxLimits) -> tuple[bool, str]:
    """Apply a patch the way swebench's harness does, each method in turn from a clean tree, in
    the sandbox: the submission is untrusted, so neither git nor patch reads it as root."""
    env = {**AGENT_ENV, **GIT_IDENTITY}
    output = ""
    for attempt, command in enumerate(GIT_APPLY_CMDS):
        clean = "{ git checkout -- . ; git clean -fdq ; } >/dev/null 2>&1 ; " if attempt else ""
        result = sandbox.run_sandboxed(
            f"{clean}{command} {patch_file}", root, timeout_s=SETUP_TIMEOUT_S, env=env, cwd=repo, limits=limits
        )
        output = result.output
        if result.returncode == 0 and not result.timed_out:
            return True, output
    return False, output
