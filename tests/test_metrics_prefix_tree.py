"""A version-2 record's prompts are priced over their prefix tree (``records._encoded_sequences``,
``cost.shared_prefix_tokens``, ``anthropic._count_trees``) exactly as the same prompts laid end to
end are priced position by position (``cost.exact_cached_flat``, ``anthropic.count``): checked on
random prompts that grow, are cut back to an earlier prompt's prefix and start afresh, over one run
and over several runs counted together, with start times that let cache entries expire."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.metrics import records, tree_kernels
from ctxpolicy.metrics.cost_methods import PrefixTrees, RunCalls, Sequences, anthropic
from ctxpolicy.metrics.encoded_prompts import expand
from ctxpolicy.rundir import PromptEncoder

IDS = [f"{n:016x}" for n in range(7)]


@st.composite
def one_run(draw):
    """(calls.jsonl lines in version 2, the message store, the agent calls' server prompts and
    start times): prompts that extend the previous one, keep a prefix of an earlier one and add
    to it, or are new; some calls are summary calls."""
    tokens = {mid: draw(st.integers(0, 900)) for mid in IDS}
    encoder, lines, prompts = PromptEncoder(), [], []
    for index in range(draw(st.integers(1, 9))):
        how = draw(st.sampled_from(["extend", "cut", "new"])) if prompts else "new"
        added = draw(st.lists(st.sampled_from(IDS), max_size=3))
        if how == "extend":
            ids = prompts[-1] + added
        elif how == "cut":
            earlier = draw(st.sampled_from(prompts))
            ids = earlier[: draw(st.integers(0, len(earlier)))] + added
        else:
            ids = added
        prompts.append(ids)
        kind = draw(st.sampled_from(["agent", "agent", "summary"]))
        lines.append(encoder.encode_line({"index": index, "kind": kind, "message_ids": ids}))
    agent = [line["kind"] == "agent" for line in lines]
    n = sum(agent)
    server = draw(st.lists(st.integers(0, 4000), min_size=n, max_size=n))
    gaps = draw(st.lists(st.sampled_from([1.0, 60.0, 250.0, 301.0, 900.0, math.nan]), min_size=n, max_size=n))
    start = np.cumsum(np.nan_to_num(gaps)) + np.where(np.isnan(gaps), np.nan, 0.0)
    return lines, tokens, agent, server, start


def _priced(calls: RunCalls) -> dict[str, np.ndarray]:
    counts = anthropic.count(calls, 1)
    return {
        "ideal": calls.ideal_shared(),
        "local": calls.local_tokens(),
        "anthropic_cached": counts.cached,
        "anthropic_written": counts.written,
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(one_run(), min_size=1, max_size=3))
def test_a_prefix_tree_prices_as_the_positions_it_stands_for(runs):
    trees, server, start, sizes = [], [], [], []
    for lines, tokens, agent, prompts, times in runs:
        encoded = expand(lines)
        assert encoded is not None
        indexes = [line["index"] for line in lines]
        (tree,) = records._encoded_sequences(encoded, np.array(agent), tokens, Path("calls.jsonl"), indexes).trees
        trees.append(tree)
        server += prompts
        start.append(times)
        sizes.append(len(prompts))
    positions = [tree.positions() for tree in trees]
    laid_out = Sequences(*(np.concatenate([getattr(p, f) for p in positions]) for f in ("codes", "tokens", "lengths")))
    common = dict(start=np.concatenate(start), runs=np.array(sizes) if len(runs) > 1 else None)
    by_tree = _priced(RunCalls(server, sequences=PrefixTrees(trees), **common))
    by_position = _priced(RunCalls(server, sequences=laid_out, **common))
    for name in by_tree:
        assert by_tree[name].tolist() == by_position[name].tolist(), name


def test_a_tree_holds_one_node_per_distinct_prefix_and_reads_back_every_prompt():
    prompts = [["a", "b"], ["a", "b", "c"], ["a", "x"], ["a", "b", "c", "d"], []]
    encoder = PromptEncoder()
    lines = [encoder.encode_line({"index": k, "kind": "agent", "message_ids": ids}) for k, ids in enumerate(prompts)]
    encoded = expand(lines)
    assert [encoded.prompt(k) for k in range(len(prompts))] == prompts
    # prefixes a, ab, abc, ax, abcd and the empty prompt: six nodes however the lines were encoded
    assert len(encoded.parent) == 6
    at, _, lengths = encoded.agent_positions(np.ones(len(prompts), dtype=bool))
    assert [encoded.ids[k] for k in at.tolist()] == [mid for ids in prompts for mid in ids]
    assert lengths.tolist() == list(map(len, prompts))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(IDS[:3]), max_size=6), min_size=1, max_size=40))
def test_every_distinct_prefix_is_one_node_whatever_the_prompts_share(prompts):
    # three ids and up to 40 prompts: prefixes recur, are cut back and grow again, so the compiled
    # builder's table of children (tree_kernels.build_tree) finds most children it is asked for
    encoder = PromptEncoder()
    lines = [encoder.encode_line({"index": k, "kind": "agent", "message_ids": ids}) for k, ids in enumerate(prompts)]
    encoded = expand(lines)
    assert [encoded.prompt(k) for k in range(len(prompts))] == prompts
    distinct = {tuple(ids[:depth]) for ids in prompts for depth in range(len(ids) + 1)}
    assert len(encoded.parent) == len(distinct)

    def read_back(node: int) -> list[str]:
        return [encoded.ids[k] for k in tree_kernels.path(encoded.parent, encoded.message, node).tolist()]

    assert sorted(map(tuple, map(read_back, range(len(encoded.parent))))) == sorted(distinct)
    for k, ids in enumerate(prompts):
        assert read_back(encoded.first[encoded.ends[k]]) == ids[:1]


def test_a_node_with_many_children_finds_each_child_again():
    # one prefix continued by 300 ids, twice over: the second time every child exists already, and
    # the table of children must tell them apart where their slots collide
    continuations = [f"{n:016x}" for n in range(100, 400)]
    prompts = [["s", mid] for mid in continuations] * 2 + [["s", mid, "t"] for mid in continuations[::7]]
    encoder = PromptEncoder()
    lines = [encoder.encode_line({"index": k, "kind": "agent", "message_ids": ids}) for k, ids in enumerate(prompts)]
    encoded = expand(lines)
    assert [encoded.prompt(k) for k in range(len(prompts))] == prompts
    assert len(encoded.parent) == 1 + 1 + len(continuations) + len(continuations[::7])


def test_the_kernels_run_where_numba_can_keep_no_machine_code():
    # as in a read-only install with a read-only home: numba finds no folder for its cache, and
    # tree_kernels compiles without one instead of failing
    env = {
        **os.environ,
        "NUMBA_CACHE_LOCATOR_CLASSES": "UserProvidedCacheLocator",
        "NUMBA_CACHE_DIR": "/proc/ctxpolicy-no-such-folder",
    }
    code = (
        "import numpy as np; from ctxpolicy.metrics import tree_kernels; "
        "print(tree_kernels.path(np.array([-1, 0, 1]), np.array([-1, 7, 9]), 2).tolist())"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[7, 9]"
