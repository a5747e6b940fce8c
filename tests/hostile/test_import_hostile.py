"""`ctxpolicy import` on hostile files (issue 30): every failure of one file is one line naming the
file and the field and never stops the others; nothing half-written; no link out of the tree
followed and no unparsed content echoed; special files named and skipped; the task id from the
trajectory's own `instance_id`.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from ctxpolicy.cli import main as cli
from ctxpolicy.rundir import find_run_dirs, read_json
from ctxpolicy.testing import trajectories as T

SECRET = "root:$6$NEVERSHOWNHASH:19000:0:99999:7:::"


def _import(tmp: Path, *inputs: Path, extra: tuple[str, ...] = ()) -> tuple[int, Path]:
    out = tmp / "runs"
    rc = cli(["import", "-i", *map(str, inputs), "--benchmark", "swe-bench", "--model", "m", "--out", str(out), *extra])
    return rc, out


def _cell(out: Path) -> Path:
    return out / "swe-bench" / "m" / "imported"


def _skipped(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("import: skipped ")]


def _only_whole_runs(out: Path) -> list[str]:
    """The run directories under ``out``: each holds a complete run.json, and nothing else is there."""
    cell = _cell(out)
    entries = sorted(p.name for p in cell.iterdir()) if cell.is_dir() else []
    for name in entries:
        assert read_json(cell / name / "run.json")["complete"] is True, name
    return entries


@pytest.fixture
def no_hang():
    def expire(signum, frame):
        raise TimeoutError("import blocked")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def _with_tool_call(tool_calls) -> dict:
    data = T.mini_v2(tool_calls=True, steps=2)
    data["messages"][2]["tool_calls"] = tool_calls
    return data


def test_each_bad_file_is_one_line_naming_file_and_field_and_the_others_import(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a-good.traj.json").write_text(json.dumps(T.mini_v2(steps=2)))
    depth = 100_000
    (folder / "deep.traj.json").write_text("[" * depth + "]" * depth)  # RecursionError in json.loads
    surrogate = T.mini_v2(steps=2)
    surrogate["messages"][1]["content"] = "task \ud800 text"
    (folder / "surrogate.traj.json").write_text(json.dumps(surrogate))  # json escapes it: \ud800
    (folder / "toolcalls.traj.json").write_text(json.dumps(_with_tool_call("x")))
    function = _with_tool_call([{"id": "c1", "type": "function", "function": 5}])
    (folder / "function.traj.json").write_text(json.dumps(function))
    arguments = _with_tool_call([{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": {}}}])
    (folder / "arguments.traj.json").write_text(json.dumps(arguments))
    (folder / "huge.traj.json").write_text(json.dumps(T.mini_v2(steps=2)) + " " * 300_000)
    (folder / "z-good.traj.json").write_text(json.dumps(T.mini_v2(tool_calls=True, steps=2)))
    monkeypatch.setattr("ctxpolicy.importing.cli.MAX_FILE_BYTES", 200_000)

    rc, out = _import(tmp_path, folder)
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err, err
    lines = {Path(line.split(": ")[1].removeprefix("skipped ")).name: line for line in _skipped(err)}
    assert sorted(lines) == [
        "arguments.traj.json",
        "deep.traj.json",
        "function.traj.json",
        "huge.traj.json",
        "surrogate.traj.json",
        "toolcalls.traj.json",
    ], err
    assert "nested too deeply" in lines["deep.traj.json"]
    assert "messages[1].content" in lines["surrogate.traj.json"] and "surrogate" in lines["surrogate.traj.json"]
    assert "messages[2].tool_calls" in lines["toolcalls.traj.json"]
    assert "messages[2].tool_calls[0].function" in lines["function.traj.json"]
    assert "tool_calls[0].function.arguments" in lines["arguments.traj.json"]
    assert "larger than" in lines["huge.traj.json"]
    # the two good files came through: every other file left nothing behind
    assert len(_only_whole_runs(out)) == 2
    assert "import: 2 run(s) written" in err and "6 skipped" in err


def test_a_run_directory_appears_whole_or_not_at_all(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("a", "b", "c"):
        (folder / f"{name}.traj.json").write_text(json.dumps(T.mini_v2(steps=2)))
    import ctxpolicy.importing.writer as writer

    real = writer.write_run_json

    def fail_on_b(folder_path, record, *args, **kwargs):
        if record["identity"]["task_id"] == "b":
            raise OSError(28, "No space left on device")
        return real(folder_path, record, *args, **kwargs)

    monkeypatch.setattr(writer, "write_run_json", fail_on_b)
    rc, out = _import(tmp_path, folder)
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    [line] = _skipped(err)
    assert "b.traj.json" in line and "No space left on device" in line
    assert _only_whole_runs(out) == ["a__a1", "c__a1"]  # no b__a1, and no partial folder left
    assert [p.name for p in find_run_dirs(out)] == ["a__a1", "c__a1"]


def test_no_link_out_of_the_tree_is_followed_and_no_unparsed_text_is_shown(tmp_path, capsys):
    secret = tmp_path / "shadow"
    secret.write_text(SECRET + "\n")
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.traj.json").write_text(json.dumps(T.mini_v2(steps=2)))
    (folder / "leak.traj.json").symlink_to(secret)
    (folder / "leak.jsonl").symlink_to(secret)
    (folder / "garbage.traj.json").write_text(SECRET)  # inside the tree, not JSON: not echoed either
    (folder / "garbage.jsonl").write_text(SECRET + "\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "other.traj.json").write_text(json.dumps(T.mini_v2(steps=2)))
    (folder / "linked-folder").symlink_to(outside)

    rc, out = _import(tmp_path, folder)
    err = capsys.readouterr().err
    assert rc == 1 and "NEVERSHOWN" not in err and "root:" not in err, err
    lines = _skipped(err)
    assert any("leak.traj.json" in line and "link out of" in line for line in lines), err
    assert any("leak.jsonl" in line and "link out of" in line for line in lines), err
    assert any("garbage.traj.json" in line and "not JSON" in line for line in lines), err
    assert any("garbage.jsonl" in line and "not JSON" in line for line in lines), err
    assert _only_whole_runs(out) == ["good__a1"]  # nothing came in through the folder link


def test_special_files_are_named_and_skipped(tmp_path, capsys, no_hang):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "good.traj.json").write_text(json.dumps(T.mini_v2(steps=2)))
    os.mkfifo(folder / "pipe.traj.json")
    given = tmp_path / "given.traj.json"
    os.mkfifo(given)

    rc, out = _import(tmp_path, folder, given)
    err = capsys.readouterr().err
    assert rc == 1
    lines = _skipped(err)
    assert f"import: skipped {folder / 'pipe.traj.json'}: not a regular file (a FIFO)" in lines, err
    assert f"import: skipped {given}: not a regular file (a FIFO)" in lines, err
    assert _only_whole_runs(out) == ["good__a1"]


def test_the_task_id_is_the_trajectorys_own_instance_id(tmp_path, capsys):
    data = T.mini_v2(steps=2)
    data["instance_id"] = "django__django-11099"
    renamed = tmp_path / "in" / "run-7.traj.json"
    renamed.parent.mkdir()
    renamed.write_text(json.dumps(data))
    plain = tmp_path / "in" / "astropy__astropy-12907.traj.json"
    plain.write_text(json.dumps(T.mini_v2(steps=2)))
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"resolved_ids": ["django__django-11099"]}))

    rc, out = _import(tmp_path, tmp_path / "in", extra=("--verdicts", str(report)))
    assert rc == 0, capsys.readouterr().err
    run = _cell(out) / "django__django-11099__a1"
    assert read_json(run / "run.json")["identity"]["task_id"] == "django__django-11099"
    assert read_json(run / "verdict.json")["resolved"] is True
    assert read_json(_cell(out) / "astropy__astropy-12907__a1" / "verdict.json")["resolved"] is False


def test_a_report_nested_too_deeply_is_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "a.traj.json").write_text(json.dumps(T.mini_v2(steps=2)))
    report = tmp_path / "report.json"
    report.write_text("[" * 100_000 + "]" * 100_000)
    rc, out = _import(tmp_path, tmp_path / "a.traj.json", extra=("--verdicts", str(report)))
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.strip() == f"import: {report}: nested too deeply to read"
