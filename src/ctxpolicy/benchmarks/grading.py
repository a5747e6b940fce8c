"""Grading with swebench's own code: eval scripts with the SWE-bench log markers, test specs
built by `swebench.harness.utils.make_test_spec`, and reports from
`swebench.harness.grading.get_eval_report`. Terminal tasks are judged as Terminal-Bench judges
them: every test reported by the pytest parser must pass.

Pure functions only; running the scripts is the adapters' job.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from swebench.harness.constants import (
    APPLY_PATCH_FAIL,
    APPLY_PATCH_PASS,
    END_TEST_OUTPUT,
    START_TEST_OUTPUT,
    TestStatus,
)
from swebench.harness.grading import get_eval_report
from swebench.harness.log_parsers import PARSER_REGISTRY
from swebench.harness.utils import make_test_spec

# the heredoc delimiter SWE-bench's own eval scripts use
HEREDOC = "EOF_114329324912"


def make_eval_script(instance: dict[str, Any]) -> str:
    """The SWE-bench eval script for a local instance, run in the repository root.

    Same shape as swebench's: reset the test files, apply the test patch, run the test command
    between the start and end markers, reset the test files again. The base is HEAD: the
    workspace is a fresh commit of the snapshot with the submission applied on top, uncommitted.
    """
    files = " ".join(shlex.quote(f) for f in instance["test_files"])
    reset = f"git checkout HEAD -- {files}"
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uxo pipefail",
            reset,
            f"git apply -v - <<'{HEREDOC}'",
            instance["test_patch"].rstrip("\n"),
            HEREDOC,
            f": '{START_TEST_OUTPUT}'",
            f"{instance['test_cmd']} {files}",
            f": '{END_TEST_OUTPUT}'",
            reset,
            "",
        ]
    )


def apply_log(applied: bool, output: str) -> str:
    """The patch-application lines swebench writes before the test output."""
    return f"{APPLY_PATCH_PASS if applied else APPLY_PATCH_FAIL}:\n{output}\n"


def grade_repo_log(instance: dict[str, Any], model_patch: str | None, log_path: Path) -> dict[str, Any]:
    """swebench's report for one instance: {'resolved': bool, 'tests_status': {...}, ...}."""
    spec = make_test_spec(instance)
    prediction = {"instance_id": instance["instance_id"], "model_patch": model_patch, "model_name_or_path": "ctxpolicy"}
    report = get_eval_report(spec, prediction, str(log_path), include_tests_status=True)
    return report[instance["instance_id"]]


def pytest_statuses(log: str) -> dict[str, str]:
    return PARSER_REGISTRY["parse_log_pytest"](log, None)


def grade_terminal_log(log: str, returncode: int) -> dict[str, Any]:
    """Terminal-Bench's rule: resolved when the tests ran and every parsed test passed."""
    statuses = pytest_statuses(log)
    passing = {TestStatus.PASSED.value, TestStatus.XFAIL.value}
    resolved = bool(statuses) and returncode == 0 and all(s in passing for s in statuses.values())
    return {"resolved": resolved, "tests_status": statuses, "returncode": returncode}
