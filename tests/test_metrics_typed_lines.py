"""The compiled path of calls.jsonl (``metrics.typed_lines``) takes no file the reader's general
path refuses, and reads every file it takes as the general path reads it, value for value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ctxpolicy import rundir
from ctxpolicy.metrics import records, typed_lines
from ctxpolicy.testing.runs import make_runs

TYPED, KINDS = records.CALL_TYPED_FIELDS, records.CALL_KINDS
NUMBER_FIELDS = ("start", "end", "latency_s")  # JSON numbers: an integer is a float here, as in the float column


def _typed(data: bytes):
    return typed_lines.read(data, TYPED, KINDS)


def _general(data: bytes):
    """The general path's reading of ``data``, or the reason it refuses it."""
    try:
        return records._read_calls_generally(data, Path("calls.jsonl"))
    except records.RecordError as exc:
        return exc.reason


def _same(fast: typed_lines.CallLines, general) -> None:
    assert isinstance(general, typed_lines.CallLines), general
    assert fast.kinds == general.kinds
    assert fast.reply_ids == general.reply_ids
    assert list(fast.values) == list(general.values)
    for name, column in fast.values.items():
        assert column == general.values[name], name
        if name not in NUMBER_FIELDS:  # the same types: an int stays an int, null stays None
            assert list(map(type, column)) == list(map(type, general.values[name])), name
    a, b = fast.prompts, general.prompts
    assert a.ids == b.ids
    for name in ("parent", "message", "first", "ends"):
        assert getattr(a, name).tolist() == getattr(b, name).tolist(), name
    assert a.lengths.tolist() == b.lengths.tolist()
    assert a.encoding[:2] == b.encoding[:2] and a.encoding[2].tolist() == b.encoding[2].tolist()
    assert a.at.tolist() == b.at.tolist()


def _line(number: int, **fields) -> dict:
    line = {
        "index": number,
        "kind": "agent",
        "step": number + 1,
        "start": 10.0 + number,
        "end": 11.5 + number,
        "latency_s": 1.5,
        "status": "ok",
        "error": None,
        "prompt_tokens": 100 + number,
        "completion_tokens": 7,
        "cached_tokens": None,
        "est_tokens_before": 100,
        "est_tokens_after": 100,
        "prompt": {
            "base": number - 1 if number else None,
            "keep": 2 * number,
            "add": [f"{number:015x}a", f"{number:015x}b"],
        },
        "events": [],
    }
    line.update(fields)
    return line


def _file(lines: list[dict]) -> bytes:
    return b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines)


def test_a_writers_files_take_the_compiled_path_and_read_as_the_general_path(tmp_path):
    """Every calls.jsonl the writers write (compression events, summary calls, repeated replies
    among them) is taken, and read as the general path reads it."""
    runs = make_runs(
        tmp_path, policies=["FC", "TR/Th/0.5", "SU/Th/0.5", "OTRC/St"], tasks=2, calls_per_run=30, calls_version=2
    )
    with_events = 0
    for run in runs:
        data = (run / rundir.CALLS_JSONL).read_bytes()
        fast = _typed(data)
        assert fast is not None, run
        _same(fast, _general(data))
        with_events += any(fast.values["events"])
    assert with_events  # the events were read too


REFUSED, READ = "refused", "read"


@pytest.mark.parametrize(
    "change, general",
    [
        pytest.param(
            lambda d: d.replace(b'"status":"ok"', b'"status":"\xff"', 1), REFUSED, id="not UTF-8, in a field not read"
        ),
        pytest.param(lambda d: d.replace(b'"error":null', b'"error":"\\ud800"', 1), REFUSED, id="a lone surrogate"),
        pytest.param(lambda d: d.replace(b'"latency_s":1.5', b'"latency_s":1e400', 1), REFUSED, id="past a double"),
        pytest.param(
            lambda d: d.replace(b'"events":[]', b'"events":[1e400],"events":[]', 1), REFUSED, id="bad, then repeated"
        ),
        pytest.param(
            lambda d: d.replace(b'"events":[]', b'"events":[{"kind":"TR"}],"events":[]', 1), READ, id="events twice"
        ),
        pytest.param(lambda d: d.replace(b'"events":[]', b'"events":{}', 1), REFUSED, id="events an object"),
        pytest.param(
            lambda d: d.replace(b'"events":[]', b'"events":[' + b"[" * 1100 + b"]" * 1100 + b"]", 1),
            REFUSED,
            id="too deep",
        ),
        pytest.param(lambda d: d.replace(b'"step":1', b'"step":NaN', 1), REFUSED, id="NaN"),
        pytest.param(lambda d: d[:-1], REFUSED, id="no newline at the end"),
        pytest.param(lambda d: d.replace(b"\n", b"\n\n", 1), READ, id="an empty line"),
        pytest.param(lambda d: d.replace(b'{"index":1,', b'{"index":1,"index":1,', 1), READ, id="a key twice"),
        pytest.param(lambda d: d.replace(b'"index":2', b'"index":0', 1), REFUSED, id="an index twice"),
    ],
)
def test_a_hostile_file_is_refused_by_both_paths_or_read_alike(change, general):
    data = change(_file([_line(k) for k in range(4)]))
    fast, read = _typed(data), _general(data)
    assert isinstance(read, typed_lines.CallLines) == (general == READ), read
    if fast is not None:
        _same(fast, read)  # so never a file the general path refuses


@pytest.mark.parametrize(
    "fields, taken",
    [
        ({"step": 2.0}, False),  # a whole float for an integer: the general path takes it
        ({"prompt_tokens": 3.0}, False),
        ({"stray": 1}, False),  # a field the schema does not name
        ({"prompt": {"base": 0, "keep": 2, "add": ["x", "y"], "more": 1}}, False),
        ({"events": [{"count": 2**70}]}, True),  # past 64 bits: a float in both
    ],
)
def test_what_the_compiled_path_leaves_is_read_by_the_general_path(fields, taken):
    data = _file([_line(0), _line(1, **fields), _line(2)])
    fast, general = _typed(data), _general(data)
    assert isinstance(general, typed_lines.CallLines)
    assert (fast is not None) == taken
    if taken:
        _same(fast, general)
        assert general.values["events"][1] == [{"count": float(2**70)}]


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**66), 2**66),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
)


@st.composite
def _files(draw) -> bytes:
    """Well-formed lines, each field given an odd value now and then; the lines serialised with
    or without non-ASCII escaped."""
    n = draw(st.integers(1, 5))
    lines = [_line(k) for k in range(n)]
    for line in lines:
        for name in draw(
            st.lists(
                st.sampled_from([*TYPED, "kind", "status", "error", "reply_id", "attempts", "provider_cost_usd"]),
                max_size=3,
            )
        ):
            if draw(st.booleans()):
                line.pop(name, None)
            else:
                line[name] = draw(
                    _VALUES
                    if name != "events"
                    else st.one_of(
                        _VALUES, st.lists(st.dictionaries(st.text(max_size=3), _VALUES, max_size=3), max_size=2)
                    )
                )
        if draw(st.integers(0, 9)) == 0:
            line["prompt"]["keep"] = draw(st.integers(-1, 12))
    ascii_only = draw(st.booleans())
    return b"".join(json.dumps(line, ensure_ascii=ascii_only).encode() + b"\n" for line in lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_files())
@example(_file([_line(0, reply_id="0123456789abcdef"), _line(1, kind="summary")]))
def test_the_compiled_path_reads_a_file_as_the_general_path_or_leaves_it(data):
    fast, general = _typed(data), _general(data)
    event(
        "taken" if fast is not None else "left, read" if isinstance(general, typed_lines.CallLines) else "left, refused"
    )
    if fast is not None:
        _same(fast, general)
