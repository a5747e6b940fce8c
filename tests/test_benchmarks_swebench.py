"""SWE-bench Verified without Docker or the hub: instance loading from local files, images,
Apptainer and harness command lines, environment configs, and grading of recorded logs with
swebench's own code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxpolicy.benchmarks import BenchmarkError, get_adapter
from ctxpolicy.benchmarks import containers
from ctxpolicy.benchmarks.base import RunRecord
from ctxpolicy.benchmarks.grading import grade_repo_log
from ctxpolicy.benchmarks.instances import load_instances
from ctxpolicy.benchmarks.swe_bench import (
    harness_report_path,
    predictions_by_attempt,
    run_evaluation_argv,
)

SKLEARN = "scikit-learn__scikit-learn-10297"
DJANGO = "django__django-11099"
SKLEARN_F2P = ["sklearn/linear_model/tests/test_ridge.py::test_ridge_classifier_cv_store_cv_values"]
SKLEARN_P2P = [
    "sklearn/linear_model/tests/test_ridge.py::test_ridge",
    "sklearn/linear_model/tests/test_ridge.py::test_ridgecv_store_cv_values",
]
DJANGO_F2P = ["test_unicode_validator (auth_tests.test_validators.UsernameValidatorsTests)"]
DJANGO_P2P = ["test_ascii_validator (auth_tests.test_validators.UsernameValidatorsTests)"]


def instance(iid: str, repo: str, f2p: list[str], p2p: list[str], parser: str) -> dict:
    return {
        "instance_id": iid,
        "repo": repo,
        "version": "0.20",
        "base_commit": "b90661d6a46aa3619d3eec94d5281f5888add501",
        "problem_statement": f"problem of {iid}",
        "hints_text": "",
        "created_at": "2018-01-01",
        "patch": "diff --git a/x b/x\n",
        "test_patch": "diff --git a/t b/t\n",
        "FAIL_TO_PASS": json.dumps(f2p),
        "PASS_TO_PASS": json.dumps(p2p),
        "environment_setup_commit": "x",
        "image": f"swebench/sweb.eval.x86_64.{iid.replace('__', '_1776_')}:latest",
        "eval_script": "#!/bin/bash\nset -uxo pipefail\ncd /testbed\n: '>>>>> Start Test Output'\npytest -rA\n: '>>>>> End Test Output'\n",
        "log_parser": parser,
        "eval_type": "pass_and_fail",
    }


INSTANCES = [
    instance(SKLEARN, "scikit-learn/scikit-learn", SKLEARN_F2P, SKLEARN_P2P, "parse_log_pytest"),
    instance(DJANGO, "django/django", DJANGO_F2P, DJANGO_P2P, "parse_log_django"),
]


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "verified.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in INSTANCES))
    return path


def adapter_for(tmp_path: Path, dataset: Path | None, environment: str = "apptainer"):
    (tmp_path / "main.txt").write_text(f"{DJANGO}\n{SKLEARN}\n")
    cfg = {
        "adapter": "swebench",
        "environment": environment,
        "cohorts": {"main": "main.txt"},
        "dataset": {"path": str(dataset)} if dataset else None,
        "apptainer": {"sif_cache": str(tmp_path / "sif"), "executable": "apptainer"},
    }
    return get_adapter("swebench", cfg, tmp_path)


def test_instances_load_from_a_local_jsonl(jsonl):
    loaded = load_instances("swebench", "SWE-bench/SWE-bench_Verified", "test", jsonl, [SKLEARN])
    assert list(loaded) == [SKLEARN]
    assert json.loads(loaded[SKLEARN]["FAIL_TO_PASS"]) == SKLEARN_F2P


def test_instances_load_from_a_local_parquet(tmp_path):
    import pandas as pd

    path = tmp_path / "verified.parquet"
    pd.DataFrame(INSTANCES).to_parquet(path)
    loaded = load_instances("swebench", "SWE-bench/SWE-bench_Verified", "test", path)
    assert set(loaded) == {SKLEARN, DJANGO}


def test_unknown_ids_in_the_dataset_are_an_error(jsonl):
    with pytest.raises(BenchmarkError, match="1 id\\(s\\) not in .*: django__django-99999"):
        load_instances("swebench", "x", "test", jsonl, ["django__django-99999"])


def test_a_missing_local_copy_names_both_ways_to_provide_the_dataset(tmp_path):
    with pytest.raises(BenchmarkError) as err:
        load_instances("swebench", "SWE-bench/SWE-bench_Verified", "test", tmp_path / "missing.jsonl")
    message = str(err.value)
    assert "missing.jsonl does not exist" in message
    assert "benchmarks.swebench.dataset.path" in message and "hub" in message


# in a fresh interpreter: huggingface_hub and datasets read HF_HUB_OFFLINE and HF_HOME when they are
# imported, so in a worker where another test imported them first the variables came too late:
# the hub was asked over the network (five retries, about 25 s) and the machine's own cache read
UNREACHABLE_HUB = """
from ctxpolicy.benchmarks import BenchmarkError
from ctxpolicy.benchmarks.instances import load_instances
try:
    load_instances("swebench", "SWE-bench/SWE-bench_Verified", "test", None)
except BenchmarkError as err:
    print(err)
else:
    raise SystemExit("the hub dataset was loaded")
"""


def test_an_unreachable_hub_names_both_ways_to_provide_the_dataset(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", UNREACHABLE_HUB], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    message = done.stdout
    assert "the hub dataset SWE-bench/SWE-bench_Verified cannot be loaded" in message
    assert "benchmarks.swebench.dataset.path" in message


def test_tasks_come_from_the_cohort_with_the_dataset_problem_statements(tmp_path, jsonl):
    tasks = adapter_for(tmp_path, jsonl).tasks("main")
    assert [(t.task_id, t.stratum, t.kind) for t in tasks] == [
        (DJANGO, "django", "repo"),
        (SKLEARN, "scikit-learn", "repo"),
    ]
    assert tasks[1].instruction == f"problem of {SKLEARN}"
    assert tasks[1].metadata["image"] == "swebench/sweb.eval.x86_64.scikit-learn_1776_scikit-learn-10297:latest"


def test_image_names_follow_the_dataset_or_the_swebench_scheme():
    assert containers.swebench_image({"instance_id": "x", "image": "reg/img:1"}) == "reg/img:1"
    assert (
        containers.swebench_image({"instance_id": "django__django-11099"})
        == "docker.io/swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    )


def test_sif_files_are_cached_per_image(tmp_path):
    image = "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    sif = containers.sif_path(image, tmp_path)
    assert sif == tmp_path / "swebench_sweb.eval.x86_64.django_1776_django-11099_latest.sif"
    assert containers.sif_path("docker://" + image, tmp_path) == sif
    assert containers.apptainer_build_argv(image, sif) == ["apptainer", "build", str(sif), "docker://" + image]


def test_environment_configs_for_mini_swe_agent(tmp_path, jsonl):
    adapter = adapter_for(tmp_path, jsonl)
    task = adapter.tasks("main")[0]
    config = adapter.environment_config(task, 60)
    assert config["environment_class"] == "singularity" and config["cwd"] == "/testbed"
    assert config["image"] == "docker://" + task.metadata["image"]  # no SIF converted yet
    sif = containers.sif_path(task.metadata["image"], tmp_path / "sif")
    sif.parent.mkdir(parents=True)
    sif.write_bytes(b"")
    assert adapter.environment_config(task, 60)["image"] == str(sif)
    docker = adapter_for(tmp_path, jsonl, environment="docker").environment_config(task, 60)
    assert docker["environment_class"] == "docker" and docker["image"] == task.metadata["image"]
    assert docker["timeout"] == 60 and docker["env"]["BASH_ENV"] == "/root/.bashrc"


def test_apptainer_eval_command_binds_the_patch_and_eval_script(tmp_path, jsonl):
    argv = adapter_for(tmp_path, jsonl).apptainer_eval_argv(Path("/c/x.sif"), Path("/l/patch.diff"), Path("/l/eval.sh"))
    assert argv[:2] == ["apptainer", "exec"]
    assert "--writable-tmpfs" in argv and "--fakeroot" in argv
    assert "/l/patch.diff:/tmp/patch.diff:ro" in argv and "/l/eval.sh:/eval.sh:ro" in argv
    assert argv[-4:-1] == ["/c/x.sif", "bash", "-c"]
    script = argv[-1]
    assert ">>>>> Applied Patch" in script and ">>>>> Patch Apply Failed" in script and "/eval.sh" in script


def test_check_environment_names_what_is_missing(tmp_path, jsonl, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither docker nor apptainer on it
    with pytest.raises(BenchmarkError, match="apptainer is not available here"):
        adapter_for(tmp_path, jsonl).check_environment()
    with pytest.raises(BenchmarkError, match="docker is not available here \\(docker is not installed\\)"):
        adapter_for(tmp_path, jsonl, environment="docker").check_environment()
    with pytest.raises(BenchmarkError, match="'bwrap' cannot run SWE-bench images"):
        adapter_for(tmp_path, jsonl, environment="bwrap").check_environment()


def test_harness_invocation_one_per_attempt(tmp_path):
    runs = [
        RunRecord(tmp_path / "a__a1", SKLEARN, 1, "p1", None),
        RunRecord(tmp_path / "b__a1", DJANGO, 1, None, "p2"),
        RunRecord(tmp_path / "a__a2", SKLEARN, 2, "p3", None),
    ]
    grouped = predictions_by_attempt(runs)
    assert sorted(grouped) == [1, 2]
    assert grouped[1][1] == {"instance_id": DJANGO, "model_name_or_path": "ctxpolicy", "model_patch": "p2"}
    argv = run_evaluation_argv(
        "data/verified.parquet",
        "test",
        tmp_path / "p.jsonl",
        "cell__a1",
        max_workers=8,
        timeout=1800,
        report_dir=tmp_path,
    )
    assert argv[1:3] == ["-m", "swebench.harness.run_evaluation"]
    assert argv[argv.index("--predictions_path") + 1] == str(tmp_path / "p.jsonl")
    assert argv[argv.index("--dataset_name") + 1] == "data/verified.parquet"
    assert (
        harness_report_path(tmp_path, "cell__a1", SKLEARN)
        == tmp_path / "logs/run_evaluation/cell__a1/ctxpolicy" / SKLEARN / "report.json"
    )


def test_verdicts_from_the_harness_reports(tmp_path, jsonl):
    adapter = adapter_for(tmp_path, jsonl, environment="docker")
    report_file = harness_report_path(tmp_path, "r", SKLEARN)
    report_file.parent.mkdir(parents=True)
    report_file.write_text(json.dumps({SKLEARN: {"resolved": True, "patch_exists": True}}))
    run = RunRecord(tmp_path / "run", SKLEARN, 1, None, "diff")
    assert adapter.verdict_from_harness(tmp_path, "r", run).resolved
    missing = adapter.verdict_from_harness(tmp_path, "r", RunRecord(tmp_path / "run", DJANGO, 1, "", None))
    assert not missing.resolved and missing.report["error"] == "empty patch"


def recorded_log(tmp_path: Path, body: str, exit_code: int = 0, applied: bool = True) -> Path:
    head = ">>>>> Applied Patch:\npatching file x\n" if applied else ">>>>> Patch Apply Failed:\nerror: patch failed\n"
    log = (
        f"{head}+ cd /testbed\n+ : '>>>>> Start Test Output'\n{body}\n+ : '>>>>> End Test Output'\n"
        f">>>>> Test Exit Code: {exit_code}\n"
    )
    path = tmp_path / "test_output.txt"
    path.write_text(log)
    return path


def test_grading_a_recorded_pytest_log_with_swebench(tmp_path):
    passed = "\n".join(f"PASSED {t}" for t in SKLEARN_F2P + SKLEARN_P2P)
    report = grade_repo_log(INSTANCES[0], "diff", recorded_log(tmp_path, passed))
    assert report["resolved"] is True
    assert report["tests_status"]["FAIL_TO_PASS"]["success"] == SKLEARN_F2P
    failed = passed.replace(f"PASSED {SKLEARN_F2P[0]}", f"FAILED {SKLEARN_F2P[0]} - AssertionError")
    report = grade_repo_log(INSTANCES[0], "diff", recorded_log(tmp_path, failed, exit_code=1))
    assert report["resolved"] is False
    assert report["tests_status"]["FAIL_TO_PASS"]["failure"] == SKLEARN_F2P
    regressed = passed.replace(f"PASSED {SKLEARN_P2P[0]}", f"FAILED {SKLEARN_P2P[0]}")
    assert grade_repo_log(INSTANCES[0], "diff", recorded_log(tmp_path, regressed, exit_code=1))["resolved"] is False


def test_grading_a_recorded_django_log_with_swebench(tmp_path):
    body = "\n".join(f"{t} ... ok" for t in DJANGO_F2P + DJANGO_P2P)
    assert grade_repo_log(INSTANCES[1], "diff", recorded_log(tmp_path, body))["resolved"] is True
    body = f"{DJANGO_F2P[0]} ... FAIL\n{DJANGO_P2P[0]} ... ok"
    assert grade_repo_log(INSTANCES[1], "diff", recorded_log(tmp_path, body, exit_code=1))["resolved"] is False


def test_a_patch_that_did_not_apply_is_not_resolved(tmp_path):
    body = "\n".join(f"PASSED {t}" for t in SKLEARN_F2P + SKLEARN_P2P)
    report = grade_repo_log(INSTANCES[0], "diff", recorded_log(tmp_path, body, applied=False))
    assert report["resolved"] is False and report["patch_successfully_applied"] is False


def test_apptainer_evaluation_refuses_an_empty_patch_without_running(tmp_path, jsonl):
    adapter = adapter_for(tmp_path, jsonl)
    verdict = adapter.evaluate_apptainer(RunRecord(tmp_path / "r", SKLEARN, 1, "", None), tmp_path / "log")
    assert not verdict.resolved and verdict.harness == "swebench-eval-script/apptainer"
    assert not (tmp_path / "sif").exists()


def test_apptainer_evaluation_grades_what_the_container_printed(tmp_path, jsonl):
    """The container runtime is replaced by a script that prints a recorded log (own logic only)."""
    passed = "\n".join(f"PASSED {t}" for t in SKLEARN_F2P + SKLEARN_P2P)
    fake = tmp_path / "bin" / "apptainer"
    fake.parent.mkdir()
    log = recorded_log(tmp_path, passed)
    fake.write_text(f'#!/bin/sh\nif [ "$1" = build ]; then : > "$2"; exit 0; fi\ncat {log}\n')
    fake.chmod(0o755)
    adapter = adapter_for(tmp_path, jsonl)
    adapter.cfg["apptainer"]["executable"] = str(fake)
    run_dir = tmp_path / "cell" / f"{SKLEARN}__a1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(
        json.dumps(
            {"complete": True, "identity": {"task_id": SKLEARN, "attempt": 1}, "submission": "diff --git a/x b/x\n"}
        )
    )
    verdicts = adapter.evaluate([run_dir], tmp_path / "cell" / "eval_logs")
    assert verdicts[run_dir].resolved
    written = json.loads((run_dir / "verdict.json").read_text())
    assert written["resolved"] is True and written["harness"] == "swebench-eval-script/apptainer"
    assert (tmp_path / "cell" / "eval_logs" / run_dir.name / "eval.sh").read_text().startswith("#!/bin/bash")
    assert os.path.isfile(containers.sif_path(INSTANCES[0]["image"], tmp_path / "sif"))
