"""Hostile inputs around runs and thresholds: `run --out` on a folder that is not ours, preset
thresholds out of order, a boolean threshold, a missing cohort file, and OTRC clearing a message
that is no tool result (issue 21 cases 4, 7 and 12).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import yaml

from ctxpolicy import cli
from ctxpolicy.study.config import ConfigError
from ctxpolicy.study import load_study

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "config" / "config.yaml"


def one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


# ---------------------------------------------------------------- 4: run --out deletes nothing it did not write


def _run(out: Path, *extra: str) -> int:
    return cli.main(
        [
            "run",
            "--benchmark",
            "local",
            "--model",
            "qwen05b",
            "--policy",
            "FC",
            "--task",
            "t",
            "--out",
            str(out),
            *extra,
        ]
    )


def test_run_refuses_a_folder_that_is_not_a_run_directory(tmp_path, capsys):
    out = tmp_path / "mine" / "project"
    (out / "workspace").mkdir(parents=True)
    (out / "workspace" / "important.txt").write_text("keep me")
    (out / "patch.diff").write_text("diff")
    assert _run(out) == 2
    err = one_line_error(capsys)
    assert f"--out: {out}: not a run directory" in err and "--force" in err
    assert (out / "workspace" / "important.txt").read_text() == "keep me"
    assert (out / "patch.diff").read_text() == "diff"
    assert sorted(p.name for p in out.parent.iterdir()) == ["project"]  # no .lock left in the parent


def test_run_directories_of_ours_are_redone_and_others_need_force(tmp_path):
    from ctxpolicy.rundir import RUN_MARKER, mark_run_dir, owns_run_dir, reset_run_dir

    assert owns_run_dir(tmp_path / "new")  # not there yet
    (tmp_path / "empty").mkdir()
    assert owns_run_dir(tmp_path / "empty")
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "calls.jsonl").write_text("")
    assert owns_run_dir(partial)
    started = tmp_path / "started"  # killed before its first record: only the marker and a workspace
    mark_run_dir(started)
    (started / "workspace").mkdir()
    (started / "workspace" / "f").write_text("x")
    assert owns_run_dir(started)
    reset_run_dir(started)
    assert sorted(p.name for p in started.iterdir()) == [RUN_MARKER]  # the marker survives a reset
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("x")
    assert not owns_run_dir(foreign)
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert not owns_run_dir(a_file)

    from ctxpolicy.agent.cli_run import out_refused

    assert out_refused(foreign, force=False) and out_refused(foreign, force=True) is None
    assert "not a directory" in out_refused(a_file, force=True)
    assert out_refused(partial, force=False) is None


# ---------------------------------------------------------------- 7: preset thresholds in order


def _config_with(tmp_path: Path, change) -> Path:
    data = yaml.safe_load(CONFIG.read_text())
    change(data)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


INVERTED = {"source": "preset", "tight": 9000, "primary": 5000, "loose": 2000}
EQUAL = {"source": "preset", "tight": 3000, "primary": 3000, "loose": 4000}


@pytest.mark.parametrize(
    "preset, says",
    [(INVERTED, "tight 9000 is above primary 5000"), (EQUAL, "tight 3000 is equal to primary 3000")],
)
def test_a_preset_out_of_order_fails_the_config_checks_and_calibrate(tmp_path, capsys, preset, says):
    path = _config_with(tmp_path, lambda c: c["thresholds"]["local"].update(qwen05b=preset))
    with pytest.raises(ConfigError, match=f"thresholds.local.qwen05b: {says}"):
        load_study(path)  # what `ctxpolicy grid` and the Snakefile (snakemake -n) load
    assert cli.main(["grid", "--config", str(path)]) == 2
    assert says in capsys.readouterr().err
    out = tmp_path / "t.json"
    argv = ["calibrate", "--preset", "--config", str(path), "--benchmark", "local", "--model", "qwen05b"]
    assert cli.main([*argv, "--out", str(out)]) == 2
    assert says in one_line_error(capsys) and not out.exists()


def test_a_preset_thresholds_file_out_of_order_is_refused_when_read(tmp_path):
    study = load_study(CONFIG)
    cell = next(c for c in study.cells if c.setting == "primary")
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({**INVERTED, "percentiles": {}, "peaks": []}))
    with pytest.raises(ConfigError, match="tight 9000 is above primary 5000"):
        study.resolve_threshold(cell, path)
    path.write_text(json.dumps({"source": "calibrated", "tight": 300, "primary": 300, "loose": 400}))
    assert study.resolve_threshold(cell, path) == 300  # coinciding calibrated settings: a warning's business
    path.write_text(json.dumps({"source": "calibrated", "tight": 500, "primary": 300, "loose": 400}))
    with pytest.raises(ConfigError, match="tight 500 is above primary 300"):
        study.resolve_threshold(cell, path)


# ---------------------------------------------------------------- 12: the small ones


@pytest.mark.parametrize("value", [True, False, 2.5, 2**53])
def test_a_threshold_that_is_no_token_count_is_refused_by_compress(tmp_path, monkeypatch, capsys, value):
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"source": "calibrated", "primary": value}))
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"messages": [{"role": "user", "content": "x"}]})))
    code = cli.main(["compress", "--policy", "TR/Th/0.5", "--setting", "primary", "--thresholds", str(path)])
    assert code == 2
    assert f"field primary is {value!r}: not a token count" in one_line_error(capsys)


def test_a_boolean_threshold_file_is_refused_by_run_cells(tmp_path):
    study = load_study(CONFIG)
    cell = next(c for c in study.cells if c.setting == "primary")
    path = tmp_path / "thresholds.json"
    path.write_text(json.dumps({"source": "calibrated", "tight": 1, "primary": True, "loose": 3}))
    with pytest.raises(ConfigError, match="field primary is True: not a token count"):
        study.resolve_threshold(cell, path)


def test_a_missing_cohort_file_fails_the_config_checks(tmp_path):
    path = _config_with(
        tmp_path, lambda c: c["benchmarks"]["local"]["cohorts"].update(sweep=str(tmp_path / "gone.txt"))
    )
    with pytest.raises(ConfigError, match=r"benchmarks\.local\.cohorts\.sweep: .*gone\.txt"):
        load_study(path)  # the Snakefile's check too, whatever results exist


def test_otrc_never_calls_an_assistant_message_a_tool_result(monkeypatch, capsys):
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for n in range(1, 6):
        messages += [{"role": "assistant", "content": f"step {n}"}, {"role": "user", "content": f"output {n}"}]
    messages.pop()  # the history ends with the agent's reply: the ninth from the end is a reply
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps({"messages": messages})))
    assert cli.main(["compress", "--policy", "OTRC/St", "--calls", "5"]) == 0
    after = json.loads(capsys.readouterr().out)["messages"]
    [cleared] = [i for i, (a, b) in enumerate(zip(messages, after)) if a != b]
    assert after[cleared]["role"] == "assistant"
    assert after[cleared]["content"].startswith("[ctxpolicy:cleared]")
    assert "tool result" not in after[cleared]["content"]
