"""The calls columns as the aggregate lays them (``aggregate.LaidColumns``), puts them in table
order, and the memory switches it builds them under (``metrics.pages``)."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from ctxpolicy.metrics import aggregate as aggregate_module
from ctxpolicy.metrics.aggregate import LaidColumns, aggregate, cut_in_chunks, reading_order
from ctxpolicy.metrics.pages import ordinary_pages, set_huge_pages, system_arrow_pool
from ctxpolicy.testing.runs import make_runs


def _chunk(rng: np.random.Generator, rows: int, dtype=np.int64) -> dict[str, np.ndarray]:
    return {"a": rng.integers(0, 1000, rows).astype(dtype), "b": rng.random(rows)}


def test_laid_columns_are_the_chunks_end_to_end_through_growth_promotion_and_empty_chunks():
    rng = np.random.default_rng(3)
    # the first chunk's rate (2 rows a run) reserves far too little for the later ones (up to 90)
    chunks = [
        (_chunk(rng, 4), 2),
        ({"a": np.zeros(0), "b": np.zeros(0)}, 0),  # every run of it left out
        (_chunk(rng, 150), 3),
        (_chunk(rng, 90, np.int8), 1),
        (_chunk(rng, 900), 10),
        ({"a": rng.random(7), "b": rng.random(7)}, 1),  # a float part after integer ones
    ]
    laid = LaidColumns(runs=17)
    for parts, runs in chunks:
        laid.add(parts, runs)
    columns = laid.columns()
    for name in ("a", "b"):
        expected = np.concatenate([parts[name] for parts, runs in chunks if runs])
        assert columns[name].dtype == expected.dtype
        np.testing.assert_array_equal(columns[name], expected)
    assert laid.rows == 1151 and laid.reserved >= laid.rows
    assert laid.columns() == {}  # handed over: none is held back, so each is freed with its new owner


def test_a_reservation_the_kernel_refuses_falls_back_to_the_rows_needed():
    rng = np.random.default_rng(4)
    laid = LaidColumns(runs=10**15)  # the first chunk's rate over this many runs: exabytes
    first, second = _chunk(rng, 30), _chunk(rng, 50)
    laid.add(first, 3)
    assert laid.reserved == 30
    laid.add(second, 2)
    columns = laid.columns()
    np.testing.assert_array_equal(columns["a"], np.concatenate([first["a"], second["a"]]))


def test_laid_columns_of_no_chunk_are_none_and_of_runs_without_calls_are_empty():
    laid = LaidColumns(runs=5)
    laid.add({"a": np.zeros(0)}, 0)
    assert laid.columns() == {} and laid.rows == 0
    laid.add({"a": np.zeros(0, np.int8)}, 2)  # two runs read, no call between them
    (column,) = laid.columns().values()
    assert len(column) == 0 and column.dtype == np.int8


@pytest.mark.parametrize("by_name", [True, False], ids=["read by name", "read in table order"])
def test_calls_table_is_each_runs_own_laid_in_table_order(tmp_path, monkeypatch, by_name):
    """The whole corpus in many chunks on two workers gives the calls table that reading each run
    on its own and stacking them in sorted order gives, whether it is read by name (as a corpus of
    replays is: the columns are then put in table order) or in table order (as any other is)."""
    monkeypatch.setattr(aggregate_module, "holds_replays", lambda run_dirs: by_name)
    run_dirs = make_runs(
        tmp_path / "runs",
        policies=("FC", "SU/Th/0.5", "OTRC/St"),
        tasks=4,
        attempts=2,
        calls_per_run=9,
        calls_version=2,
    )
    whole = aggregate([tmp_path / "runs"], processes=2).calls
    alone = [aggregate([run_dir], processes=1).calls for run_dir in sorted(run_dirs)]
    stacked = pd.concat(alone, ignore_index=True)
    assert len(whole) == len(stacked) == sum(len(calls) for calls in alone)
    for name in whole.columns:  # categoricals: each run's own has one category, so compare values
        pd.testing.assert_series_equal(whole[name].astype(object), stacked[name].astype(object))
    assert whole["run_dir"].iloc[0] == str(sorted(run_dirs)[0])


@pytest.mark.parametrize(
    ("items", "size", "processes", "sizes"),
    [
        (35_028, 500, 2, [500] * 68 + [125] * 8 + [28]),  # the study's size: the last two chunks in quarters
        (2_000, 500, 2, [500] * 2 + [125] * 8),
        (700, 500, 2, [125] * 5 + [75]),  # fewer than two chunks: all in quarters
        (7, 1, 2, [1] * 7),
        (0, 1, 2, []),
    ],
)
def test_chunks_are_the_items_in_order_the_last_ones_in_quarters(items, size, processes, sizes):
    chunks = cut_in_chunks(list(range(items)), size, processes)
    assert [len(chunk) for chunk in chunks] == sizes
    assert [item for chunk in chunks for item in chunk] == list(range(items))


def test_a_corpus_is_read_by_name_only_where_it_holds_replays(tmp_path):
    run_dirs = sorted(make_runs(tmp_path / "runs", policies=("FC", "OTRC/St"), tasks=3, attempts=1, calls_per_run=3))
    in_table_order = list(enumerate(run_dirs))
    assert reading_order(run_dirs) == in_table_order
    # one run made a replay of another (run.json's message_base): the replays of one source are
    # read side by side, by name
    replay, source = run_dirs[0], run_dirs[3]
    record = json.loads((replay / "run.json").read_text())
    record["message_base"] = {"run": os.path.relpath(source, replay), "sha256": "0" * 64}
    (replay / "run.json").write_text(json.dumps(record))
    by_name = reading_order(run_dirs)
    assert sorted(by_name) == in_table_order
    assert [path.name for _, path in by_name] == sorted(path.name for path in run_dirs)
    # a run.json that cannot be read says nothing of the order (the aggregate names it)
    (replay / "run.json").write_text("{not json")
    assert reading_order(run_dirs) == in_table_order


def test_ordinary_pages_switch_numpy_huge_pages_off_and_back():
    had = set_huge_pages(True)
    if had is None:
        pytest.fail("this numpy has no huge-page switch: metrics.pages must learn its new name")
    try:
        with ordinary_pages():
            assert set_huge_pages(False) is False  # off inside (set again to what it is, to read it)
            np.ones(1 << 20)  # a large array is made there as anywhere
        assert set_huge_pages(True) is True  # back on after
        set_huge_pages(False)
        with ordinary_pages():
            pass
        assert set_huge_pages(had) is False  # left off where it was off
    finally:
        set_huge_pages(had)


def test_system_arrow_pool_is_the_default_inside_and_the_old_one_after():
    import pyarrow as pa

    before = pa.default_memory_pool().backend_name
    with system_arrow_pool():
        assert pa.default_memory_pool().backend_name == "system"
        pa.array(np.arange(1000))  # allocates from it
    assert pa.default_memory_pool().backend_name == before
