"""Grid expansion: the paper config expands to the study's structure, cells are deduplicated
across tracks, slugs are stable, cells are found by id, thresholds resolve from the thresholds file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from ctxpolicy.study.config import ConfigError
from ctxpolicy.study.grid import (
    Cell,
    expand_grid,
    find_cell,
    resolve_threshold,
    validate_study,
)
from ctxpolicy.study import Study

ROOT = Path(__file__).resolve().parents[1]
PAPER_COHORTS = {
    ("swebench", "main"): 100,
    ("swebench", "sweep"): 25,
    ("terminalbench", "main"): 40,
    ("terminalbench", "sweep"): 15,
}


def with_cohorts(config: dict, tmp_path: Path, sizes: dict) -> dict:
    """The config with its cohort files replaced by synthetic ones of the given sizes."""
    for (benchmark, cohort), n in sizes.items():
        path = tmp_path / f"{benchmark}_{cohort}.txt"
        path.write_text("# synthetic\n" + "".join(f"{benchmark}-{i:03d}\n" for i in range(n)))
        config["benchmarks"][benchmark]["cohorts"][cohort] = str(path)
    return validate_study(config)


@pytest.fixture
def paper(tmp_path) -> dict:
    return with_cohorts(yaml.safe_load((ROOT / "config/paper.yaml").read_text()), tmp_path, PAPER_COHORTS)


def test_paper_grid_has_the_study_structure(paper):
    cells = expand_grid(paper)
    by_track = Counter(c.track for c in cells)
    # FC per model and benchmark, calibrated and reused as the full comparison's reference
    assert by_track["calibration"] == 3 * 2
    # 13 policies (FC counted under calibration) for 3 models on 2 benchmarks
    assert by_track["full"] == 12 * 3 * 2
    # per (model, benchmark): 5 tunable x 3 depths x 3 settings + 6 invariant x 3 settings,
    # minus the 5 + 6 primary cells of the full comparison
    assert by_track["sweep"] == (45 + 18 - 11) * 2 * 2
    assert by_track["summarizer"] == 2 * 2
    assert {c.model for c in cells if c.track == "sweep"} == {"qwen", "devstral"}
    assert len({c.key for c in cells}) == len(cells)


def test_paper_run_counts(paper):
    rows = {(r["benchmark"], r["model"], r["track"]): r for r in Study(paper).summary()}
    assert rows[("swebench", "glm", "calibration")]["runs"] == 100 * 3
    assert rows[("swebench", "qwen", "full")]["runs"] == 12 * 100 * 3
    assert rows[("terminalbench", "devstral", "sweep")]["runs"] == 52 * 15 * 3
    assert rows[("swebench", "qwen", "summarizer")]["runs"] == 4 * 25 * 3
    assert sum(r["runs"] for r in rows.values()) == 29160


def test_sweeps_skip_cells_of_the_full_comparison(paper):
    cells = expand_grid(paper)
    sweep = {(c.benchmark, c.model, c.slug) for c in cells if c.track == "sweep"}
    assert ("swebench", "qwen", "TR_Th_0.5__primary") not in sweep
    assert ("swebench", "qwen", "TR_Th_0.5__tight") in sweep
    assert ("swebench", "qwen", "TRCplusSU_Th__loose") in sweep
    full = next(c for c in cells if c.slug == "TR_Th_0.5__primary" and c.model == "qwen" and c.benchmark == "swebench")
    assert (full.track, full.cohort) == ("full", "main")


def test_slugs_and_run_roots():
    otrc = Cell("full", "swebench", "qwen", "OTRC+S-p/St+Th/0.5", "primary", "main", None)
    assert otrc.spec.slug == "OTRCplusS-p_StplusTh_0.5" and otrc.spec.needs_threshold
    cell = Cell("summarizer", "swebench", "qwen", "SU/Th/0.5", "primary", "sweep", "gemma")
    assert cell.slug == "SU_Th_0.5__primary__sum-gemma"
    assert cell.id == "swebench/qwen/SU_Th_0.5__primary__sum-gemma"
    assert cell.run_root("results") == Path("results/runs/swebench/qwen/SU_Th_0.5__primary__sum-gemma")
    assert Cell("full", "local", "m", "FC", None, "main", None).slug == "FC"
    assert Cell("full", "local", "m", "OTRC/St", None, "main", None).slug == "OTRC_St"


def test_policies_without_threshold_have_no_setting(paper):
    for cell in expand_grid(paper):
        assert (cell.setting is None) == (cell.policy in ("FC", "OTRC/St"))


def test_agent_as_its_own_summarizer_is_the_ordinary_cell(paper):
    paper["grid"]["summarizer"]["summarizers"] = ["qwen", "gemma"]
    summ = [c for c in expand_grid(paper) if c.track == "summarizer"]
    assert {c.summarizer for c in summ} == {"gemma"}


def test_run_count_reads_the_cohort_file(paper):
    cell = next(c for c in expand_grid(paper) if c.benchmark == "terminalbench" and c.cohort == "sweep")
    assert Study(paper).planned_runs(cell) == 15 * 3


def _cell(cells: list[Cell], benchmark: str, model: str, setting: str | None) -> Cell:
    return next(c for c in cells if (c.benchmark, c.model, c.setting) == (benchmark, model, setting))


def test_thresholds_come_from_the_thresholds_file_whatever_the_source(paper, tmp_path):
    paper["results_dir"] = str(tmp_path / "results")
    cells = expand_grid(paper)
    loose = _cell(cells, "swebench", "devstral", "loose")  # a preset of 24000 in the config
    assert resolve_threshold(paper, _cell(cells, "swebench", "qwen", None)) is None
    with pytest.raises(ConfigError) as info:
        resolve_threshold(paper, loose)
    path = tmp_path / "results/thresholds/swebench/devstral.json"
    assert str(path) in str(info.value) and "ctxpolicy calibrate --preset" in str(info.value)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"source": "preset", "tight": 17000, "primary": 21000, "loose": 23000}))
    assert resolve_threshold(paper, loose) == 23000  # the file, not the config's preset, decides
    other = tmp_path / "elsewhere.json"
    other.write_text(json.dumps({"source": "calibrated", "tight": 1, "primary": 2, "loose": 3}))
    assert resolve_threshold(paper, loose, thresholds_file=other) == 3

    glm = _cell(cells, "terminalbench", "glm", "primary")
    calibrated = dict(paper, thresholds={**paper["thresholds"], "terminalbench": {"glm": {"source": "calibrate"}}})
    with pytest.raises(ConfigError, match=r"glm\.json: cannot read the thresholds file .* run calibration first"):
        resolve_threshold(calibrated, glm)
    for text, problem in (
        ('{"primary": null}', "primary: None is not a token count"),
        ("{not json", "not valid JSON"),
        ('{"primary": "3000"}', "field primary is '3000': not a token count"),
    ):
        other.write_text(text)
        with pytest.raises(ConfigError, match=f"{other}: .*{problem}"):
            resolve_threshold(paper, glm, thresholds_file=other)


def test_cells_are_found_by_their_id(paper):
    cells = expand_grid(paper)
    cell = find_cell(cells, "swebench/qwen/TRCplusSU_Th__loose")
    assert (cell.track, cell.policy, cell.setting, cell.cohort) == ("sweep", "TRC+SU/Th", "loose", "sweep")
    assert find_cell(cells, "swebench/qwen/FC/") == find_cell(cells, "swebench/qwen/FC")
    with pytest.raises(ConfigError) as info:
        find_cell(cells, "swebench/qwen/TRCplusSU_Th_loose", source="paper.yaml")
    message = str(info.value)
    assert message.startswith("paper.yaml: cell 'swebench/qwen/TRCplusSU_Th_loose' is not in the grid")
    assert "closest: swebench/qwen/TRCplusSU_Th__loose" in message


def test_grid_cli_prints_counts_and_json(paper, tmp_path, capsys):
    from ctxpolicy.cli import main

    path = tmp_path / "paper.yaml"
    path.write_text(yaml.safe_dump(paper))
    assert main(["grid", "--config", str(path)]) == 0
    table = capsys.readouterr().out
    assert "total" in table and "29160" in table
    assert main(["grid", "--config", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["cells"]) == 290
    assert data["cells"][0]["run_root"].endswith("runs/swebench/qwen/FC")


def test_shipped_paper_config_and_cohorts(capsys):
    from ctxpolicy.cli import main

    assert main(["grid", "--config", str(ROOT / "config/paper.yaml")]) == 0
    lines = capsys.readouterr().out.splitlines()
    total = next(line for line in lines if line.startswith("total")).split()
    assert total[1:] == ["290", "29160"]


def test_cohort_limit_takes_the_first_tasks(tmp_path):
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config = with_cohorts(config, tmp_path, {("local", "main"): 5, ("local", "sweep"): 4})
    config["benchmarks"]["local"]["cohort_limit"] = {"main": 2}
    cells = expand_grid(config)
    main_cell = next(c for c in cells if c.cohort == "main")
    sweep_cell = next(c for c in cells if c.cohort == "sweep")
    study = Study(config)
    assert study.tasks(main_cell) == ["local-000", "local-001"]
    assert study.planned_runs(main_cell) == 2
    assert study.tasks(sweep_cell) == [f"local-{i:03d}" for i in range(4)]
    assert study.planned_runs(sweep_cell) == 4


def test_grid_cli_bad_config_exit_2(tmp_path, capsys):
    from ctxpolicy.cli import main

    path = tmp_path / "bad.yaml"
    path.write_text("study: x\n")
    assert main(["grid", "--config", str(path)]) == 2
    assert f"{path}: (top level): missing required key 'models'" in capsys.readouterr().err
