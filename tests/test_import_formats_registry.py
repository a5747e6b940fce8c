"""The import formats are one table (``importing.formats.TABLE``): detection, reading, the command's
``--format`` and the folders it searches read its rows, and the config schema's enum names them."""

from __future__ import annotations

import json

import pytest
import yaml

from ctxpolicy.cli import main as cli
from ctxpolicy.study.config import SCHEMA_PATH
from ctxpolicy.importing import formats
from ctxpolicy.rundir import find_run_dirs, read_json


@pytest.fixture
def table(monkeypatch):
    """The table as it is, restored after the test."""
    monkeypatch.setattr(formats, "TABLE", dict(formats.TABLE))
    return formats


def _is_pairs(name, data):
    return isinstance(data, dict) and isinstance(data.get("pairs"), list)


def _read_pairs(name, text, data):
    """{"pairs": [[task, reply], ...]}: one user message and one assistant reply per conversation."""
    return [
        formats.read_openai(
            task,
            {
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": task},
                    {"role": "assistant", "content": reply},
                ]
            },
        )
        for task, reply in data["pairs"]
    ]


def test_a_format_added_through_its_row_alone_is_detected_named_and_imported(table, tmp_path, capsys):
    table.register(formats.Format("pairs", _is_pairs, _read_pairs, "task and reply pairs", patterns=("*.pairs",)))
    assert formats.names()[-1] == "pairs"
    text = json.dumps({"pairs": [["t-1", "THOUGHT: done\n```bash\necho ok\n```"]]})
    assert formats.detect_format("log.json", json.loads(text)) == "pairs"
    (trajectory,) = formats.read_trajectories("log.json", text)
    assert trajectory.task_id == "t-1" and [m["role"] for m in trajectory.history] == ["system", "user", "assistant"]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "log.pairs").write_text(text)  # found in a folder by the format's own pattern
    out = tmp_path / "runs"
    argv = ["import", "-i", str(folder), "--format", "pairs", "--benchmark", "b", "--model", "m", "--out", str(out)]
    assert cli(argv) == 0, capsys.readouterr().err
    (run,) = find_run_dirs(out)
    assert read_json(run / "run.json")["identity"]["task_id"] == "t-1"
    assert "pairs" in formats.names() and "mini-swe-agent" in formats.names()


def test_an_unregistered_format_is_refused_naming_the_known_ones(capsys, tmp_path):
    argv = [
        "import",
        "-i",
        str(tmp_path),
        "--format",
        "pairs",
        "--benchmark",
        "b",
        "--model",
        "m",
        "--out",
        str(tmp_path),
    ]
    assert cli(argv) == 2
    assert "allowed: auto, mini-swe-agent, swe-agent, openai" in capsys.readouterr().err
    with pytest.raises(ValueError, match="registered already"):
        formats.register(formats.TABLE["openai"])


def test_the_config_schema_names_exactly_the_registered_formats():
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    assert schema["properties"]["imported"]["properties"]["format"]["enum"] == [formats.AUTO, *formats.names()]


def test_detection_claims_each_shape_in_table_order():
    mini = {"trajectory_format": "mini-swe-agent-1.1", "messages": [], "history": []}
    assert formats.detect_format("x.traj.json", mini) == "mini-swe-agent"
    assert formats.detect_format("x.traj.json", {"history": [], "messages": []}) == "swe-agent"
    assert formats.detect_format("x.traj.json", {"messages": []}) == "mini-swe-agent"
    assert formats.detect_format("x.json", {"messages": []}) == "openai"
    assert formats.detect_format("x.traj.json", []) == "mini-swe-agent"
    assert formats.detect_format("x.json", []) == "openai"
    with pytest.raises(formats.FormatProblem, match="no trajectory format recognised"):
        formats.detect_format("x.json", {"other": 1})
