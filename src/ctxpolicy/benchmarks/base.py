"""The benchmark adapter interface: tasks, verdicts, errors, and the helpers every adapter shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ctxpolicy.errors import UsageError
from ctxpolicy import rundir

TASK_KINDS = ("repo", "terminal")
ENVIRONMENT_KINDS = ("bwrap", "docker", "apptainer")
SUBMIT_COMMAND = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"


class BenchmarkError(UsageError):
    """A user-facing problem with a benchmark, its cohort, its data or its environment."""


@dataclass(frozen=True)
class Task:
    task_id: str
    stratum: str
    kind: str  # "repo" | "terminal"
    instruction: str
    timeout_s: int | None = None  # None: the benchmark's default
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Verdict:
    resolved: bool
    harness: str
    report: dict[str, Any]
    log: str

    def to_json(self) -> dict[str, Any]:
        return {"resolved": self.resolved, "harness": self.harness, "report": self.report, "log": self.log}


class BenchmarkAdapter(Protocol):
    name: str

    def tasks(self, cohort: str) -> list[Task]: ...

    def check_environment(self) -> None: ...

    def prepare_workspace(self, task: Task, workspace: Path) -> None: ...

    def release_workspace(self, task: Task, workspace: Path) -> None: ...  # the run is over

    def make_environment(self, task: Task, workspace: Path, command_timeout_s: int) -> Any: ...

    def submission_instructions(self, task: Task) -> str: ...

    def collect_submission(self, task: Task, workspace: Path, submission_text: str) -> str: ...

    def evaluate(self, run_dirs: list[Path], log_dir: Path) -> dict[Path, Verdict]: ...


REPO_SUBMISSION = (
    "When you are done, submit your changes with exactly this command, on its own:\n"
    f"{SUBMIT_COMMAND} && git add -A && git diff --cached\n"
    "Do not modify the tests. You cannot continue working after you submit."
)
TERMINAL_SUBMISSION = (
    "When the task is complete, finish with exactly this command, on its own:\n"
    f"{SUBMIT_COMMAND}\n"
    "The final state of the files is what gets checked; you cannot continue working after you submit."
)


def submission_instructions_for(task: Task) -> str:
    return REPO_SUBMISSION if task.kind == "repo" else TERMINAL_SUBMISSION


def write_verdict(run_dir: Path, verdict: Verdict) -> None:
    rundir.write_verdict(run_dir, verdict.to_json())


@dataclass(frozen=True)
class RunRecord:
    """What grading needs from a run directory (read through ``ctxpolicy.rundir``)."""

    run_dir: Path
    task_id: str
    attempt: int
    submission: str | None
    patch: str | None

    @property
    def model_patch(self) -> str:
        """The repository submission: patch.diff when written, else run.json's `submission`."""
        return self.patch if self.patch is not None else (self.submission or "")


def read_run(run_dir: Path) -> RunRecord:
    run_dir = Path(run_dir)
    try:
        record = rundir.read_run_json(run_dir)
    except rundir.RunRecordError as exc:
        raise BenchmarkError(str(exc)) from None
    identity = record.get("identity") or {}
    task_id = identity.get("task_id")
    if not task_id:
        raise BenchmarkError(f"{run_dir / rundir.RUN_JSON}: field identity.task_id is missing")
    patch_file = run_dir / rundir.PATCH_DIFF
    return RunRecord(
        run_dir=run_dir,
        task_id=task_id,
        attempt=int(identity.get("attempt") or 1),
        submission=record.get("submission"),
        patch=patch_file.read_text(encoding="utf-8") if patch_file.is_file() else None,
    )
