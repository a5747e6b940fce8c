"""Runs driven by an outside harness (Terminal-Bench's `tb run` calls run_task per trial)."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from fake_llm_server import FakeLLMServer

from ctxpolicy.agent.cell import CELL_JSON, HarnessError, PlannedRun, run_cell_with_harness
from ctxpolicy.rundir import is_complete_run
from ctxpolicy.agent.terminal_bench import run_task
from ctxpolicy.agent.validate import run_dir_problems

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def config_path(tmp_path) -> Path:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["results_dir"] = str(tmp_path / "results")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_run_task_runs_one_trial_in_the_harness_environment(tmp_path, config_path):
    from minisweagent.environments.local import LocalEnvironment

    container = tmp_path / "container"
    container.mkdir()
    with FakeLLMServer() as server:
        record = run_task(
            instruction="Say hello.",
            environment=LocalEnvironment(cwd=str(container)),
            task_id="hello",
            attempt=2,
            run_dir=tmp_path / "cell" / "hello__a2",
            config=str(config_path),
            benchmark="local",
            model="qwen05b",
            policy="FC",
            endpoint=server.url,
            step_limit="5",
        )
    assert record["outcome"] == "submitted"
    assert record["identity"]["task_id"] == "hello" and record["identity"]["attempt"] == 2
    assert record["identity"]["stratum"] == "terminal-bench"
    assert record["settings"]["step_limit"] == 5
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in server.requests[0]["messages"][1]["content"]
    assert run_dir_problems(tmp_path / "cell" / "hello__a2") == []


FAKE_HARNESS = textwrap.dedent("""
    import sys
    from minisweagent.environments.local import LocalEnvironment
    from ctxpolicy.agent.terminal_bench import run_task
    kwargs = dict(arg.split("=", 1) for arg in sys.argv[2:])
    cell_dir = kwargs.pop("cell_dir")
    for task_id in sys.argv[1].split(","):
        run_task(instruction="List files.", environment=LocalEnvironment(cwd=cell_dir), task_id=task_id, attempt=1,
                 run_dir=f"{cell_dir}/{task_id}__a1", **kwargs)
""")


def test_a_cell_through_the_harness_writes_cell_json_and_skips_complete_runs(tmp_path, config_path):
    cell_dir = tmp_path / "cell"
    runs = [PlannedRun(cell_dir / f"{t}__a1", t, 1) for t in ("a", "b")]
    calls: list[list[str]] = []

    with FakeLLMServer() as server:

        def argv_for(task_ids: list[str]) -> list[str]:
            calls.append(task_ids)
            kwargs = {
                "cell_dir": str(cell_dir),
                "config": str(config_path),
                "benchmark": "local",
                "model": "qwen05b",
                "policy": "FC",
                "endpoint": server.url,
            }
            return [sys.executable, "-c", FAKE_HARNESS, ",".join(task_ids), *(f"{k}={v}" for k, v in kwargs.items())]

        results = run_cell_with_harness(runs, argv_for=argv_for, cell_dir=cell_dir, cell_info={"slug": "FC"})
        assert [r.outcome for r in results] == ["submitted", "submitted"]
        (cell_dir / "b__a1" / "run.json").unlink()
        again = run_cell_with_harness(runs, argv_for=argv_for, cell_dir=cell_dir, cell_info={"slug": "FC"})
    assert calls == [["a", "b"], ["b"]]
    assert [r.skipped for r in again] == [True, False]
    assert json.loads((cell_dir / CELL_JSON).read_text())["outcomes"] == {"submitted": 2}


def test_a_harness_that_leaves_runs_unfinished_fails_the_cell_without_cell_json(tmp_path):
    cell_dir = tmp_path / "cell"
    runs = [PlannedRun(cell_dir / "a__a1", "a", 1)]
    with pytest.raises(HarnessError, match="a__a1"):
        run_cell_with_harness(
            runs,
            argv_for=lambda ids: [sys.executable, "-c", "print('crashed')"],
            cell_dir=cell_dir,
            cell_info={"slug": "FC"},
        )
    assert not (cell_dir / CELL_JSON).exists() and not is_complete_run(cell_dir / "a__a1")
    assert "crashed" in (cell_dir / "harness.log").read_text()
