"""The quoted views' figures (``quoted_calls``, ``quoted_summary_share``, ``quoted_shared_tokens``)
counted a second time from the run records on A.5's step rule: only the successful attempts on
tasks both the policy and FC solve (⌈2A/3⌉ of A), averaged within each task, then the policy's
mean over those tasks against FC's (or, for the share, summary seconds against the agent's own
seconds, the workspace's setup left out)."""

from __future__ import annotations

import math

import pytest

from independent.pipeline import N_BOOT
from independent.study import check_row, close, Count, ratio_of_means, success_means

SUMMARY_PRIMITIVES = ("SU", "S", "SU-p", "S-p")


def _rows(paper_frames, stem):
    frame = paper_frames[stem]
    assert "note" not in frame.columns or len(frame.columns) > 1, f"{stem}: only notes"
    return frame.to_dict("records")


def _sides(study, row):
    b, m = row["benchmark"], row["model"]
    tasks = study.cell_tasks(b, m, row["cell"])
    return tasks, study.cell(b, m, row["cell"]), study.cell(b, m, study.fc_cell(b, m))


def _ratio(study, row, value) -> Count:
    tasks, mine, ref = _sides(study, row)
    a, b = success_means(mine, tasks, study.attempts, value), success_means(ref, tasks, study.attempts, value)
    est, n, boot = ratio_of_means(a, b, tasks)
    return Count(est, boot, n)


def _per_call(run):
    return run.agent_call_s / run.agent_calls if run.agent_calls else math.nan


@pytest.mark.parametrize(
    "stem, values",
    [
        ("quoted_calls", {"calls_ratio": lambda r: r.agent_calls, "per_call_latency_ratio": _per_call}),
        ("quoted_shared_tokens", {"tokens_ratio": lambda r: r.tokens}),
    ],
)
def test_quoted_ratios_on_shared_solved_tasks(study, paper_frames, stem, values):
    checked = 0
    for row in _rows(paper_frames, stem):
        counted = {name: _ratio(study, row, value) for name, value in values.items()}
        checked += check_row(f"{stem} {row['benchmark']}/{row['model']}/{row['cell']}", row, counted, N_BOOT)
    assert checked


def test_quoted_summary_share_on_shared_solved_tasks_of_the_agent_s_time(study, paper_frames):
    rows = _rows(paper_frames, "quoted_summary_share")
    assert rows
    for row in rows:
        tasks, mine, ref = _sides(study, row)
        assert mine[0].primitive in SUMMARY_PRIMITIVES
        attempts = study.attempts
        theirs = success_means(ref, tasks, attempts, lambda r: 0.0)
        summary = {
            t: v for t, v in success_means(mine, tasks, attempts, lambda r: r.summary_call_s).items() if t in theirs
        }
        own = {t: v for t, v in success_means(mine, tasks, attempts, lambda r: r.agent_s).items() if t in theirs}
        what = f"quoted_summary_share {row['benchmark']}/{row['model']}/{row['cell']}"
        close(f"{what}: shared_solved_tasks", row["shared_solved_tasks"], len(own))
        if not own:
            assert math.isnan(row["summary_share"]), what
            continue
        close(f"{what}: summary_s", row["summary_s"], sum(summary.values()) / len(summary))
        close(f"{what}: agent_time_s", row["agent_time_s"], sum(own.values()) / len(own))
        close(f"{what}: summary_share", row["summary_share"], sum(summary.values()) / sum(own.values()))
