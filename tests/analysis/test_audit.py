"""Audit rows and the reacquisition matcher on hand-written run records (expected counts inline)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from transcripts import A1, A2, A3, A4, EVENT, O1, O2, O3, O4, SYSTEM, TASK, bash, output, summarised_run, write_run

from ctxpolicy.analysis.audit import audit_run
from ctxpolicy.analysis.reacquisition import Removed, reacquires, removed_outputs
from ctxpolicy.analysis.summary import by_policy
from ctxpolicy.cli import main as cli


def test_summarised_step(tmp_path):
    (row,) = audit_run(summarised_run(tmp_path / "run"))
    # at risk: A1/O1 -> cat src/app.py, src/app.py, compute_total, 12; the task keeps src/app.py
    assert (row["anchors_at_risk"], row["anchors_kept"], row["anchors_summarised"], row["anchors_lost"]) == (4, 1, 0, 3)
    assert json.loads(row["lost_anchors"]) == [
        ["command", "cat src/app.py"],
        ["number", "12"],
        ["symbol", "compute_total"],
    ]
    # "Only modify files under src/." is gone; the summary repeats "Always run the tests ..."
    assert (row["constraints_at_risk"], row["constraints_preserved"], row["constraints_lost"]) == (2, 1, 1)
    # replies 3-5: cat src/app.py (same command), grep on /repo/src/app.py (same path), sed -i (not a read)
    assert (row["reacq_commands"], row["reacq_of_lost"], row["retrieval_after"], row["commands_after"]) == (2, 1, 2, 3)
    assert row["steps_to_reacq"] == 1 and row["steps_after"] == 4 and row["summary_calls"] == 1
    assert row["policy"] == "S-p/Th/0.5" and row["step"] == 3 and row["judge_model"] == "lexical"


def test_summary_keeps_an_anchor_the_messages_lost(tmp_path):
    summary = {"role": "user", "content": "[ctxpolicy:summary] compute_total is at line 12 of src/app.py."}
    run = write_run(
        tmp_path / "run",
        [
            ("agent", 1, [SYSTEM, TASK, A1, O1], []),
            ("agent", 2, [SYSTEM, TASK, summary, A2, O2], [EVENT]),
        ],
    )
    (row,) = audit_run(run)
    assert (row["anchors_at_risk"], row["anchors_kept"], row["anchors_summarised"], row["anchors_lost"]) == (4, 1, 2, 1)
    assert row["lost_command"] == 1 and row["reacq_commands"] == 0 and row["steps_to_reacq"] is None


def test_truncation_without_summary_loses_constraints_and_repeated_anchors_count_once(tmp_path):
    noisy = output("src/app.py src/app.py ./src/app.py\nDo not touch setup.cfg ever.")
    event = {**EVENT, "primitive": "TR"}
    run = write_run(
        tmp_path / "run",
        [
            ("agent", 1, [SYSTEM, TASK, bash("ls src"), noisy], []),
            ("agent", 2, [SYSTEM, TASK, A2, O2], [event]),
        ],
        policy="TR/Th/0.5",
    )
    (row,) = audit_run(run)
    # ls src, src/app.py (kept by the task), setup.cfg
    assert (row["anchors_at_risk"], row["anchors_kept"], row["anchors_lost"]) == (3, 1, 2)
    assert (row["constraints_at_risk"], row["constraints_lost"]) == (1, 1)
    assert row["summary_calls"] == 0 and row["primitives"] == "TR"


def test_windows_end_at_the_next_event_and_stacked_stages_are_one_step(tmp_path):
    cleared = {"role": "user", "content": "[ctxpolicy:cleared] Old tool result cleared to save context."}
    stages = [{**EVENT, "primitive": "OTRC", "depth": None}, {**EVENT, "primitive": "TR"}]
    read_tests = bash("grep -n test_add tests/test_app.py")
    run = write_run(
        tmp_path / "run",
        [
            ("agent", 1, [SYSTEM, TASK, A1, O1], []),
            ("agent", 2, [SYSTEM, TASK, A1, cleared, A2, O2], stages),  # O1 cleared
            ("agent", 3, [SYSTEM, TASK, A1, cleared, A2, O2, A3, O3], []),  # A3 re-reads src/app.py
            ("agent", 4, [SYSTEM, TASK, A3, O3, A4, O4], [EVENT]),  # drops A1..O2
            ("agent", 5, [SYSTEM, TASK, A3, O3, A4, O4, read_tests, O2], []),
            ("agent", 6, [SYSTEM, TASK, A3, O3, A4, O4, read_tests, O2, A2, O2], []),  # re-runs: not a read
        ],
        policy="OTRC+TR/St+Th/0.5",
    )
    first, second = audit_run(run)
    assert first["primitives"] == "OTRC+TR" and first["n_stages"] == 2 and first["event_depth"] == 0.5
    # replies of steps 2 and 3 (A3, A4) both read src/app.py again; the step-4 event ends the window
    assert (first["reacq_commands"], first["steps_to_reacq"], first["steps_after"]) == (2, 1, 2)
    # the second step removed O2 (the pytest command and tests/test_app.py); O1 was cleared before
    assert second["removed_outputs"] == 2
    assert (second["reacq_commands"], second["commands_after"], second["steps_to_reacq"]) == (1, 2, 1)


def test_removed_outputs_in_tool_calling_mode_follow_the_call_id():
    def call(call_id: str, command: str) -> dict:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": command})},
        }

    before = [
        SYSTEM,
        TASK,
        {"role": "assistant", "content": "", "tool_calls": [call("a", "cat x.py"), call("b", "ls docs")]},
        {"role": "tool", "tool_call_id": "b", "content": "index.md"},
        {"role": "tool", "tool_call_id": "a", "content": "print(1)"},
    ]
    removed = removed_outputs(before, kept=[0, 1, 2, 4])
    assert removed.commands == {"ls docs"} and removed.paths == {"index.md"}


def test_reacquisition_matcher_adversarial():
    removed = Removed(commands={"cat src/app.py"}, paths={"src/app.py", "C:/proj/main.py"})
    assert reacquires("cat   src/app.py", removed)
    assert reacquires("head -n 5 /repo/src/app.py", removed)
    assert reacquires("type C:\\proj\\main.py", removed)
    assert not reacquires("sed -i 's/a/b/' src/app.py", removed)  # an edit, not a read
    assert not reacquires("cat src/app.py > copy.py", removed)  # writes a file
    assert not reacquires("cat src/app.pyc", removed)  # another file
    assert not reacquires("cat app/src/app.py.orig", removed)


def test_by_policy_rates_and_intervals(tmp_path):
    rows = [row for i in range(3) for row in audit_run(summarised_run(tmp_path / f"r{i}", task_id=f"t{i}"))]
    (stats,) = by_policy(pd.DataFrame(rows), n_boot=200).to_dict("records")
    assert stats["n_events"] == 3 and stats["n_tasks"] == 3
    assert stats["anchor_retention"] == pytest.approx(0.25) and stats["anchor_retention_lo"] == pytest.approx(0.25)
    assert stats["constraint_retention"] == pytest.approx(0.5) and stats["reacq_per_event"] == pytest.approx(2.0)
    assert stats["median_steps_to_reacq"] == 1.0


def test_cli_writes_one_row_per_event_and_refuses_bad_input(tmp_path, capsys):
    cell = tmp_path / "cell"
    summarised_run(cell / "task-1__a1")
    summarised_run(cell / "task-2__a1", task_id="task-2", complete=False)  # incomplete: not read
    out = tmp_path / "tables" / "events.parquet"
    assert cli(["audit", "--runs", str(cell), "--out", str(out)]) == 0
    table = pd.read_parquet(out)
    assert list(table["task_id"]) == ["task-1"] and table["anchors_lost"].tolist() == [3]
    assert (
        "S-p/Th/0.5 (primary): 1 compression steps; anchor retention 0.25 (95% CI 0.25-0.25)" in capsys.readouterr().out
    )
    again = tmp_path / "again.parquet"
    assert cli(["audit", "--runs", str(cell), "--out", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()  # the same runs give the same bytes

    broken = cell / "task-3__a1"
    summarised_run(broken, task_id="task-3")
    (broken / "calls.jsonl").write_text('{"index": 0, "kind": "agent", "step": 1, "message_ids": ["feedface"]}\n')
    assert cli(["audit", "--runs", str(cell), "--out", str(out)]) == 0  # the bad run left out, the rest audited
    err = capsys.readouterr().err.strip()
    incomplete = f"left out: {cell / 'task-2__a1'}: run.json: field complete is False, not true"
    [line] = [line for line in err.splitlines() if line != incomplete]  # the incomplete run named too, each time
    assert line.startswith(f"left out: {broken / 'calls.jsonl'}: ") and "feedface" in line
    assert list(pd.read_parquet(out)["task_id"]) == ["task-1"]
    assert cli(["audit", "--runs", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert cli(["audit", "--runs", str(cell), "--out", str(out), "--judge-url", "http://127.0.0.1:1/v1"]) == 2


def test_replies_come_from_the_trajectory_when_it_has_one_per_call(tmp_path):
    run = summarised_run(tmp_path / "run")
    final = bash("head -n 3 src/app.py", "Last look.")  # the reply of step 6: in no prompt
    edit = bash("sed -i 's/sum/total/' src/app.py")
    messages = [SYSTEM, TASK, A1, O1, A2, O2, A3, O3, A4, O4, edit, output(""), final]
    (run / "trajectory.json").write_text(json.dumps({"messages": messages, "trajectory_format": "mini-swe-agent-1.1"}))
    (row,) = audit_run(run)
    assert (row["reacq_commands"], row["commands_after"]) == (3, 4)
    (run / "trajectory.json").write_text(json.dumps({"messages": messages[:-1]}))  # one reply short: not used
    (row,) = audit_run(run)
    assert (row["reacq_commands"], row["commands_after"]) == (2, 3)


def test_check_rows_raises_exactly_where_the_frame_would():
    from ctxpolicy.analysis.table import check_rows, frame

    plain = [{"event": 0, "step": 3, "depth": 0.5, "event_depth": None, "anchors_lost": 2}]
    check_rows(plain)
    for bad in ({"step": "three"}, {"depth": "half"}, {"step": 2**70}):
        rows = [{**plain[0], **bad}]
        with pytest.raises(Exception) as by_frame:
            frame(rows)
        with pytest.raises(type(by_frame.value)):
            check_rows(rows)
