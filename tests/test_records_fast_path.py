"""The aggregate reader's fast paths decide exactly as the generic ones: the compiled record check
(``schemas.quick_check``) never passes what the Draft 2020-12 validator refuses, and a run's
record files are each opened once."""

from __future__ import annotations

import copy
import itertools
import os
from pathlib import Path

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from ctxpolicy import rundir
from ctxpolicy.metrics import records
from ctxpolicy.schemas import quick_check, reading_view, schema
from ctxpolicy.testing.runs import make_runs

ODD_VALUES = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    2.5,
    -0.5,
    2**53,
    2**60,
    "",
    "x",
    "primary",
    "Th",
    [],
    {},
    [1],
    {"a": 1},
]


def _paths(record: dict, prefix=()):
    for key, value in record.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from _paths(value, (*prefix, key))


def _variants(record: dict):
    """The record with each field (nested ones too) set to each odd value, and removed."""
    for path in list(_paths(record)):
        for value in [*ODD_VALUES, KeyError]:
            changed = copy.deepcopy(record)
            holder = changed
            for key in path[:-1]:
                holder = holder[key]
            if value is KeyError:
                del holder[path[-1]]
            else:
                holder[path[-1]] = value
            yield changed


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return make_runs(root, policies=["FC"], tasks=1, attempts=1, calls_per_run=6)[0]


@pytest.mark.parametrize("name", ["run", "verdict"])
def test_quick_check_agrees_with_the_generic_validator(name, one_run):
    read, needed = {
        "run": (records.RUN_READ, records.RUN_NEEDED),
        "verdict": (records.VERDICT_READ, records.VERDICT_NEEDED),
    }[name]
    view = reading_view(schema(name), read, needed)
    quick, full = quick_check(view), Draft202012Validator(view)
    assert quick is not None
    record = rundir.read_record(one_run / f"{name}.json")
    record = {**record, "error": "boom"} if name == "run" else {**record, "report": {"time_limited": True}}
    assert quick(record) and full.is_valid(record)  # a valid record takes the fast path
    checked = 0
    for variant in itertools.chain(_variants(record), [None, [], "x", 1]):
        if quick(variant):
            assert full.is_valid(variant), variant  # never passes what the validator refuses
        checked += 1
    refused = sum(not full.is_valid(v) for v in _variants(record))
    assert checked > 100 and refused > 40


def test_quick_check_searches_a_pattern_as_the_validator_does():
    view = {"type": ["string", "null"], "pattern": "^(Th|St)$"}
    quick, full = quick_check(view), Draft202012Validator(view)
    for value in ("Th", "St", None, "Tn", "xTh", "", 5):
        assert bool(quick(value)) == full.is_valid(value), value


def test_quick_check_hands_unknown_keywords_to_the_validator():
    assert quick_check({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}}) is None
    assert quick_check({"enum": [1, 2]}) is None  # numeric enums: 1 == True in Python


def test_each_record_file_is_opened_once(one_run, monkeypatch):
    opened = []
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        opened.append(os.path.basename(os.fspath(path)))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    records.read_run(one_run)
    for name in ("run.json", "calls.jsonl", "messages.jsonl", "verdict.json"):
        assert opened.count(name) == 1, (name, opened)


def test_a_run_without_verdict_reads_as_ungraded(one_run, tmp_path):
    import shutil

    copy_dir = tmp_path / one_run.name
    shutil.copytree(one_run, copy_dir)
    (copy_dir / "verdict.json").unlink()
    assert records.read_run(copy_dir).row["has_verdict"] is False
    (copy_dir / "verdict.json").symlink_to(copy_dir / "nowhere.json")  # a dangling link is no absent verdict
    with pytest.raises(records.RecordError, match="missing"):
        records.read_run(copy_dir)


def test_runs_read_by_name_come_back_in_sorted_order_with_integer_columns(tmp_path):
    """Runs are read grouped by name (a source's replays side by side), yet the tables keep the
    sorted order; a chunk whose runs are all left out leaves the integer call columns integers."""
    from ctxpolicy.metrics.aggregate import aggregate

    runs = make_runs(tmp_path, policies=["FC", "TRC/Th"], tasks=4, attempts=2, calls_per_run=5)
    assert len(runs) == 16
    for broken in sorted(runs)[:4]:  # the first chunk of each process, all of it
        (broken / "calls.jsonl").write_bytes(b"{")
    tables = aggregate([tmp_path], processes=2)
    assert len(tables.problems) == 4
    assert tables.runs["run_dir"].tolist() == sorted(str(r) for r in runs)[4:]
    assert [str(p.path.parent) for p in tables.problems] == sorted(str(r) for r in runs)[:4]
    for column in ("index", "prompt_tokens", "completion_tokens", "n_events"):
        assert tables.calls[column].dtype == "int64", column
    first = tables.calls.groupby("run_dir", observed=True, sort=False).size()
    assert list(first.index) == tables.runs["run_dir"].tolist()
    single = aggregate([tmp_path], processes=1)
    assert single.calls.equals(tables.calls) and single.runs.equals(tables.runs)


def test_a_run_directory_reached_twice_is_listed_once_by_its_first_path(tmp_path, monkeypatch):
    runs = sorted(make_runs(tmp_path / "runs", policies=["FC"], tasks=2, attempts=1, calls_per_run=3))
    (tmp_path / "link").symlink_to(tmp_path / "runs")
    monkeypatch.chdir(tmp_path)
    cell = runs[0].parent
    found = rundir.find_run_dirs([tmp_path / "runs", cell, "runs", tmp_path / "link", runs[1]])
    assert found == runs  # overlapping roots, a relative path and a link: each run once, first path


def _calls_written_with(run_dir, tmp_path, separators):
    """A copy of ``run_dir`` whose calls.jsonl is written again with ``separators``."""
    import json
    import shutil

    copy_dir = tmp_path / f"{run_dir.name}-{len(separators[0])}{len(separators[1])}"
    shutil.copytree(run_dir, copy_dir)
    lines = (run_dir / "calls.jsonl").read_text().splitlines()
    (copy_dir / "calls.jsonl").write_text(
        "".join(json.dumps(json.loads(line), separators=separators) + "\n" for line in lines)
    )
    return copy_dir


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": "), (",", " : ")])
def test_calls_written_with_any_json_spacing_read_the_same(one_run, tmp_path, separators):
    """The byte-level fast path (compact id arrays) and the general one give the same columns."""
    expected = records.read_run(one_run).calls
    got = records.read_run(_calls_written_with(one_run, tmp_path, separators)).calls
    assert set(got) == set(expected)
    for name, column in expected.items():
        np.testing.assert_array_equal(got[name], column, err_msg=name)


def test_id_arrays_are_cut_out_once_per_line_whatever_the_spacing():
    from ctxpolicy.metrics.call_ids import split_id_arrays

    compact = b'{"index":0,"message_ids":["aaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbb"],"x":1}\n{"message_ids":[]}\n'
    rest, arrays = split_id_arrays(compact, 2)
    assert arrays == [b'"aaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbb"', b""]
    assert b'"message_ids":null'.join(rest) == b'{"index":0,"message_ids":null,"x":1}\n{"message_ids":null}\n'
    spaced = b'{"message_ids": ["aaaaaaaaaaaaaaaa"]}\n{"message_ids":["bbbbbbbbbbbbbbbb"]}\n'
    assert split_id_arrays(spaced, 2)[1] == [b'"aaaaaaaaaaaaaaaa"', b'"bbbbbbbbbbbbbbbb"']
    # a second key per line (inside an event) is no line's prompt: the reader parses the lines whole
    nested = b'{"message_ids":["aaaaaaaaaaaaaaaa"],"events":[{"message_ids":[]}]}\n'
    assert split_id_arrays(nested, 1) is None
    assert split_id_arrays(b'{"index":0}\n', 1) is None


@pytest.mark.parametrize(
    "data",
    [
        b'{"index":0,"message_ids":["aaaaaaaaaaaaaaaa","bbbbbbbbbbbbbbbb"],"x":1}\n{"message_ids":[]}\n',
        b"",
        b'{"index":0}\n',
        b'{"message_ids": ["aaaaaaaaaaaaaaaa"]}\n{"message_ids":["bbbbbbbbbbbbbbbb"]}\n',
        b'{"message_ids":["aaaaaaaaaaaaaaaa"],"events":[{"message_ids":[]}]}\n',
        b'{"message_ids":["aaaaaaaaaaaaaaaa"]}\n\n{"message_ids":["bbbbbbbbbbbbbbbb"]}\n',  # an empty line
        b'{"message_ids":["aaaa\n","b"]}\n',  # a newline inside an array
        b'{"message_ids":["message_ids"]}\n',  # the key's name as an id
        b'{"message_ids":["aaaaaaaaaaaaaaaa"],"y":"\\"message_ids\\""}\n',
        b'{"a":"x\\"message_ids","message_ids":["aaaaaaaaaaaaaaaa"]}\n',
        b'{"message_ids":["aaaaaaaaaaaaaaaa"],"b":1}\n{"message_ids":["aaaa',  # cut short
        b'{"message_ids":["aaaaaaaaaaaaaaaa"]}{"message_ids":["bbbbbbbbbbbbbbbb"]}\n',  # two on a line
        b'{"message_ids":["aaaaaaaaaaaaaaaa"]}\n{"message_ids": null}\n',
        b'{"message_ids":["aaaaaaaaaaaaaaaa"],"e":[{"message_ids": ["bbbbbbbbbbbbbbbb"]}]}\n',  # spaced, nested
    ],
)
def test_lines_are_split_as_by_counting_the_whole_file(data):
    """``split_lines`` counts newlines and keys between the arrays only: the same cut (or None)
    as counting them over the whole file."""
    from ctxpolicy.metrics.call_ids import split_id_arrays, split_lines

    assert split_lines(data) == (split_id_arrays(data, data.count(b"\n")) if b"\n\n" not in data else None)


def test_fixed_width_keys_agree_between_compact_and_spaced_arrays():
    from ctxpolicy.metrics.call_ids import fixed_width_keys

    ids = ["0123456789abcdef", "fedcba9876543210", "0123456789abcdef"]
    compact = [",".join(f'"{i}"' for i in ids[:2]).encode(), b"", f'"{ids[2]}"'.encode()]
    spaced = [b", ".join(a.split(b",")) if a else a for a in compact]
    (keys, lengths), (spaced_keys, spaced_lengths) = fixed_width_keys(compact), fixed_width_keys(spaced)
    assert lengths.tolist() == spaced_lengths.tolist() == [2, 0, 1]
    assert keys.tolist() == spaced_keys.tolist()
    assert keys[0] == keys[2] != keys[1]  # equal ids, equal keys
    assert fixed_width_keys([b'"0123456789abcde"']) is None  # 15 characters: not the contract's ids
    # rows of the compact width whose separator is not a comma are no compact array
    assert fixed_width_keys([b'"0123456789abcdef"x"0123456789abcdef"']) is None


@pytest.mark.parametrize(
    ("data", "values"),
    [
        (b'{"a":1}\n{"a":2}\n', [{"a": 1}, {"a": 2}]),
        (b'\n{"a":1}\n\n\n{"a":2}\n\n', [{"a": 1}, {"a": 2}]),  # empty lines are skipped
        (b'{"a":1}\n   \n{"a":2}\n', "corrupt JSON lines"),  # a line of blanks alone is no empty line
        (b'{"a":1}\n\n   \n{"a":2}\n', [{"a": 1}, {"a": 2}]),  # but goes with one
        (b"", []),
        (b'{"a":1}\n{"a":\n', "corrupt line 2"),
        (b'\n\n{"a":1}\n{oops}\n', "corrupt line 4"),
        (b'{"a":1}', "partial: last line has no newline"),
    ],
)
def test_json_lines_parse_in_one_call_and_name_the_corrupt_line(data, values):
    path = Path("calls.jsonl")
    if isinstance(values, list):
        assert records._parse_lines(data, path) == values
    else:
        with pytest.raises(records.RecordError, match=values):
            records._parse_lines(data, path)
