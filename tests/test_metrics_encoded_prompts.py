"""The aggregate's bulk reading of version-2 prompts (``metrics.encoded_prompts``) resolves every
prompt as ``rundir.resolve_prompts`` does, refuses every file that function refuses (the reader's
general path then names the problem), and gives a version-2 run the same sequences, command
counts and named errors as the same run written in version 1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy import rundir
from ctxpolicy.metrics import call_ids, records
from ctxpolicy.metrics.cost_methods import PrefixTrees
from ctxpolicy.metrics.encoded_prompts import expand
from ctxpolicy.rundir import CALLS_JSONL, MESSAGES_JSONL, PromptEncoder, resolve_prompts
from ctxpolicy.testing.runs import make_runs

IDS = [f"{n:016x}" for n in range(6)] + ["short", "é" * 16]


def _resolved(lines):
    try:
        return resolve_prompts(lines)
    except rundir.RunRecordError:
        return None


def _expanded(lines):
    encoded = expand(lines)
    return None if encoded is None else [encoded.prompt(k) for k in range(len(lines))]


@st.composite
def encoded_lines(draw):
    """Lines encoded by ``PromptEncoder`` from random prompts (well formed), then perhaps one
    field of one line changed to an odd value."""
    encoder = PromptEncoder()
    lines = []
    for index in range(draw(st.integers(0, 7))):
        kind = draw(st.sampled_from(["agent", "summary"]))
        ids = draw(st.lists(st.sampled_from(IDS), max_size=6))
        lines.append(encoder.encode_line({"index": index, "kind": kind, "message_ids": ids}))
    if lines and draw(st.booleans()):
        line = lines[draw(st.integers(0, len(lines) - 1))]
        where = draw(st.sampled_from(["index", "base", "keep", "add", "prompt", "message_ids"]))
        odd = draw(st.sampled_from([None, True, -1, 0, 1, 2, 3.0, 99, 2**70, -(2**70), "x", [], ["x", 1], {}]))
        if where in ("index", "prompt", "message_ids"):
            line[where] = odd
        else:
            line["prompt"][where] = odd
    return lines


@settings(max_examples=400, deadline=None)
@given(encoded_lines())
def test_bulk_expansion_resolves_or_refuses_as_resolve_prompts(lines):
    expanded, resolved = _expanded(lines), _resolved(lines)
    if resolved is None:
        assert expanded is None  # what resolve_prompts refuses goes to the general path, which names it
    elif expanded is not None:
        assert expanded == resolved


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(IDS), max_size=8), max_size=10))
def test_every_well_formed_file_is_expanded_in_bulk(prompts):
    encoder = PromptEncoder()
    lines = [
        encoder.encode_line({"index": 2 * k, "kind": "agent", "message_ids": ids}) for k, ids in enumerate(prompts)
    ]
    assert _expanded(lines) == prompts


def test_codes_of_fixed_width_ids_are_the_version_1_keys():
    ids = [f"{n:016x}" for n in (3, 1, 4, 1, 5)]
    keys, counts = call_ids.fixed_width_keys([",".join(f'"{i}"' for i in ids).encode()])
    assert counts.tolist() == [5]
    assert call_ids.id_keys(ids).tolist() == keys.tolist()
    assert call_ids.id_keys(["short"]) is None and call_ids.id_keys(["é" * 16]) is None


@pytest.fixture(scope="module")
def run_pair(tmp_path_factory):
    """One synthetic run with compressions and summary calls, written in version 1 and in version 2."""
    root = tmp_path_factory.mktemp("pair")
    pair = []
    for version in (1, 2):
        (run_dir,) = make_runs(
            root / f"v{version}",
            policies=["TRC+SU/Th/0.5"],
            models=["m"],
            benchmarks=["b"],
            tasks=1,
            attempts=1,
            calls_per_run=30,
            calls_version=version,
        )
        pair.append(run_dir)
    assert (
        b'"prompt":' in (pair[1] / CALLS_JSONL).read_bytes()
        and b'"prompt":' not in (pair[0] / CALLS_JSONL).read_bytes()
    )
    return tuple(pair)


def test_a_version_2_run_reads_as_its_version_1_twin(run_pair):
    v1, v2 = (records.parse_run(d) for d in run_pair)
    assert v1.commands == v2.commands and v1.agent == v2.agent and v1.events == v2.events
    assert v1.values == v2.values
    for field in ("codes", "tokens", "lengths"):
        assert np.array_equal(getattr(v1.sequences, field), getattr(v2.sequences, field)), field
    assert "summary" in {c["kind"] for c in rundir.read_call_lines(run_pair[1])}


def test_a_version_2_run_is_priced_over_its_prefix_tree_as_its_version_1_twin_over_positions(run_pair):
    v1, v2 = (records.read_run(d) for d in run_pair)
    assert isinstance(records.parse_run(run_pair[1]).sequences, PrefixTrees)
    assert not isinstance(records.parse_run(run_pair[0]).sequences, PrefixTrees)
    assert v1.calls.keys() == v2.calls.keys()
    for name in v1.calls:
        assert np.array_equal(v1.calls[name], v2.calls[name], equal_nan=v1.calls[name].dtype.kind == "f"), name
    assert {k: v for k, v in v1.row.items() if k != "run_dir"} == {k: v for k, v in v2.row.items() if k != "run_dir"}
    assert v2.row["cached_exact"] > 0 and v2.row["compressions"] > 0 and v2.row["summary_calls"] > 0


def test_an_unknown_id_is_named_with_its_first_agent_call_in_both_versions(run_pair, tmp_path):
    reasons = []
    for version, run_dir in enumerate(run_pair, 1):
        copy = tmp_path / f"v{version}"
        shutil.copytree(run_dir, copy)
        store = (copy / MESSAGES_JSONL).read_text().splitlines(keepends=True)
        (copy / MESSAGES_JSONL).write_text("".join(store[:3] + store[4:]))  # a message every later prompt holds
        with pytest.raises(records.RecordError) as caught:
            records.parse_run(copy)
        reasons.append(caught.value.reason)
    assert reasons[0] == reasons[1] and "is not in messages.jsonl" in reasons[0]


def test_a_broken_version_2_prompt_is_named_by_the_general_path(run_pair, tmp_path):
    copy = tmp_path / "broken"
    shutil.copytree(run_pair[1], copy)
    lines = (copy / CALLS_JSONL).read_text().splitlines()
    third = json.loads(lines[2])
    third["prompt"]["keep"] = 10_000
    lines[2] = json.dumps(third)
    (copy / CALLS_JSONL).write_text("\n".join(lines) + "\n")
    with pytest.raises(records.RecordError) as caught:
        records.parse_run(copy)
    assert "line 3" in caught.value.reason and "prompt.keep is 10000" in caught.value.reason
    assert Path(caught.value.path).name == CALLS_JSONL


def test_an_unknown_id_in_a_summary_prompt_alone_leaves_the_run_in_as_in_version_1(run_pair, tmp_path):
    """Only agent prompts are priced: a summary call's id missing from the store is no reason to
    leave a run out, in either version (the first summary call's prompt gets an id no store has)."""
    sequences = []
    for version, run_dir in enumerate(run_pair, 1):
        copy = tmp_path / f"v{version}"
        shutil.copytree(run_dir, copy)
        lines = [json.loads(line) for line in (copy / CALLS_JSONL).read_text().splitlines()]
        summary = next(line for line in lines if line["kind"] == "summary")
        if version == 1:
            summary["message_ids"].append("ffffffffffffffff")
        else:  # at its end: a later line keeps no more than the prompt had
            summary["prompt"]["add"].append("ffffffffffffffff")
        (copy / CALLS_JSONL).write_text("".join(json.dumps(line) + "\n" for line in lines))
        sequences.append(records.parse_run(copy).sequences)
    for field in ("codes", "tokens", "lengths"):
        assert np.array_equal(getattr(sequences[0], field), getattr(sequences[1], field)), field


def test_a_batch_of_both_versions_is_priced_as_each_run_alone(run_pair):
    rows, sizes, columns, problems, _ = records.read_runs(list(run_pair))
    alone = [records.read_run(d) for d in run_pair]
    assert not problems and sizes.tolist() == [len(a.calls["index"]) for a in alone]
    for name in columns:
        together = np.concatenate([a.calls[name] for a in alone])
        assert np.array_equal(columns[name], together, equal_nan=together.dtype.kind == "f"), name
    assert rows == [a.row for a in alone]
