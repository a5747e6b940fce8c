"""The local adapter end to end: tasks, workspaces, the agent's sandboxed environment,
submissions, and `ctxpolicy evaluate` writing verdicts into run records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import require

from ctxpolicy.benchmarks import BenchmarkError, Task, get_adapter
from ctxpolicy.benchmarks.cli_evaluate import main as evaluate_main
from ctxpolicy.benchmarks.local_suite import repo_instances, terminal_tasks
from ctxpolicy.cli import build_parser
from ctxpolicy.cli import main as cli_main
from ctxpolicy.sandbox import bwrap_available, run_sandboxed

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "config.yaml"


@pytest.fixture
def adapter():
    cohorts = {"main": "config/cohorts/local_main.txt", "sweep": "config/cohorts/local_sweep.txt"}
    return get_adapter("local", {"adapter": "local", "environment": "bwrap", "cohorts": cohorts}, REPO)


@pytest.fixture
def sandbox_ok():
    require(bwrap_available(), "bubblewrap (Debian package bubblewrap) able to create a sandbox")


def write_run(cell: Path, task_id: str, attempt: int = 1, *, patch: str | None = None, complete: bool = True) -> Path:
    run_dir = cell / f"{task_id}__a{attempt}"
    run_dir.mkdir(parents=True)
    if patch is not None:
        (run_dir / "patch.diff").write_text(patch)
    record = {
        "schema_version": 1,
        "complete": complete,
        "outcome": "submitted",
        "submission": patch,
        "identity": {"benchmark": "local", "task_id": task_id, "attempt": attempt},
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    return run_dir


def test_tasks_of_a_cohort_keep_the_file_order(adapter):
    tasks = adapter.tasks("main")
    assert [t.task_id for t in tasks[:3]] == ["hello-world", "tinyweb-001", "tinylearn-001"]
    assert {t.kind for t in tasks} == {"repo", "terminal"}
    repo_task = next(t for t in tasks if t.task_id == "tinyweb-001")
    assert repo_task.stratum == "tinyweb" and "slugify" in repo_task.instruction
    assert repo_task.timeout_s is None
    hello = tasks[0]
    assert hello.kind == "terminal" and hello.timeout_s == 300 and "hello.txt" in hello.instruction
    with pytest.raises((AttributeError, TypeError, ValueError)):
        hello.task_id = "x"  # frozen


def test_submission_instructions_follow_mini_swe_agent(adapter):
    repo, terminal = adapter.task("tinysym-001"), adapter.task("hello-world")
    assert (
        "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"
        in adapter.submission_instructions(repo)
    )
    assert "git diff" not in adapter.submission_instructions(terminal)


def test_check_environment_refuses_what_the_machine_cannot_provide(tmp_path):
    docker = get_adapter("local", {"adapter": "local", "environment": "docker", "cohorts": {}}, tmp_path)
    with pytest.raises(BenchmarkError, match="'docker' is not supported by the local suite"):
        docker.check_environment()


def test_check_environment_names_bubblewrap_when_it_is_missing(tmp_path, monkeypatch):
    from ctxpolicy import sandbox

    monkeypatch.setattr(sandbox, "bwrap_available", lambda: False)
    with pytest.raises(BenchmarkError, match="bwrap is not available on this machine"):
        get_adapter("local", {"adapter": "local", "cohorts": {}}, tmp_path).check_environment()


def test_repo_workspace_is_a_fresh_commit_and_the_submission_is_its_diff(adapter, sandbox_ok, tmp_path):
    task = adapter.task("tinyweb-001")
    ws = tmp_path / "ws"
    adapter.prepare_workspace(task, ws)
    # asked as the sandbox user, who owns the workspace (git's ownership check must pass for it)
    head = run_sandboxed("git rev-parse HEAD", ws, timeout_s=30).output
    assert len(head.strip()) == 40, head
    other = tmp_path / "ws2"
    adapter.prepare_workspace(task, other)
    assert run_sandboxed("git rev-parse HEAD", other, timeout_s=30).output == head
    with pytest.raises(BenchmarkError, match="not empty"):
        adapter.prepare_workspace(task, ws)

    env = adapter.make_environment(task, ws, command_timeout_s=30)
    fix = 'sed -i \'s/"-", value)$/"-", value).lower()/\' tinyweb/text.py'
    assert env.execute({"command": fix})["returncode"] == 0
    assert env.execute({"command": "python -m pytest -q tests"})["returncode"] == 0  # leaves __pycache__ behind
    with pytest.raises(Exception) as submitted:
        env.execute({"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git add -A && git diff --cached"})
    assert type(submitted.value).__name__ == "Submitted"

    patch = adapter.collect_submission(task, ws, "garbage the model printed")
    assert patch.startswith("diff --git a/tinyweb/text.py b/tinyweb/text.py")
    assert "__pycache__" not in patch and ".pyc" not in patch
    verdict = adapter.grade_patch(task.task_id, patch, _dir(tmp_path / "log"))
    assert verdict.resolved


def test_terminal_workspace_runs_setup_in_the_sandbox(adapter, sandbox_ok, tmp_path):
    ws = tmp_path / "ws"
    adapter.prepare_workspace(adapter.task("session-code"), ws)
    assert (ws / "init.sh").is_file() and (ws / "server.log").is_file()
    env = adapter.make_environment(adapter.task("session-code"), ws, command_timeout_s=30)
    out = env.execute({"command": "./init.sh"})
    assert "Session code: K7-2291-QX" in out["output"]
    assert not (ws / "init.sh").exists(), "the code is shown once only"


def test_evaluate_writes_verdicts_and_the_cell_summary(sandbox_ok, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    cell = tmp_path / "cell"
    gold = write_run(cell, "tinysym-001", patch=repo_instances()["tinysym-001"]["patch"])
    empty = write_run(cell, "tinysym-001", attempt=2, patch="")
    broken = write_run(
        cell,
        "tinylearn-001",
        patch="diff --git a/nope.py b/nope.py\n--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n",
    )
    terminal = write_run(cell, "hello-world")
    (terminal / "workspace").mkdir()
    (terminal / "workspace" / "hello.txt").write_text("Hello, world!\n")
    unfinished = write_run(cell, "tinyweb-001", complete=False)

    args = build_parser().parse_args(["evaluate", "--config", str(CONFIG), "--benchmark", "local", str(cell)])
    assert evaluate_main(args) == 0
    assert "2/4 resolved" in capsys.readouterr().out
    verdicts = {d.name: json.loads((d / "verdict.json").read_text()) for d in (gold, empty, broken, terminal)}
    assert {k: v["resolved"] for k, v in verdicts.items()} == {
        gold.name: True,
        empty.name: False,
        broken.name: False,
        terminal.name: True,
    }
    assert all(Path(v["log"]).is_file() for v in verdicts.values())
    assert ">>>>> Patch Apply Failed" in Path(verdicts[broken.name]["log"]).read_text()
    assert not (unfinished / "verdict.json").exists()
    summary = json.loads((cell / "eval.json").read_text())
    assert (summary["n_runs"], summary["n_graded"], summary["n_resolved"], summary["n_incomplete"]) == (4, 4, 2, 1)
    assert summary["runs"][gold.name] == {
        "task_id": "tinysym-001",
        "attempt": 1,
        "resolved": True,
        "harness": "ctxpolicy-local/swebench-grading",
    }

    # graded runs are skipped unless --force
    (gold / "verdict.json").write_text(json.dumps({"resolved": False, "harness": "x", "report": {}, "log": ""}))
    assert evaluate_main(args) == 0
    assert json.loads((gold / "verdict.json").read_text())["harness"] == "x"
    forced = build_parser().parse_args(
        ["evaluate", "--config", str(CONFIG), "--benchmark", "local", str(cell), "--force"]
    )
    assert evaluate_main(forced) == 0
    assert json.loads((gold / "verdict.json").read_text())["resolved"] is True


def test_evaluate_rejects_unknown_tasks_and_benchmarks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    cell = tmp_path / "cell"
    write_run(cell, "no-such-task", patch="")
    monkeypatch.setattr("ctxpolicy.sandbox.bwrap_available", lambda: True)
    assert cli_main(["evaluate", "--config", str(CONFIG), "--benchmark", "local", str(cell)]) == 2
    assert "unknown task id 'no-such-task'" in capsys.readouterr().err
    assert cli_main(["evaluate", "--config", str(CONFIG), "--benchmark", "nope", str(cell)]) == 2
    assert "benchmarks.nope not found" in capsys.readouterr().err


def test_terminal_run_without_workspace_is_unresolved(adapter, tmp_path):
    verdict = adapter.grade_state("hello-world", tmp_path / "missing", _dir(tmp_path / "log"))
    assert not verdict.resolved and verdict.report["error"] == "workspace missing"


def test_task_dataclass_defaults():
    task = Task("t", "s", "repo", "do it")
    assert task.timeout_s is None and task.metadata == {}


def _dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_every_local_task_has_a_reference(adapter):
    # the terminal tasks' own solutions and the repository tasks' gold patches are the references
    assert all((t["path"] / "solution.sh").read_text().strip() for t in terminal_tasks().values())
    assert all(i["patch"].startswith("diff --git") for i in repo_instances().values())


def test_evaluate_grades_terminal_state_given_relative_paths(sandbox_ok, tmp_path, monkeypatch, capsys):
    """The workflow passes paths relative to the repository (results/runs/…), not absolute ones."""
    monkeypatch.chdir(tmp_path)
    cell = Path("results") / "cell"
    solved = write_run(cell, "hello-world")
    (solved / "workspace").mkdir()
    (solved / "workspace" / "hello.txt").write_text("Hello, world!\n")
    args = build_parser().parse_args(["evaluate", "--config", str(CONFIG), "--benchmark", "local", str(cell)])
    assert evaluate_main(args) == 0
    verdict = json.loads((solved / "verdict.json").read_text())
    assert verdict["resolved"] is True, Path(verdict["log"]).read_text()
