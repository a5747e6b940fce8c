"""The run directory's contract (ctxpolicy.rundir): names, completeness, finding runs, stale/, atomic
records, and the one calls.jsonl line type."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from ctxpolicy import rundir
from ctxpolicy.rundir import CallRecord
from ctxpolicy.schemas import schema
from ctxpolicy.threshold_settings import FIXED, SETTINGS


def _run(path: Path, complete: bool | None = True) -> Path:
    """A run directory: calls.jsonl always, run.json unless ``complete`` is None."""
    path.mkdir(parents=True, exist_ok=True)
    (path / rundir.CALLS_JSONL).write_text("")
    if complete is not None:
        rundir.write_run_json(path, {"complete": complete})
    return path


def test_layout_names_a_run_directory_by_cell_task_and_attempt(tmp_path):
    assert (
        rundir.run_dir(tmp_path, "local", "qwen", "FC", "tinyweb-001", 2)
        == tmp_path / "local" / "qwen" / "FC" / "tinyweb-001__a2"
    )


@pytest.mark.parametrize(
    "content, complete",
    [
        (None, False),
        ('{"complete": tr', False),
        ('{"complete": false}', False),
        ('{"complete": "true"}', False),
        ("[true]", False),
        ('{"complete": true}', True),
    ],
)
def test_only_a_parsable_run_json_saying_complete_true_counts(tmp_path, content, complete):
    if content is not None:
        (tmp_path / "run.json").write_text(content)
    assert rundir.is_complete_run(tmp_path) is complete


def test_reading_a_record_names_the_file_and_what_is_wrong(tmp_path):
    with pytest.raises(rundir.RunRecordError, match=r"run\.json: missing"):
        rundir.read_run_json(tmp_path)
    (tmp_path / "run.json").write_text("[1]")
    with pytest.raises(rundir.RunRecordError, match=r"run\.json: not a JSON object"):
        rundir.read_run_json(tmp_path)
    (tmp_path / "run.json").write_text("{")
    with pytest.raises(rundir.RunRecordError, match=r"run\.json: not valid JSON"):
        rundir.read_run_json(tmp_path)
    assert rundir.read_verdict(tmp_path) is None


def test_finding_runs_skips_stale_and_workspace_and_never_enters_a_run(tmp_path):
    cell = tmp_path / "local" / "qwen" / "FC"
    done = _run(cell / "a__a1")
    unfinished = _run(cell / "b__a1", complete=None)
    _run(done / "workspace" / "nested__a1")  # inside a run: not a run of the cell
    _run(cell / "stale" / "a__a1")
    _run(tmp_path / "workspace" / "x__a1")
    assert rundir.find_run_dirs(tmp_path) == [done, unfinished]
    assert rundir.find_run_dirs([tmp_path], markers=(rundir.RUN_JSON,)) == [done]
    assert rundir.find_run_dirs(done) == [done]  # a run directory named directly
    assert rundir.runs_of_cell(cell) == [done]
    with pytest.raises(NotADirectoryError, match="nowhere: no such directory"):
        rundir.find_run_dirs(tmp_path / "nowhere")


def _walked_runs(root, markers):
    """The run directories as ``os.walk`` finds them: folders holding a marker that is no folder,
    never entered, ``workspace/``, ``stale/`` and partial folders passed by (the definition the
    walk that looks markers up by name must keep)."""
    found = []
    for directory, subdirs, files in os.walk(root):
        if any(name in files for name in markers):
            found.append(Path(directory))
            subdirs.clear()
        else:
            subdirs[:] = [
                d for d in subdirs if d not in rundir.SKIPPED_DIRS and not d.startswith(rundir.PARTIAL_PREFIX)
            ]
    return sorted(found)


def test_finding_runs_gives_what_os_walk_gives_on_an_odd_tree(tmp_path):
    root, cell = tmp_path / "root", tmp_path / "root" / "local" / "FC"
    _run(cell / "plain__a1")
    _run(cell / "plain__a1" / "nested__a1")  # inside a run: never entered
    (cell / "calls_only__a1").mkdir(parents=True)
    (cell / "calls_only__a1" / rundir.CALLS_JSONL).write_text("")
    (cell / "folder_marker" / rundir.RUN_JSON).mkdir(parents=True)  # a folder named run.json marks nothing
    _run(cell / "folder_marker" / "below__a1")
    (tmp_path / "elsewhere.json").write_text("{}")
    (cell / "linked__a1").mkdir()
    (cell / "linked__a1" / rundir.RUN_JSON).symlink_to(tmp_path / "elsewhere.json")
    (cell / "dangling__a1").mkdir()
    (cell / "dangling__a1" / rundir.RUN_JSON).symlink_to(tmp_path / "gone.json")  # no folder: a marker
    (cell / "folder_link").mkdir()
    (cell / "folder_link" / rundir.MESSAGES_JSONL).symlink_to(tmp_path, target_is_directory=True)
    _run(cell / "folder_link" / "under__a1")
    (cell / "fifo__a1").mkdir()
    os.mkfifo(cell / "fifo__a1" / rundir.RUN_JSON)
    (root / "local" / "to_cell").symlink_to(cell, target_is_directory=True)  # a link to a folder: not entered
    (root / "local" / "to_run").symlink_to(cell / "plain__a1", target_is_directory=True)  # nor to a run
    _run(tmp_path / "outside__a1")
    (cell / "to_outside__a1").symlink_to(tmp_path / "outside__a1", target_is_directory=True)  # in the cell too
    _run(cell / f"{rundir.PARTIAL_PREFIX}half__a1")
    _run(root / "local" / "workspace" / "w__a1")
    (root / "empty").mkdir()
    for markers in (rundir.RUN_FILES, (rundir.RUN_JSON,)):
        expected = _walked_runs(root, markers)
        assert rundir.find_run_dirs(root, markers) == expected
        assert rundir.runs_of_cell(cell, markers) == [p for p in expected if p.parent == cell]  # one rule
    assert [p.name for p in _walked_runs(root, rundir.RUN_FILES)] == [
        "calls_only__a1",
        "dangling__a1",
        "fifo__a1",
        "under__a1",
        "below__a1",
        "linked__a1",
        "plain__a1",
    ]  # the tree is as odd as meant: every kind of marker found, every trap passed by


def test_a_folder_whose_markers_cannot_be_looked_up_is_judged_by_its_listing(tmp_path, monkeypatch):
    run, folder = tmp_path / "run__a1", tmp_path / "folder_marker"
    _run(run)
    (folder / rundir.RUN_JSON).mkdir(parents=True)
    lstat = os.lstat

    def refused(path, *args, **kwargs):  # a lookup that fails for another reason than no such entry
        if Path(path).parent in (run, folder):
            raise PermissionError(13, "Permission denied", str(path))
        return lstat(path, *args, **kwargs)

    monkeypatch.setattr(rundir.os, "lstat", refused)
    assert rundir._holds_marker(str(run), rundir.RUN_FILES) is None  # the listing decides
    assert rundir.is_run_dir(run) and not rundir.is_run_dir(folder)
    assert rundir.find_run_dirs(tmp_path) == [run]


def test_set_aside_moves_a_run_to_stale_where_no_reader_counts_it(tmp_path):
    cell = tmp_path / "FC"
    first = rundir.set_aside(_run(cell / "a__a1"), cell)
    second = rundir.set_aside(_run(cell / "a__a1"), cell)
    assert (first, second) == (cell / "stale" / "a__a1", cell / "stale" / "a__a1.2")
    assert rundir.find_run_dirs(tmp_path) == [] and rundir.runs_of_cell(cell) == []


def test_record_writes_are_atomic_and_keep_the_layouts(tmp_path, monkeypatch):
    path = rundir.write_run_json(tmp_path, {"complete": True, "task": "é", "where": Path("/x")})
    assert path.read_bytes() == b'{\n  "complete": true,\n  "task": "\xc3\xa9",\n  "where": "/x"\n}\n'
    verdict = rundir.write_verdict(tmp_path, {"resolved": True, "harness": "h", "log": "l", "report": {}})
    assert list(json.loads(verdict.read_text())) == ["harness", "log", "report", "resolved"]

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        rundir.write_run_json(tmp_path, {"complete": False})
    assert rundir.is_complete_run(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json", "verdict.json"]


def test_reset_removes_a_previous_attempt_but_nothing_else(tmp_path):
    for name in (*rundir.RUN_OUTPUTS, ".run.json.abc.tmp", "notes.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "workspace" / "src").mkdir(parents=True)
    rundir.reset_run_dir(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def _agent_call(**changes) -> dict:
    """A call line exactly as the agent harness wrote it before CallRecord (agent.ok_call)."""
    line = {
        "index": 3,
        "kind": "agent",
        "step": 2,
        "start": 1764430000.12,
        "end": 1764430004.5,
        "latency_s": 4.38,
        "status": "ok",
        "error": None,
        "prompt_tokens": 812,
        "completion_tokens": 95,
        "cached_tokens": 640,
        "est_tokens_before": 830,
        "est_tokens_after": 790,
        "message_ids": ["3fa2b4c6d8e0f1a2", "00112233445566ff"],
        "events": [{"primitive": "TR", "trigger": "Th", "depth": 0.5, "note": "ü"}],
        "attempts": 1,
        "finish_reason": "stop",
        "model": "qwen",
    }
    return {**line, **changes}


def test_a_call_line_is_byte_for_byte_the_format_before_call_record():
    old = _agent_call()
    assert CallRecord(**old).line() == json.dumps(old, ensure_ascii=False, default=str) + "\n"
    replayed = _agent_call(latency_s=0.0, cached_tokens=None, attempts=None, finish_reason=None, model=None)
    assert CallRecord(**replayed).line() == json.dumps(replayed, ensure_ascii=False) + "\n"


def test_usage_source_is_written_last_and_only_when_set():
    local = CallRecord(**_agent_call(), usage_source="local").to_json()
    assert list(local)[-1] == "usage_source" and local["usage_source"] == "local"
    assert "usage_source" not in CallRecord(**_agent_call()).to_json()


def test_call_record_fields_are_the_call_schema_properties_and_its_lines_validate():
    call_schema = schema("call")
    assert set(rundir.CALL_FIELDS) | {rundir.PROMPT} == set(call_schema["properties"])
    # the prompt is required as either version writes it: message_ids (1) or prompt (2)
    both = [rundir.MESSAGE_IDS, rundir.PROMPT]
    assert [f for f in rundir.CALL_FIELDS[: len(call_schema["required"]) + 1] if f not in both] == call_schema[
        "required"
    ]
    assert call_schema["oneOf"] == [{"required": [rundir.MESSAGE_IDS]}, {"required": [rundir.PROMPT]}]
    validator = Draft202012Validator(call_schema)
    for changes in (
        {},
        {"kind": "summary", "events": []},
        {"usage_source": "local"},
        {"status": "error", "error": "EndpointError: HTTP 500", "prompt_tokens": None, "completion_tokens": None},
    ):
        call = CallRecord(**{**_agent_call(), "events": [], **changes})
        for line in (json.loads(call.line()), json.loads(rundir.PromptEncoder().line(call))):
            assert list(validator.iter_errors(line)) == [], changes
    assert rundir.CALL_KINDS == tuple(call_schema["properties"]["kind"]["enum"])


def test_numbering_gives_a_copy_its_index():
    call = CallRecord(**_agent_call())
    assert call.numbered(7).index == 7 and call.index == 3


def test_threshold_setting_names_are_the_run_schema_enum():
    enum = schema("run")["properties"]["identity"]["properties"]["threshold_setting"]["enum"]
    assert enum == [*SETTINGS, FIXED, None]


def test_open_regular_reads_files_and_links_inside_and_refuses_the_rest(tmp_path):
    import os

    import pytest

    from ctxpolicy.rundir import NotRegularFileError, open_regular, read_regular_bytes

    run = tmp_path / "run"
    run.mkdir()
    (run / "calls.jsonl").write_bytes(b"{}\n")
    (run / "inside").symlink_to(run / "calls.jsonl")
    assert read_regular_bytes(run / "inside", within=run) == b"{}\n"
    with open_regular(run / "calls.jsonl", encoding="utf-8") as handle:
        assert handle.read() == "{}\n"
    (tmp_path / "outside.txt").write_text("x")
    (run / "out").symlink_to(tmp_path / "outside.txt")
    assert read_regular_bytes(run / "out") == b"x"  # no folder to stay in: any regular file
    with pytest.raises(NotRegularFileError, match="a symbolic link out of"):
        read_regular_bytes(run / "out", within=run)
    os.mkfifo(run / "pipe")
    with pytest.raises(NotRegularFileError, match=r"pipe: not a regular file \(a FIFO\)"):
        read_regular_bytes(run / "pipe", within=run)
    with pytest.raises(NotRegularFileError, match="a character device"):
        read_regular_bytes("/dev/null")
    with pytest.raises(IsADirectoryError):
        read_regular_bytes(run)
    with pytest.raises(FileNotFoundError):
        read_regular_bytes(run / "nothing")
