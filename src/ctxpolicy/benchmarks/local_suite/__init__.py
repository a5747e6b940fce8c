"""The offline task suite: three tiny Python code bases with SWE-bench-style instances, and
terminal tasks in the Terminal-Bench layout. Everything here is package data read from disk.

    repos/<codebase>/              the snapshot every instance of that code base starts from
    tasks/<instance_id>/           swebench's task-repo layout (swebench.task.repo): task.yaml,
                                   tests.json, problem_statement.md, gold.patch, test.patch;
                                   the eval script is derived from task.yaml (test_cmd, test_files)
    terminal/<task_id>/            Terminal-Bench's layout: task.yaml, solution.sh, run-tests.sh,
                                   tests/test_outputs.py; setup.sh stands in for the Dockerfile
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

SUITE_DIR = Path(__file__).resolve().parent
REPOS_DIR = SUITE_DIR / "repos"
TASKS_DIR = SUITE_DIR / "tasks"
TERMINAL_DIR = SUITE_DIR / "terminal"

# dataset columns stored as their own files (the names swebench.task.repo uses)
INSTANCE_FILES = {"patch": "gold.patch", "test_patch": "test.patch", "problem_statement": "problem_statement.md"}


def _read(path: Path) -> str:
    with open(path, newline="", encoding="utf-8") as fh:  # keep a patch's bytes as they are
        return fh.read()


def load_repo_instance(task_dir: Path) -> dict[str, Any]:
    """One repository task as a SWE-bench instance dict (plus its snapshot and test command)."""
    from ctxpolicy.benchmarks.grading import make_eval_script

    instance = yaml.safe_load(_read(task_dir / "task.yaml"))
    for column, filename in INSTANCE_FILES.items():
        instance[column] = _read(task_dir / filename)
    instance.update(json.loads(_read(task_dir / "tests.json")))
    instance["hints_text"] = ""
    instance["eval_script"] = make_eval_script(instance)
    return instance


@lru_cache(maxsize=1)
def repo_instances() -> dict[str, dict[str, Any]]:
    return {d.name: load_repo_instance(d) for d in sorted(TASKS_DIR.iterdir()) if (d / "task.yaml").is_file()}


def load_terminal_task(task_dir: Path) -> dict[str, Any]:
    task = yaml.safe_load(_read(task_dir / "task.yaml"))
    task["task_id"] = task_dir.name
    task["path"] = task_dir
    return task


@lru_cache(maxsize=1)
def terminal_tasks() -> dict[str, dict[str, Any]]:
    return {d.name: load_terminal_task(d) for d in sorted(TERMINAL_DIR.iterdir()) if (d / "task.yaml").is_file()}


def snapshot_dir(instance: dict[str, Any]) -> Path:
    return REPOS_DIR / instance["snapshot"]
