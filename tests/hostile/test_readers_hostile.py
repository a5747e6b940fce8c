"""Hostile run trees for the readers: numbers that would overflow, runs counted twice, calls.jsonl
that disagrees with run.json, special files, an unhashed message store, and `audit` over bad runs.

Issue 21 cases 5, 6, 8, 9 and 10. Every bad run sits among good ones: the good ones must come out,
the bad one be named "PATH: reason", and no reader may hang or print a traceback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
from pathlib import Path

import pandas as pd
import pytest

from ctxpolicy import cli
from ctxpolicy.metrics.aggregate import aggregate
from ctxpolicy.provenance import verify
from ctxpolicy.testing.runs import make_runs

TASKS = 3


@contextlib.contextmanager
def within(seconds: int):
    """Fail instead of hanging: SIGALRM after ``seconds`` raises in the main thread."""

    def expire(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def good_runs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("readers") / "runs"
    make_runs(root, policies=["TR/Th/0.5"], tasks=TASKS, attempts=1, calls_per_run=8, seed=5)
    return root


def _tree(good_runs: Path, where: Path) -> tuple[list[str], Path]:
    """A copy of the good runs, and a spare copy of one of them to spoil (not yet counted)."""
    shutil.copytree(good_runs, where)
    good = sorted(str(p.parent) for p in where.rglob("run.json"))
    victim = Path(good[0]).parent / "victim__a1"
    shutil.copytree(good[0], victim)
    return good, victim


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write_lines(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _edit_call(run_dir: Path, field: str, value, line: int = 1) -> None:
    calls = _lines(run_dir / "calls.jsonl")
    calls[line][field] = value
    _write_lines(run_dir / "calls.jsonl", calls)


def _left_out_only(tables, good: list[str], victim_file: Path) -> str:
    assert sorted(tables.runs["run_dir"]) == good
    [problem] = tables.problems
    assert problem.path == victim_file, problem
    return problem.reason


# ---------------------------------------------------------------- 6: numbers bounded at the edge


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("prompt_tokens", 1e30, ["prompt_tokens", "1e+30", "maximum"]),
        ("prompt_tokens", 2**53, ["prompt_tokens", str(2**53), "maximum"]),
        ("completion_tokens", 1e19, ["completion_tokens", "maximum"]),
        ("latency_s", 1e300, ["latency_s", "maximum"]),
    ],
)
def test_a_call_number_out_of_range_is_named_not_wrapped(good_runs, tmp_path, field, value, words):
    good, victim = _tree(good_runs, tmp_path / "runs")
    _edit_call(victim, field, value)
    reason = _left_out_only(aggregate([tmp_path / "runs"], processes=1), good, victim / "calls.jsonl")
    for word in words:
        assert word in reason


def test_a_huge_message_token_count_and_run_total_are_named(good_runs, tmp_path):
    good, victim = _tree(good_runs, tmp_path / "runs")
    entries = _lines(victim / "messages.jsonl")
    entries[0]["tokens"] = 1e30
    _write_lines(victim / "messages.jsonl", entries)
    reason = _left_out_only(aggregate([tmp_path / "runs"], processes=1), good, victim / "messages.jsonl")
    assert "line 1" in reason and "tokens" in reason and "maximum" in reason

    shutil.rmtree(victim)
    shutil.copytree(good[0], victim)
    record = json.loads((victim / "run.json").read_text())
    record["timing"]["wall_s"] = 1e300
    (victim / "run.json").write_text(json.dumps(record))
    reason = _left_out_only(aggregate([tmp_path / "runs"], processes=1), good, victim / "run.json")
    assert "timing.wall_s" in reason and "maximum" in reason


def test_tables_never_hold_a_wrapped_count(good_runs, tmp_path):
    _tree(good_runs, tmp_path / "runs")
    tables = aggregate([tmp_path / "runs"], processes=1)
    assert (tables.runs["prompt_tokens"] >= 0).all() and (tables.calls["prompt_tokens"] >= 0).all()


# ---------------------------------------------------------------- 8: no run counted twice, counts agree


def test_a_run_named_by_a_relative_and_an_absolute_path_counts_once(good_runs, tmp_path, monkeypatch):
    good, victim = _tree(good_runs, tmp_path / "runs")
    shutil.rmtree(victim)
    cell = Path(good[0]).parent
    monkeypatch.chdir(cell.parent)
    tables = aggregate([Path(cell.name), cell, tmp_path / "runs"], processes=1)
    assert len(tables.runs) == TASKS and tables.runs["run_dir"].is_unique
    assert len(tables.calls) == sum(len(_lines(Path(d) / "calls.jsonl")) for d in good)


def test_a_calls_file_cut_at_a_line_boundary_is_a_problem(good_runs, tmp_path):
    good, victim = _tree(good_runs, tmp_path / "runs")
    calls = _lines(victim / "calls.jsonl")
    _write_lines(victim / "calls.jsonl", calls[:1])
    reason = _left_out_only(aggregate([tmp_path / "runs"], processes=1), good, victim / "calls.jsonl")
    totals = json.loads((victim / "run.json").read_text())["totals"]
    assert f"totals.agent_calls says {totals['agent_calls']}" in reason


def test_a_duplicate_call_index_is_a_problem(good_runs, tmp_path):
    good, victim = _tree(good_runs, tmp_path / "runs")
    calls = _lines(victim / "calls.jsonl")
    calls[2]["index"] = calls[1]["index"]
    _write_lines(victim / "calls.jsonl", calls)
    reason = _left_out_only(aggregate([tmp_path / "runs"], processes=1), good, victim / "calls.jsonl")
    assert f"call {calls[1]['index']} appears 2 times" in reason


# ---------------------------------------------------------------- 10: special files never hang a reader


def test_a_fifo_calls_file_is_refused_at_once(good_runs, tmp_path):
    good, victim = _tree(good_runs, tmp_path / "runs")
    (victim / "calls.jsonl").unlink()
    os.mkfifo(victim / "calls.jsonl")
    with within(20):
        tables = aggregate([tmp_path / "runs"], processes=1)
    assert "not a regular file (a FIFO)" in _left_out_only(tables, good, victim / "calls.jsonl")


def test_a_store_linked_to_a_device_outside_the_run_is_refused(good_runs, tmp_path):
    good, victim = _tree(good_runs, tmp_path / "runs")
    (victim / "messages.jsonl").unlink()
    (victim / "messages.jsonl").symlink_to("/dev/zero")
    with within(20):
        tables = aggregate([tmp_path / "runs"], processes=1)
    assert "symbolic link out of" in _left_out_only(tables, good, victim / "messages.jsonl")


def test_a_fifo_verdict_is_refused_not_read_as_ungraded(good_runs, tmp_path):
    good, victim = _tree(good_runs, tmp_path / "runs")
    (victim / "verdict.json").unlink(missing_ok=True)
    os.mkfifo(victim / "verdict.json")
    with within(20):
        tables = aggregate([tmp_path / "runs"], processes=1)
    assert "FIFO" in _left_out_only(tables, good, victim / "verdict.json")


def test_bundle_export_skips_special_files_in_workspaces(good_runs, tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(good_runs, results / "runs")
    workspace = sorted((results / "runs").rglob("run.json"))[0].parent / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "notes.txt").write_text("kept")
    os.mkfifo(workspace / "pipe")
    out = tmp_path / "bundle.tar.gz"
    with within(30):
        code = cli.main(["bundle", "export", "--results", str(results), "--out", str(out), "--workspaces"])
    assert code == 0
    err = capsys.readouterr().err
    assert "left out special file (not a regular file): runs/" in err and err.rstrip().endswith("workspace/pipe")
    assert cli.main(["bundle", "check", str(out)]) == 0
    assert not list(tmp_path.glob(".bundle.tar.gz.*.tmp"))


EXPORT_THAT_STALLS = """
import sys, tarfile, time
from ctxpolicy import cli
real = tarfile.TarFile.addfile
def slow(self, *args, **kwargs):
    print("adding", flush=True)
    time.sleep(60)
tarfile.TarFile.addfile = slow
sys.exit(cli.main(["bundle", "export", "--results", sys.argv[1], "--out", sys.argv[2]]))
"""


def test_bundle_export_removes_its_temporary_file_on_sigterm(good_runs, tmp_path):
    import subprocess
    import sys

    results = tmp_path / "results"
    shutil.copytree(good_runs, results / "runs")
    out = tmp_path / "bundle.tar.gz"
    proc = subprocess.Popen(
        [sys.executable, "-c", EXPORT_THAT_STALLS, str(results), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "adding"
        assert list(tmp_path.glob(".bundle.tar.gz.*.tmp"))  # the temporary file is there mid-export
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 143
    finally:
        proc.kill()
    assert not out.exists() and not list(tmp_path.glob(".bundle.tar.gz.*.tmp"))


# ---------------------------------------------------------------- 5: every file a table reads is hashed


def test_editing_one_message_is_caught_by_provenance_verify(good_runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(good_runs, "results/runs")
    out = Path("results/tables")
    assert cli.main(["aggregate", "--runs", "results/runs", "--out", str(out), "--processes", "1"]) == 0
    table = out / "runs.parquet"
    assert cli.main(["provenance", "record", str(table), "--runs", "results/runs"]) == 0
    assert verify(table)[1] == []
    before = pd.read_parquet(table)

    store = sorted(Path("results/runs").rglob("messages.jsonl"))[0]
    entries = _lines(store)
    entries[0]["tokens"] *= 50  # the system prompt: in every prompt's cached prefix
    _write_lines(store, entries)
    _, problems = verify(table)
    assert [(Path(p.path).resolve(), p.problem) for p in problems] == [(store.resolve(), "changed")]
    again = Path("again")  # the edit matters: the table computed anew differs
    assert cli.main(["aggregate", "--runs", "results/runs", "--out", str(again), "--processes", "1"]) == 0
    assert not pd.read_parquet(again / "runs.parquet")["billed_exact"].equals(before["billed_exact"])
    capsys.readouterr()
    assert cli.main(["provenance", "verify", str(table)]) == 1
    assert "changed" in capsys.readouterr().out


# ---------------------------------------------------------------- 9: audit leaves a bad run out, like aggregate


def _spoil_run(change):
    def spoil(run_dir: Path) -> None:
        record = json.loads((run_dir / "run.json").read_text())
        change(record)
        (run_dir / "run.json").write_text(json.dumps(record))

    return spoil


def _event_as_text(run_dir: Path) -> None:
    calls = _lines(run_dir / "calls.jsonl")
    with_events = next(c for c in calls if c["events"])
    with_events["events"] = ["cleared"]
    _write_lines(run_dir / "calls.jsonl", calls)


def _not_utf8(run_dir: Path) -> None:
    path = run_dir / "messages.jsonl"
    data = path.read_bytes()
    assert b'"content":"' in data
    path.write_bytes(data.replace(b'"content":"', b'"content":"\xff\xfe', 1))


def _fifo_calls(run_dir: Path) -> None:
    (run_dir / "calls.jsonl").unlink()
    os.mkfifo(run_dir / "calls.jsonl")


AUDIT_BAD = {
    "attempt-word": (_spoil_run(lambda r: r["identity"].update(attempt="one")), "run.json"),
    "depth-word": (_spoil_run(lambda r: r["identity"].update(depth="half")), "run.json"),
    "event-text": (_event_as_text, "calls.jsonl"),
    "not-utf8": (_not_utf8, "messages.jsonl"),
    "fifo-calls": (_fifo_calls, "calls.jsonl"),
}


def test_audit_leaves_each_bad_run_out_and_audits_the_rest(good_runs, tmp_path, capsys):
    shutil.copytree(good_runs, tmp_path / "runs")
    good = sorted(str(p.parent) for p in (tmp_path / "runs").rglob("run.json"))
    bad = {}
    for name, (spoil, _) in AUDIT_BAD.items():
        run_dir = Path(good[0]).parent / f"{name}__a1"
        shutil.copytree(good[0], run_dir)
        spoil(run_dir)
        bad[name] = run_dir
    out = tmp_path / "events.parquet"
    capsys.readouterr()
    with within(60):
        code = cli.main(["audit", "--runs", str(tmp_path / "runs"), "--out", str(out), "--resamples", "20"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "Traceback" not in captured.err
    left_out = [line for line in captured.err.splitlines() if line.startswith("left out: ")]
    assert len(left_out) == len(AUDIT_BAD), captured.err
    for name, run_dir in bad.items():
        blamed = run_dir / AUDIT_BAD[name][1]
        assert any(line.startswith(f"left out: {blamed}: ") for line in left_out), (name, left_out)
    events = pd.read_parquet(out)
    assert set(events["run_dir"]) == set(good)
    assert f"from {len(good)} runs ({len(AUDIT_BAD)} left out)" in captured.out
