"""The retention figure and the per-step row of the reacquisition figure, drawn from audit rows."""

from __future__ import annotations

import matplotlib
import pandas as pd
import pytest
from figure_helpers import silent_empty_panels
from transcripts import summarised_run

from ctxpolicy.analysis.audit import audit_run
from ctxpolicy.analysis.table import frame, read_events, write_events
from ctxpolicy.figures import notes, reacquisition, retention

matplotlib.use("Agg")
from ctxpolicy.paths import REPO_ROOT  # noqa: E402
from ctxpolicy.study import load_study  # noqa: E402

CONFIG = load_study(REPO_ROOT / "tests" / "fixtures" / "figures" / "config.yaml")  # models qwen05b and tiny


@pytest.fixture
def events(tmp_path):
    rows = [row for i in range(3) for row in audit_run(summarised_run(tmp_path / f"r{i}", task_id=f"t{i}"))]
    rows += audit_run(summarised_run(tmp_path / "loose", task_id="t9"))
    rows[-1]["threshold_setting"] = "loose"
    write_events(frame(rows), tmp_path / "tables" / "events.parquet")
    return read_events(tmp_path / "tables")


def test_retention_rates_and_notes(events):
    data = retention.compute(events, CONFIG, n_boot=50, seed=0)
    (row,) = data.table.to_dict("records")
    assert (row["policy"], row["n_events"], row["anchor_retention"], row["constraint_retention"]) == (
        "S-p/Th/0.5",
        3,
        0.25,
        0.5,
    )
    assert data.meta["combos"] == [("local", "tiny")]
    assert any("other threshold settings" in n for n in data.notes)
    fig = retention.plot(data)
    anchors, constraints = fig.axes
    # the measure is each row's label, after the benchmark (benchmarks in rows, models in columns)
    assert anchors.get_ylabel() == "local\nanchors at risk that survive" and len(anchors.patches) >= 2
    assert constraints.get_ylabel() == "local\nconstraints at risk that survive"
    assert silent_empty_panels(fig) == []


def test_a_policy_row_leaves_out_the_summarizer_comparisons_steps(events):
    """The summarizer comparison's cells share the policy's name; their steps (another model
    summarizing) are not the policy's own, whichever events table the figure reads."""
    other = events.assign(summarizer="synth-sum-a", cell="S-p_Th_0.5__synth-sum-a")
    data = retention.compute(pd.concat([events, other], ignore_index=True), CONFIG, n_boot=50, seed=0)
    (row,) = data.table.to_dict("records")
    assert (row["n_events"], row["anchor_retention"]) == (3, 0.25)  # as from the own steps alone
    assert retention.OTHER_SUMMARIZERS in data.notes


def test_missing_events_table_is_a_note(tmp_path):
    empty = read_events(tmp_path)
    assert empty.empty and "anchors_lost" in empty.columns
    data = retention.compute(empty, CONFIG, n_boot=50, seed=0)
    assert data.empty and "ctxpolicy audit" in data.note_text()
    assert "ctxpolicy audit" in " ".join(notes.recorded(retention.plot(data)))  # the figure says why


def test_reacquisition_figure_gains_a_per_step_row(events):
    runs = pd.DataFrame(columns=["benchmark", "model", "policy", "cell", "track"])
    data = reacquisition.compute(runs, CONFIG, n_boot=50, seed=0, events=events)
    (per_step,) = data.extra[reacquisition.PER_STEP].to_dict("records")
    assert per_step["reacq_per_event"] == 2.0 and per_step["reacq_of_lost_share"] == 0.5
    assert "per_step" in set(data.numbers()["part"])  # the rates go to reacquisition.data.csv
    fig = reacquisition.plot(data)
    assert [ax.get_ylabel() for ax in fig.axes if ax.get_visible()] == ["local\nreacquisitions per step"]
    assert silent_empty_panels(fig) == []
