"""Threshold calibration from FC peaks, and the study's presets."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ctxpolicy.metrics import cli_calibrate
from ctxpolicy.metrics.aggregate import aggregate
from ctxpolicy.metrics.calibrate import PRESET_THRESHOLDS, round_nearest, select_peaks, thresholds_from_peaks
from ctxpolicy.testing.runs import make_runs

ROOT = Path(__file__).resolve().parents[1]


def test_percentiles_of_peaks_rounded_to_the_nearest_thousand():
    peaks = [1000 * k + 400 for k in range(1, 22)]  # 1400, 2400, ..., 21400 (21 values)
    result = thresholds_from_peaks(peaks)
    # linear interpolation: the 5th/15th/25th percentiles sit at positions 1, 3 and 5 of 0..20
    assert result["percentiles"] == {"5": 2400.0, "15": 4400.0, "25": 6400.0}
    assert (result["tight"], result["primary"], result["loose"]) == (2000, 4000, 6000)
    assert result["source"] == "calibrated" and result["round_to"] == 1000 and result["n_runs"] == 21
    assert result["peaks"] == sorted(peaks)


def test_rounding_unit_is_a_parameter_and_halves_round_up():
    peaks = [1000 * k + 400 for k in range(1, 22)]
    assert thresholds_from_peaks(peaks, round_to=100)["tight"] == 2400
    assert round_nearest(2500, 1000) == 3000 and round_nearest(3500, 1000) == 4000
    assert round_nearest(2499, 1000) == 2000


def test_thresholds_that_round_to_zero_are_refused():
    with pytest.raises(ValueError, match="smaller rounding unit"):
        thresholds_from_peaks([300, 400, 500])
    with pytest.raises(ValueError, match="no FC peaks"):
        thresholds_from_peaks([])


def test_presets_are_the_study_thresholds():
    assert PRESET_THRESHOLDS["swebench"]["qwen"] == {
        "source": "preset",
        "tight": 10000,
        "primary": 15000,
        "loose": 20000,
    }
    assert [PRESET_THRESHOLDS["swebench"]["devstral"][k] for k in ("tight", "primary", "loose")] == [
        17000,
        21000,
        24000,
    ]
    assert [PRESET_THRESHOLDS["swebench"]["glm"][k] for k in ("tight", "primary", "loose")] == [10000, 13000, 15000]
    assert [PRESET_THRESHOLDS["terminalbench"]["qwen"][k] for k in ("tight", "primary", "loose")] == [2000, 3000, 4000]
    assert [PRESET_THRESHOLDS["terminalbench"]["devstral"][k] for k in ("tight", "primary", "loose")] == [
        3000,
        4000,
        7000,
    ]
    assert PRESET_THRESHOLDS["terminalbench"]["glm"] == {"source": "preset", "primary": 3000}


def test_calibrate_cli_writes_the_thresholds_file(tmp_path, capsys):
    make_runs(tmp_path / "runs", policies=["FC"], tasks=8, attempts=2, calls_per_run=6, seed=2)
    cell = tmp_path / "runs" / "local" / "qwen05b" / "FC"
    out = tmp_path / "thresholds" / "local" / "qwen05b.json"
    assert cli_calibrate.main(SimpleNamespace(runs=[cell], out=out, round_to=100)) == 0
    written = json.loads(out.read_text())
    runs = aggregate([cell], processes=1).runs
    assert runs["time_limited"].any()  # the generator's time-limited FC runs count too (A.4)
    peaks = runs["peak_prompt_tokens"].to_numpy()
    assert written["peaks"] == sorted(int(p) for p in peaks)
    assert written["tight"] == round_nearest(np.percentile(peaks, 5), 100)
    assert written["loose"] == round_nearest(np.percentile(peaks, 25), 100)
    assert (written["benchmark"], written["model"], written["round_to"]) == ("local", "qwen05b", 100)
    assert written["calibrated_from"] == "every FC run"


def test_calibration_over_time_limited_fc_runs_gives_the_percentiles_of_all_peaks():
    """Hand-worked (A.4): five FC runs, two of them time-limited (one by the agent's clock, one
    by the harness), peaks 1000..5000. Every peak counts: the 5th percentile sits at position
    0.2 of 0..4 (1000 + 0.2 * 1000 = 1200), the 15th at 0.6 (1600), the 25th at 1.0 (2000)."""
    runs = [(True, 1000), (False, 2000), (True, 3000), (False, 4000), (False, 5000), (False, None)]
    peaks, choice = select_peaks(runs)
    assert peaks == [1000, 2000, 3000, 4000, 5000]
    assert choice == {"time_limited_runs": 2, "calibrated_from": "every FC run", "warnings": []}
    result = thresholds_from_peaks(peaks, round_to=100)
    assert result["percentiles"] == {"5": 1200.0, "15": 1600.0, "25": 2000.0}
    assert (result["tight"], result["primary"], result["loose"]) == (1200, 1600, 2000)
    # the local study's rule, by name: the two time-limited peaks are left out
    within, rule = select_peaks(runs, exclude_time_limited=True)
    assert within == [2000, 4000, 5000] and rule["calibrated_from"] == "runs within the time limit"


def test_the_config_names_the_exclusion_off_in_the_paper_and_on_in_the_local_study():
    from ctxpolicy.study import load_study

    assert load_study(ROOT / "config" / "paper.yaml").calibration_excludes_time_limited is False
    assert load_study(ROOT / "config" / "config.yaml").calibration_excludes_time_limited is True


def test_calibrate_cli_refuses_non_fc_runs(tmp_path, capsys):
    make_runs(tmp_path / "runs", policies=["TR/Th/0.5"], tasks=2, attempts=1, calls_per_run=4, seed=2)
    cell = tmp_path / "runs" / "local" / "qwen05b" / "TR_Th_0.5__primary"
    with pytest.raises(cli_calibrate.CalibrateError, match="identity.policy") as refused:
        cli_calibrate.main(SimpleNamespace(runs=[cell], out=tmp_path / "t.json", round_to=100))
    assert refused.value.exit_code == 2  # cli.main: "calibrate: ...identity.policy..." and exit code 2


def _set_outcomes(cell, outcome_of) -> None:
    for i, run_json in enumerate(sorted(cell.glob("*/run.json"))):
        record = json.loads(run_json.read_text())
        record["outcome"] = outcome_of(i)
        run_json.write_text(json.dumps(record))


LOCAL_CONFIG = ROOT / "config" / "config.yaml"  # grid.calibration.exclude_time_limited: true


def test_time_limited_runs_are_left_out_of_calibration_where_the_config_says(tmp_path, capsys):
    make_runs(tmp_path / "runs", policies=["FC"], tasks=6, attempts=1, calls_per_run=6, seed=3)
    cell = tmp_path / "runs" / "local" / "qwen05b" / "FC"
    _set_outcomes(cell, lambda i: "time_limit" if i < 2 else "step_limit")
    peaks = aggregate([cell], processes=1).runs.sort_values("run_dir")["peak_prompt_tokens"].tolist()
    out = tmp_path / "t.json"
    args = SimpleNamespace(runs=[cell], out=out, round_to=None, config=LOCAL_CONFIG)
    assert cli_calibrate.main(args) == 0
    written = json.loads(out.read_text())
    assert written["peaks"] == sorted(int(p) for p in peaks[2:]) and written["n_runs"] == 4
    assert written["time_limited_runs"] == 2 and written["warnings"] == []
    assert written["counts"] == "server" and written["runs_by_counts"] == {"server": 6}  # every FC run read: our own
    assert written["calibrated_from"] == "runs within the time limit"
    assert written["round_to"] == 1  # the config's thresholds.local.qwen05b.round
    assert "2 time-limited left out" in capsys.readouterr().out


def test_imported_runs_without_usage_calibrate_from_local_counts_and_say_so(tmp_path, capsys):
    from ctxpolicy.importing.cli import main as import_main
    from ctxpolicy.testing.trajectories import swe_agent

    source = tmp_path / "swe" / "task-a.traj"
    source.parent.mkdir()
    source.write_text(json.dumps(swe_agent()))  # SWE-agent keeps only totals: local counts
    args = SimpleNamespace(input=[str(source)], format="auto", benchmark="b", model="m", verdicts=None)
    assert import_main(SimpleNamespace(**vars(args), out=str(tmp_path / "runs"))) == 0
    out = tmp_path / "t.json"
    cell = tmp_path / "runs" / "b" / "m" / "imported"
    assert cli_calibrate.main(SimpleNamespace(runs=[cell], out=out, round_to=10)) == 0
    written = json.loads(out.read_text())
    assert written["counts"] == "local" and written["runs_by_counts"] == {"local": 1}
    assert any("local prompt counts" in w for w in written["warnings"])


def test_all_time_limited_calibrates_from_them_with_a_recorded_warning(tmp_path, capsys):
    make_runs(tmp_path / "runs", policies=["FC"], tasks=4, attempts=1, calls_per_run=6, seed=3)
    cell = tmp_path / "runs" / "local" / "qwen05b" / "FC"
    _set_outcomes(cell, lambda i: "time_limit")
    out = tmp_path / "t.json"
    assert cli_calibrate.main(SimpleNamespace(runs=[cell], out=out, round_to=10, config=LOCAL_CONFIG)) == 0
    written = json.loads(out.read_text())
    assert written["n_runs"] == 4 and written["calibrated_from"] == "time-limited runs (none finished)"
    assert "all 4 FC runs hit the time limit" in written["warnings"][0]
    assert "WARNING" in capsys.readouterr().err


def test_calibrate_preset_writes_the_thresholds_file_of_the_config_preset(tmp_path, capsys):
    from ctxpolicy.cli import main

    out = tmp_path / "thresholds" / "terminalbench" / "glm.json"
    paper = str(ROOT / "config" / "paper.yaml")
    assert (
        main(
            [
                "calibrate",
                "--preset",
                "--config",
                paper,
                "--benchmark",
                "terminalbench",
                "--model",
                "glm",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text()) == {
        "source": "preset",
        "tight": None,
        "primary": 3000,
        "loose": None,
        "percentiles": {},
        "peaks": [],
        "warnings": [],
    }
    assert (
        main(
            [
                "calibrate",
                "--preset",
                "--config",
                paper,
                "--benchmark",
                "swebench",
                "--model",
                "devstral",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert [json.loads(out.read_text())[k] for k in ("tight", "primary", "loose")] == [17000, 21000, 24000]
    capsys.readouterr()

    local = str(ROOT / "config" / "config.yaml")
    assert (
        main(
            [
                "calibrate",
                "--preset",
                "--config",
                local,
                "--benchmark",
                "local",
                "--model",
                "qwen05b",
                "--out",
                str(out),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"{local}: thresholds.local.qwen05b:" in err and "is not a preset" in err
    assert main(["calibrate", "--preset", "--config", local, "--out", str(out)]) == 2
    assert "missing: --benchmark, --model" in capsys.readouterr().err


def test_coinciding_fc_peaks_get_the_sweep_warning_in_the_thresholds_file(tmp_path, capsys):
    from ctxpolicy.metrics.calibrate import sweep_warnings

    # the local study's fresh-clone case: peaks 810, 814, 868 rounded to 10 merge all three settings
    merged = thresholds_from_peaks([810, 814, 868], round_to=10)
    assert (merged["tight"], merged["primary"], merged["loose"]) == (810, 810, 810)
    (warning,) = sweep_warnings(merged)
    assert "tight = primary = loose = 810 tokens" in warning
    apart = thresholds_from_peaks([810, 814, 868], round_to=1)  # 810.4, 811.2, 812.0
    assert (apart["tight"], apart["primary"], apart["loose"]) == (810, 811, 812) and sweep_warnings(apart) == []
    above = {"tight": 900, "primary": 1000, "loose": 1100, "peaks": [810, 950]}
    assert sweep_warnings(above) == [
        "primary, loose at or above every FC peak (largest 950 tokens): it would never fire on an FC-like run"
    ]
    make_runs(tmp_path / "runs", policies=["FC"], tasks=3, attempts=1, calls_per_run=6, seed=2)
    cell = tmp_path / "runs" / "local" / "qwen05b" / "FC"
    peaks = aggregate([cell], processes=1).runs["peak_prompt_tokens"]
    unit = int(peaks.max())  # every percentile rounds to the largest peak: all equal, none below a peak
    assert peaks.min() >= unit / 2
    out = tmp_path / "t.json"
    assert cli_calibrate.main(SimpleNamespace(runs=[cell], out=out, round_to=unit)) == 0
    written = json.loads(out.read_text())
    assert written["tight"] == written["primary"] == written["loose"] == unit
    assert written["warnings"] == sweep_warnings(written) and len(written["warnings"]) == 2
    assert "cannot separate the settings" in capsys.readouterr().err
