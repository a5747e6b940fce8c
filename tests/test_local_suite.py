"""The offline suite's content: its schema, its spread, and that every reference solution
resolves its task while doing nothing resolves none (graded by the real sandbox and swebench)."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import require

from ctxpolicy.benchmarks import get_adapter
from ctxpolicy.benchmarks.local_suite import REPOS_DIR, repo_instances, terminal_tasks
from ctxpolicy.sandbox import bwrap_available, run_sandboxed

SWEBENCH_FIELDS = {
    "instance_id",
    "repo",
    "base_commit",
    "problem_statement",
    "patch",
    "test_patch",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "version",
    "eval_script",
    "log_parser",
    "eval_type",
    "test_cmd",
}


@pytest.fixture(scope="module")
def adapter():
    return get_adapter("local", {"adapter": "local", "environment": "bwrap", "cohorts": {}}, Path("."))


@pytest.fixture
def sandbox_ok():
    require(bwrap_available(), "bubblewrap (Debian package bubblewrap) able to create a sandbox")


def test_repository_tasks_follow_the_swebench_instance_schema():
    instances = repo_instances()
    assert len(instances) >= 12
    assert Counter(i["stratum"] for i in instances.values()) == {"tinyweb": 5, "tinysym": 5, "tinylearn": 5}
    for iid, inst in instances.items():
        assert SWEBENCH_FIELDS <= set(inst), iid
        assert inst["FAIL_TO_PASS"], f"{iid}: a task needs at least one failing test"
        assert not set(inst["FAIL_TO_PASS"]) & set(inst["PASS_TO_PASS"])
        assert ">>>>> Start Test Output" in inst["eval_script"] and ">>>>> End Test Output" in inst["eval_script"]
        assert (REPOS_DIR / inst["snapshot"]).is_dir()
        assert "tests/" not in "".join(line for line in inst["patch"].splitlines() if line.startswith("+++")), iid


def test_difficulty_spreads_from_one_line_fixes_to_multi_file_changes():
    instances = repo_instances().values()
    assert Counter(i["difficulty"] for i in instances) == {"easy": 5, "medium": 7, "hard": 3}
    files_changed = {i["instance_id"]: i["patch"].count("diff --git") for i in instances}
    assert min(files_changed.values()) == 1 and max(files_changed.values()) >= 2
    one_line = [i for i in instances if i["difficulty"] == "easy"]
    assert all(
        sum(line.startswith("+") and not line.startswith("+++") for line in i["patch"].splitlines()) <= 2
        for i in one_line
    )


def test_terminal_tasks_follow_the_terminal_bench_layout():
    tasks = terminal_tasks()
    assert len(tasks) >= 8
    for tid, task in tasks.items():
        path: Path = task["path"]
        for name in ("task.yaml", "setup.sh", "solution.sh", "run-tests.sh", "tests/test_outputs.py"):
            assert (path / name).is_file(), f"{tid}: {name}"
        assert task["instruction"] and task["parser_name"] == "pytest"
        assert task["difficulty"] in {"easy", "medium", "hard"}


def test_snapshot_test_suites_are_fast_and_green(sandbox_ok, tmp_path):
    for snapshot in sorted(REPOS_DIR.iterdir()):
        ws = tmp_path / snapshot.name
        shutil.copytree(snapshot, ws)
        result = run_sandboxed(
            "python -m pytest -q -p no:cacheprovider tests", ws, timeout_s=60, env={"PYTHONDONTWRITEBYTECODE": "1"}
        )
        assert result.returncode == 0, result.output
        assert result.duration_s < 10


def test_every_reference_patch_resolves_and_an_empty_patch_resolves_none(adapter, sandbox_ok, tmp_path):
    def grade(iid):
        inst = repo_instances()[iid]
        gold = adapter.grade_patch(iid, inst["patch"], _dir(tmp_path / f"{iid}-gold"))
        return iid, inst, gold, adapter.grade_patch(iid, "", _dir(tmp_path / f"{iid}-empty"))

    for iid, inst, gold, empty in _in_parallel(grade, repo_instances()):
        assert gold.resolved, f"{iid}: reference patch does not resolve: {Path(gold.log).read_text()[-2000:]}"
        assert not empty.resolved, f"{iid}: resolved without any change"
        tests = gold.report["tests_status"]
        assert sorted(tests["FAIL_TO_PASS"]["success"]) == sorted(inst["FAIL_TO_PASS"])
        assert empty.report["tests_status"]["FAIL_TO_PASS"]["failure"], iid


def test_every_reference_solution_solves_its_terminal_task_and_doing_nothing_none(adapter, sandbox_ok, tmp_path):
    def grade(tid):
        task = terminal_tasks()[tid]
        workspace = tmp_path / tid / "workspace"
        adapter.prepare_workspace(adapter.task(tid), workspace)
        # grading copies the state it grades, so the freshly prepared workspace is graded first
        # (doing nothing) and then solved and graded again: one setup serves both verdicts
        bad = adapter.grade_state(tid, workspace, _dir(tmp_path / f"{tid}-log-untouched"))
        solution = run_sandboxed((task["path"] / "solution.sh").read_text(), workspace, timeout_s=60)
        assert solution.returncode == 0, f"{tid}: {solution.output}"
        return tid, adapter.grade_state(tid, workspace, _dir(tmp_path / f"{tid}-log-solved")), bad

    for tid, good, bad in _in_parallel(grade, terminal_tasks()):
        assert good.resolved, f"{tid}: {Path(good.log).read_text()[-2000:]}"
        assert not bad.resolved, f"{tid}: solved by doing nothing"
        assert good.report["tests_status"] and set(good.report["tests_status"].values()) == {"PASSED"}


def test_grading_reports_are_plain_json(adapter, sandbox_ok, tmp_path):
    inst = repo_instances()["tinyweb-001"]
    verdict = adapter.grade_patch("tinyweb-001", inst["patch"], _dir(tmp_path / "log"))
    assert json.loads(json.dumps(verdict.to_json()))["resolved"] is True
    assert verdict.harness == "ctxpolicy-local/swebench-grading"


def _in_parallel(fn, ids):
    # each grading is a handful of short subprocesses; overlap them to keep the test quick
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(fn, sorted(ids)))


def _dir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
