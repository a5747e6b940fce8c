"""run-cell as the Snakemake DAG needs it: no server for a complete cell, one run-cell per cell,
stale thresholds reported or redone (in process, against the fake endpoint)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agent_helpers import TASKS, help_text, offline_study
from fake_llm_server import FakeLLMServer

from ctxpolicy import cli
from ctxpolicy.agent import cell as agent_cell
from ctxpolicy.agent import plan
from ctxpolicy.agent.cell import PlannedRun, set_aside, survey
from ctxpolicy.agent.cell_lock import cell_lock
from ctxpolicy.rundir import read_json, write_record


def _complete(run_dir: Path, threshold: int | None, outcome: str = "submitted") -> PlannedRun:
    write_record(
        run_dir / "run.json",
        {"complete": True, "outcome": outcome, "error": None, "identity": {"threshold_tokens": threshold}},
    )
    return PlannedRun(run_dir, run_dir.name.split("__")[0], 1)


def test_survey_sorts_runs_into_done_pending_and_stale(tmp_path):
    same = _complete(tmp_path / "a__a1", 2000)
    other = _complete(tmp_path / "b__a1", 1500)
    failed = _complete(tmp_path / "c__a1", 2000, outcome="error")
    missing = PlannedRun(tmp_path / "d__a1", "d", 1)
    runs = [same, other, failed, missing]

    kept = survey(runs, threshold=2000)
    assert set(kept.done) == {same.run_dir, other.run_dir, failed.run_dir}
    assert kept.pending == [missing]
    assert [(s.run_dir, s.threshold_tokens, s.expected) for s in kept.stale] == [(other.run_dir, 1500, 2000)]
    assert kept.kept_stale == kept.stale

    redo = survey(runs, threshold=2000, redo_errors=True, redo_stale=True)
    assert set(redo.done) == {same.run_dir}
    assert redo.pending == [other, failed, missing] and redo.kept_stale == []

    assert survey(runs).stale == []  # a cell declaring no threshold has no stale runs


def test_set_aside_never_overwrites_an_earlier_stale_run(tmp_path):
    for n in range(2):
        run = _complete(tmp_path / "a__a1", 1000 + n)
        target = set_aside(run.run_dir, tmp_path)
        assert read_json(target / "run.json")["identity"]["threshold_tokens"] == 1000 + n
    assert sorted(p.name for p in (tmp_path / "stale").iterdir()) == ["a__a1", "a__a1.2"]
    assert not (tmp_path / "a__a1").exists()


@pytest.fixture
def study(tmp_path):
    return offline_study(tmp_path)


def _argv(study: Path, cell_dir: Path, thresholds: Path, *extra: str) -> list[str]:
    return [
        "run-cell",
        "--config",
        str(study),
        "--benchmark",
        "local",
        "--model",
        "qwen05b",
        "--policy",
        "TR/Th/0.5",
        "--setting",
        "primary",
        "--thresholds",
        str(thresholds),
        "--concurrency",
        "2",
        "--no-progress",
        "--out",
        str(cell_dir),
        *extra,
    ]


def _thresholds(path: Path, primary: int) -> Path:
    path.write_text(json.dumps({"tight": primary // 2, "primary": primary, "loose": primary * 2}))
    return path


def test_complete_cell_starts_no_server_and_rewrites_cell_json(study, tmp_path, monkeypatch):
    cell_dir = tmp_path / "cell"
    thresholds = _thresholds(tmp_path / "thresholds.json", 2000)
    with FakeLLMServer() as server:
        assert cli.main(_argv(study, cell_dir, thresholds, "--endpoint", server.url)) == 0
    (cell_dir / "cell.json").unlink()

    def no_server(*args, **kwargs):
        raise AssertionError("a model server was started for a complete cell")

    monkeypatch.setattr(agent_cell, "model_endpoint", no_server)
    assert cli.main(_argv(study, cell_dir, thresholds)) == 0  # no --endpoint: would start llama.cpp
    cell = read_json(cell_dir / "cell.json")
    assert all(r["skipped"] and r["outcome"] == "submitted" for r in cell["runs"])
    assert cell["endpoint"] == {"kind": "endpoint", "version": None, "url": server.url}
    assert cell["stale_threshold_runs"] == [] and cell["threshold_tokens"] == 2000


def test_stale_threshold_runs_are_kept_and_listed_then_redone_with_redo_stale(study, tmp_path, capsys):
    cell_dir = tmp_path / "cell"
    thresholds = _thresholds(tmp_path / "thresholds.json", 2000)
    with FakeLLMServer() as server:
        assert cli.main(_argv(study, cell_dir, thresholds, "--endpoint", server.url)) == 0
        first = len(server.requests)
        _thresholds(thresholds, 3000)  # recalibrated
        capsys.readouterr()

        assert cli.main(_argv(study, cell_dir, thresholds, "--endpoint", server.url)) == 0
        assert len(server.requests) == first  # kept, not rerun
        err = capsys.readouterr().err
        assert err.count("stale threshold") == 2 and "threshold_tokens 2000" in err and "3000" in err
        cell = read_json(cell_dir / "cell.json")
        assert cell["stale_threshold_runs"] == [{"run_dir": f"{t}__a1", "threshold_tokens": 2000} for t in TASKS]

        assert cli.main(_argv(study, cell_dir, thresholds, "--endpoint", server.url, "--redo-stale")) == 0
        assert len(server.requests) > first
    cell = read_json(cell_dir / "cell.json")
    assert cell["stale_threshold_runs"] == []
    assert [r["moved_to"] for r in cell["redone_stale_runs"]] == [f"stale/{t}__a1" for t in TASKS]
    for task in TASKS:
        assert read_json(cell_dir / f"{task}__a1" / "run.json")["identity"]["threshold_tokens"] == 3000
        assert read_json(cell_dir / "stale" / f"{task}__a1" / "run.json")["identity"]["threshold_tokens"] == 2000


def test_a_second_run_cell_on_a_locked_cell_fails_at_once_naming_dir_and_pid(study, tmp_path, capsys):
    cell_dir = tmp_path / "cell"
    thresholds = _thresholds(tmp_path / "thresholds.json", 2000)
    with cell_lock(cell_dir):
        code = cli.main(_argv(study, cell_dir, thresholds, "--endpoint", "http://127.0.0.1:9/v1"))
    err = capsys.readouterr().err
    assert code == 1 and str(cell_dir) in err and f"pid {os.getpid()}" in err
    assert not (cell_dir / "cell.json").exists()


def test_run_cell_help_documents_lock_signals_and_stale_runs(capsys):
    text = help_text(capsys, "run-cell")
    for needle in ("--redo-stale", "stale_threshold_runs", ".lock", "SIGTERM", "130/143", "no model server"):
        assert needle in text, needle


@pytest.mark.parametrize("option", ["--concurrency", "--attempts"])
def test_zero_concurrency_or_attempts_is_a_clear_error_not_the_default(study, tmp_path, capsys, option):
    cell_dir = tmp_path / "cell"
    argv = [
        "run-cell",
        "--config",
        str(study),
        "--benchmark",
        "local",
        "--model",
        "qwen05b",
        "--policy",
        "FC",
        option,
        "0",
        "--no-progress",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--out",
        str(cell_dir),
    ]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"{option} 0: must be 1 or more" in err and len(err.splitlines()) == 1
    assert not cell_dir.exists()


def test_a_cell_where_most_runs_hit_the_wall_time_limit_carries_a_warning(tmp_path):
    from ctxpolicy.agent.cell import cell_record
    from ctxpolicy.agent.runner import RunResult

    def record(*outcomes):
        results = [RunResult(tmp_path / f"t{i}__a1", o, None) for i, o in enumerate(outcomes)]
        return cell_record({"slug": "FC"}, results, tmp_path, 0.0, 1.0)["warnings"]

    assert record("time_limit", "time_limit", "step_limit") == [
        "2 of 3 runs hit the wall-time limit: the cell's resource ratios are undefined; "
        "raise limits.wall_time_limit_s or run on a less busy machine"
    ]
    assert record("time_limit", "step_limit") == [] and record() == []


def _study_with(study: Path, **changes) -> Path:
    """The offline study with top-level or benchmark changes (``cohort_limit``, ``thresholds``)."""
    import yaml

    config = yaml.safe_load(study.read_text())
    if "cohort_limit" in changes:
        config["benchmarks"]["local"]["cohort_limit"] = changes.pop("cohort_limit")
    config.update(changes)
    study.write_text(yaml.safe_dump(config))
    return study


def test_run_cell_by_id_runs_the_grid_cell_with_its_cohort_limit_and_thresholds_file(study, tmp_path):
    preset = {"source": "preset", "tight": 1000, "primary": 1500, "loose": 2500}
    _study_with(study, cohort_limit={"main": 1}, thresholds={"local": {"qwen05b": preset}})
    written = tmp_path / "results" / "thresholds" / "local" / "qwen05b.json"
    assert (
        cli.main(
            [
                "calibrate",
                "--preset",
                "--config",
                str(study),
                "--benchmark",
                "local",
                "--model",
                "qwen05b",
                "--out",
                str(written),
            ]
        )
        == 0
    )
    _thresholds(written, 1800)  # another value than the config's preset: the file decides
    cell_dir = tmp_path / "results" / "runs" / "local" / "qwen05b" / "TR_Th_0.5__primary"
    with FakeLLMServer() as server:
        assert (
            cli.main(
                [
                    "run-cell",
                    "--config",
                    str(study),
                    "--cell",
                    "local/qwen05b/TR_Th_0.5__primary",
                    "--endpoint",
                    server.url,
                    "--no-progress",
                    "--out",
                    str(cell_dir),
                ]
            )
            == 0
        )
    cell = read_json(cell_dir / "cell.json")
    assert (cell["track"], cell["policy"], cell["threshold_setting"], cell["cohort"]) == (
        "full",
        "TR/Th/0.5",
        "primary",
        "main",
    )
    assert cell["threshold_tokens"] == 1800
    assert [r["run_dir"] for r in cell["runs"]] == [f"{TASKS[0]}__a1"]  # cohort_limit main: 1
    identity = read_json(cell_dir / f"{TASKS[0]}__a1" / "run.json")["identity"]
    assert (identity["cell"], identity["threshold_tokens"]) == ("TR_Th_0.5__primary", 1800)


def test_run_cell_by_id_names_a_missing_thresholds_file(study, tmp_path, capsys):
    code = cli.main(
        [
            "run-cell",
            "--config",
            str(study),
            "--cell",
            "local/qwen05b/TR_Th_0.5__primary",
            "--no-progress",
            "--out",
            str(tmp_path / "cell"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and str(tmp_path / "results" / "thresholds" / "local" / "qwen05b.json") in err
    assert "cannot read the thresholds file" in err


def test_run_cell_by_an_unknown_id_lists_close_ones(study, tmp_path, capsys):
    code = cli.main(
        [
            "run-cell",
            "--config",
            str(study),
            "--cell",
            "local/qwen05b/TR_Th_0.5_primary",
            "--out",
            str(tmp_path / "cell"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "cell 'local/qwen05b/TR_Th_0.5_primary' is not in the grid" in err
    assert "closest: local/qwen05b/TR_Th_0.5__primary" in err
    assert len(err.strip().splitlines()) == 1


def test_run_cell_by_id_refuses_flags_that_name_the_cell_again(study, tmp_path, capsys):
    code = cli.main(
        [
            "run-cell",
            "--config",
            str(study),
            "--cell",
            "local/qwen05b/FC",
            "--policy",
            "FC",
            "--out",
            str(tmp_path / "cell"),
        ]
    )
    assert code == 2 and "leave out --policy" in capsys.readouterr().err
    code = cli.main(["run-cell", "--config", str(study), "--benchmark", "local", "--out", str(tmp_path / "cell")])
    assert code == 2 and "missing: --model, --policy" in capsys.readouterr().err


def test_a_cell_is_planned_from_the_study_s_cell_without_the_command_line(study, tmp_path):
    from ctxpolicy.study.grid import Cell
    from ctxpolicy.study import load_study

    loaded = load_study(study)
    cell = Cell("full", "local", "qwen05b", "FC", None, "main", None)
    planned = plan.plan_cell(loaded, cell, attempts=2, tasks=[TASKS[0]])
    assert [t.task_id for t in planned.tasks] == [TASKS[0]] and planned.threshold is None
    assert planned.info()["attempts"] == 2 and planned.concurrency == loaded.concurrency("local")
    runs = planned.runs(tmp_path / "cell")
    assert [(r.run_dir.name, r.attempt, r.execute) for r in runs] == [
        (f"{TASKS[0]}__a1", 1, None),
        (f"{TASKS[0]}__a2", 2, None),
    ]
    with pytest.raises(plan.PlanError, match="--attempts 0"):
        plan.plan_cell(loaded, cell, attempts=0)
    with pytest.raises(plan.PlanError, match="--tasks: nope"):
        plan.plan_cell(loaded, cell, tasks=["nope"])
