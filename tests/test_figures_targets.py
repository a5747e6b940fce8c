"""The targets issue 29 adds: Table 2 beside our presets, and Figure 6 on the config's task."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figure_helpers import read_fixture  # noqa: E402

from ctxpolicy.figures import catalog, layout, prompt_profile, tables  # noqa: E402
from ctxpolicy.testing.studies import study_of  # noqa: E402


def test_table2_sets_the_study_s_three_mechanisms_beside_our_presets_and_the_neighbours():
    table = tables.table2()
    study = table[table["source"] == "Table 2"].set_index("system")
    assert list(study.index) == ["OpenHands", "Gemini CLI", "Claude Code"]
    for system, row in study.iterrows():
        assert row["spec"] == row["table2_analogue"], system  # our preset is the study's analogue
    assert study.loc["Claude Code", "threshold"] == "0.97 × window"
    assert table.set_index("preset").loc["codex", "source"].startswith("ours")
    neighbours = table[table["source"].str.startswith("The Complexity Trap")]
    assert list(neighbours["spec"]) == ["OTRC/St/k10", "SU-p/Tn21/k10", "OTRC+SU-p/St+Tn21/k10"]
    assert neighbours["threshold"].isna().all()


def test_table2_is_a_catalog_table_target():
    spec = catalog.TARGETS["table2"]
    assert spec["number"] == 2 and spec["kind"] == "table"
    assert spec["outputs"] == ["figures/table2.csv", "figures/table2.md", "figures/table2.tex"]
    assert (Path(__file__).resolve().parents[1] / spec["notebook"]).is_file()


@pytest.fixture(scope="module")
def fixture():
    return read_fixture()


def test_figure6_draws_the_task_and_run_the_config_names(fixture):
    runs, config, calls = fixture
    config = copy.deepcopy(config)
    config["figure6"] = {"task_id": "task-0003", "attempt": 1}
    data = prompt_profile.compute(runs, calls, study_of(config))
    assert data.meta["task_id"] == "task-0003" and data.meta["attempts"] == {"FC": 1, "TR/Th/0.5": 1}
    assert not data.notes and set(data.table["policy"]) == {"FC", "TR/Th/0.5"}
    layout.check(prompt_profile.plot(data), name="fig6")


def test_figure6_falls_back_to_the_longest_fc_run_with_a_note(fixture):
    runs, config, calls = fixture
    config = copy.deepcopy(config)
    config["figure6"] = {"task_id": "scikit-learn__scikit-learn-13142", "attempt": 1}
    data = prompt_profile.compute(runs, calls, study_of(config))
    longest = prompt_profile.compute(runs, calls, study_of({**config, "figure6": None}))
    assert data.meta["task_id"] == longest.meta["task_id"] == "task-0008"
    assert any("scikit-learn__scikit-learn-13142" in n and "longest" in n for n in data.notes)
    missing_run = prompt_profile.compute(
        runs, calls, study_of({**config, "figure6": {"task_id": "task-0003", "attempt": 3}})
    )
    assert missing_run.meta["task_id"] == "task-0003" and any("run 3" in n for n in missing_run.notes)


def test_the_paper_config_names_the_caption_s_task():
    from ctxpolicy.study import load_study

    root = Path(__file__).resolve().parents[1]
    assert load_study(root / "config" / "paper.yaml").figure6_run() == ("scikit-learn__scikit-learn-13142", 1)
