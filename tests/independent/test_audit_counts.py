"""The audit's numbers in the ``retention`` and ``reacquisition`` data.csv files, counted a second
time from the run records (tests/independent/audit.py) on the paper-shaped data set.

Steps are those of the audited attempts (the data set audits attempt 1 of every run: conftest's
``paper_tables``) at the primary threshold setting (or of a policy without one), of the cells
where the agent is its own summarizer: the summarizer comparison's cells (another model writes
the summaries; Figure 19's subject) are no steps of the policy's own. Per policy, every number of
the row: the steps and their tasks; anchor retention, verbatim retention and anchors lost per
step; constraint retention (the lexical judge, as the workflow's audit runs); reacquisitions per
step and the share of them that read back a lost anchor; each a ratio of sums over the policy's
steps, task-bootstrapped (docs/analysis.md); the steps with a read-back and the median number of
steps to the first one.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest

from independent.pipeline import N_BOOT
from independent.study import check_interval, close, ratio_of_means

PRIMARY = "primary"
AUDITED_ATTEMPTS = 1  # conftest.paper_tables: build_tables(..., audit_attempts=1)


def _policy_cells(study) -> dict[tuple[str, str, str], list[str]]:
    """(benchmark, model, policy) -> its own-summarizer cells at the primary setting (or none)."""
    out = defaultdict(list)
    for (b, m, cell), runs in study._cells.items():
        first = runs[0]
        if first.summarizer is None and first.setting in (None, PRIMARY):
            out[(b, m, first.policy)].append(cell)
    return dict(out)


@pytest.fixture(scope="session")
def audit_steps(study):
    return count_steps(study)


def count_steps(study) -> dict:
    """(benchmark, model, policy) -> the per-step counts of its audited runs (read once)."""
    from independent.audit import count_run

    out = {}
    for (b, m, policy), cells in _policy_cells(study).items():
        steps = [
            s
            for cell in cells
            for run in study.cell(b, m, cell)
            if run.attempt <= AUDITED_ATTEMPTS and run.firing_steps
            for s in count_run(run.path)
        ]
        if steps:
            out[(b, m, policy)] = steps
    return out


def check_policy_row(what: str, row: dict, steps) -> int:
    """One policy's audit row against its counted steps; returns how many numbers were checked."""
    close(f"{what}: n_events", row["n_events"], len(steps))
    per_task_steps, per_task_reacq = defaultdict(float), defaultdict(float)
    for s in steps:
        per_task_steps[s.task] += 1
        per_task_reacq[s.task] += s.reacq_commands
    tasks = sorted(per_task_steps)
    close(f"{what}: n_tasks", row["n_tasks"], len(tasks))
    est, _n, boot = ratio_of_means(per_task_reacq, per_task_steps, tasks)
    close(f"{what}: reacq_per_event", row["reacq_per_event"], est)
    check_interval(
        f"{what}: reacq_per_event",
        row["reacq_per_event"],
        row["reacq_per_event_lo"],
        row["reacq_per_event_hi"],
        boot,
        N_BOOT,
    )
    per_task_lost = defaultdict(float)
    for s in steps:
        per_task_lost[s.task] += s.reacq_of_lost
    est, _n, boot = ratio_of_means(per_task_lost, per_task_reacq, tasks)
    close(f"{what}: reacq_of_lost_share", row["reacq_of_lost_share"], est)
    check_interval(
        f"{what}: reacq_of_lost_share",
        row["reacq_of_lost_share"],
        row["reacq_of_lost_share_lo"],
        row["reacq_of_lost_share_hi"],
        boot,
        N_BOOT,
    )
    at_risk, retained = defaultdict(float), defaultdict(float)
    for s in steps:
        at_risk[s.task] += s.constraints_at_risk
        retained[s.task] += s.constraints_retained
    est, _n, boot = ratio_of_means(retained, at_risk, tasks)
    close(f"{what}: constraint_retention", row["constraint_retention"], est)
    check_interval(
        f"{what}: constraint_retention",
        row["constraint_retention"],
        row["constraint_retention_lo"],
        row["constraint_retention_hi"],
        boot,
        N_BOOT,
    )
    sums = {k: defaultdict(float) for k in ("at_risk", "kept", "retained", "lost")}
    for s in steps:
        sums["at_risk"][s.task] += s.anchors_at_risk
        sums["kept"][s.task] += s.anchors_kept
        sums["retained"][s.task] += s.anchors_kept + s.anchors_summarised
        sums["lost"][s.task] += s.anchors_at_risk - s.anchors_kept - s.anchors_summarised
    for column, num, den in (
        ("anchor_retention", sums["retained"], sums["at_risk"]),
        ("anchor_verbatim", sums["kept"], sums["at_risk"]),
        ("lost_per_event", sums["lost"], per_task_steps),
    ):
        est, _n, boot = ratio_of_means(num, den, tasks)
        close(f"{what}: {column}", row[column], est)
        check_interval(f"{what}: {column}", row[column], row[f"{column}_lo"], row[f"{column}_hi"], boot, N_BOOT)
    reached = [s.steps_to_reacq for s in steps if s.steps_to_reacq is not None]
    close(f"{what}: events_with_reacq", row["events_with_reacq"], len(reached))
    close(f"{what}: median_steps_to_reacq", row["median_steps_to_reacq"], np.median(reached) if reached else math.nan)
    return 22


def _check_rows(table: list[dict], audit_steps, name: str) -> set:
    assert table, f"{name}: no rows"
    seen = set()
    for row in table:
        policy_key = (row["benchmark"], row["model"], row["policy"])
        assert policy_key in audit_steps, f"{name} {policy_key}: a row for a policy without own audited steps"
        check_policy_row(f"{name} {'/'.join(policy_key)}", row, audit_steps[policy_key])
        seen.add(policy_key)
    return seen


def test_retention_steps_and_reacquisitions(paper_frames, audit_steps):
    """Every policy with audited steps has its row, and every row's step counts and reacquisition
    numbers are the counted ones."""
    seen = _check_rows(paper_frames["retention"].to_dict("records"), audit_steps, "retention")
    assert seen == set(audit_steps)


def test_reacquisition_per_step_part(study, paper_frames, audit_steps):
    """The reacquisition figure's per-step rows: the full comparison's policies, counted alike."""
    frame = paper_frames["reacquisition"]
    table = frame[frame["part"] == "per_step"].to_dict("records")
    seen = _check_rows(table, audit_steps, "reacquisition per step")
    compared = set(study.config["grid"]["full_comparison"]["policies"])
    assert seen == {k for k in audit_steps if k[2] in compared and (k[0], k[1]) in {(b, m) for b, m, _ in seen}}


def test_a_read_back_is_a_read_of_a_removed_path_or_command():
    """The definition on a hand-made pair: a read of a removed path (prefix aside) or the same
    command again is a read-back; an edit of it, or a read of another path, is not."""
    from independent import audit, shell

    removed = audit.paths("<output>\npkg1/core/mod2.py:12: in handle_value\n</output>") | audit.paths("cat build.log")
    assert removed == {"pkg1/core/mod2.py", "build.log"}
    for command, back in (
        ("cat /repo/pkg1/core/mod2.py", True),
        ("head -n 5 build.log", True),
        ("sed -i 's/a/b/' pkg1/core/mod2.py", False),
        ("cat pkg1/core/mod3.py", False),
    ):
        hit = shell.is_read(command) and any(audit.same_path(p, q) for p in audit.paths(command) for q in removed)
        assert hit is back, command
