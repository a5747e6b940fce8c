"""Run directories -> the runs table (one row per run) and the calls table (one row per call).

Runs are parsed in parallel worker processes, in chunks; the run-level columns of the calls
table (run_dir, cell, model, ...) are stored as categoricals so 3.5 million call rows stay small.
Unreadable runs (any reason: see ``records.read_run``) come back as ``RecordError``s in
``Tables.problems``: reported, written to ``left_out.json`` next to the tables, and left out.
"""

from __future__ import annotations

import gc
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd

from ctxpolicy import rundir
from ctxpolicy.atomic import atomic_output, atomic_write_json
from ctxpolicy.metrics.cost import DEFAULT_BLOCK, DEFAULT_DISCOUNT
from ctxpolicy.metrics import cost_methods, tree_kernels
from ctxpolicy.metrics.pages import ordinary_pages, set_huge_pages, system_arrow_pool
from ctxpolicy.metrics.records import (
    CALL_KINDS,
    CALL_RUN_COLUMNS,
    RecordError,
    call_columns,
    find_run_dirs,
    no_cycle_collection,
    read_runs,
    run_columns,
)

LEFT_OUT_FILE = "left_out.json"  # the runs an aggregate left out, and why (docs/schema.md)
CATEGORICAL_RUN_COLUMNS = (
    "cell",
    "track",
    "benchmark",
    "cohort",
    "model",
    "policy",
    "primitive",
    "trigger",
    "setting",
    "summarizer",
    "stratum",
    "outcome",
    "outcome_class",
)


@dataclass
class Tables:
    runs: pd.DataFrame
    calls: pd.DataFrame
    problems: list[RecordError] = field(default_factory=list)


def _read_chunk(run_dirs: list[tuple[int, Path]], block: int, discount: float):
    """Read (number, run directory) pairs: the rows (as columns: a list per field, {} where no run
    was read), call counts and merged call columns of the runs read and their numbers, and the
    (number, path, reason) of those left out. Rows go back as columns: lists of values take a
    fraction of the new memory that the main process took to unpickle and hold one dict a run."""
    numbers = [number for number, _ in run_dirs]
    rows, lengths, merged, problems, read = read_runs([run_dir for _, run_dir in run_dirs], block, discount)
    problems = [(numbers[at], str(exc.path), exc.reason) for at, exc in problems]
    merged = {k: merged[k] if len(lengths) else np.zeros(0) for k in call_columns()}
    row_columns = {name: [row[name] for row in rows] for name in rows[0]} if rows else {}
    return row_columns, lengths, merged, problems, [numbers[at] for at in read]


# glibc's mallopt parameters (malloc.h) and what a parser worker sets them to
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_WORKER_MALLOC = ((_M_MMAP_THRESHOLD, 32 << 20), (_M_TRIM_THRESHOLD, 256 << 20), (_M_TOP_PAD, 16 << 20))


def keep_freed_memory() -> bool:
    """Let this process's allocator keep what it frees (glibc ``mallopt``), for a parser worker:
    a batch's arrays of a few MB each are then taken from memory the previous batch freed, not
    mapped afresh and faulted in page by page, which took half of the workers' system time. A
    worker's peak is its largest batch either way. False where the C library has no ``mallopt``
    (nothing is changed)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return all([mallopt(param, value) == 1 for param, value in _WORKER_MALLOC])


def _start_worker() -> None:
    """A parser worker's set-up: freed memory kept (``keep_freed_memory``), ordinary pages
    (``pages``), the cycle collector as usual (the aggregate pauses it where it forks)."""
    keep_freed_memory()
    set_huge_pages(False)
    gc.enable()


def reading_order(run_dirs: list[Path]) -> list[tuple[int, Path]]:
    """The run directories, numbered in their sorted order, in the order they are read. Where the
    corpus holds replays (``holds_replays``), by name first, so that the replays of one source
    (one name, one cell each) are read side by side and each worker parses the source's store
    once (``records._base_store``); else in their sorted order, the tables' own, so that the
    calls columns are laid in table order as they come and never copied into it (``_places``).
    The tables are the same whatever the reading order."""
    numbered = list(enumerate(run_dirs))
    if not holds_replays(run_dirs):
        return numbered
    return sorted(numbered, key=lambda pair: (pair[1].name, pair[0]))


def holds_replays(run_dirs: list[Path], sample: int = 16) -> bool:
    """Whether any of ``sample`` run directories spread over ``run_dirs`` is a replay (its
    run.json names a ``message_base``): in an imported corpus nearly every run is, so a few
    tell. Only the reading order hangs on the answer; a run.json that cannot be read says no
    (the aggregate names what is wrong with it)."""
    step = max(len(run_dirs) // sample, 1)
    for run_dir in run_dirs[::step][:sample]:
        try:
            if rundir.message_base(run_dir) is not None:
                return True
        except rundir.RunRecordError:
            continue
    return False


def chunk_size(runs: int, processes: int) -> int:
    """The runs a worker reads at once (``records.read_runs``): eight chunks a process, at most 500 runs."""
    return max(1, min(500, runs // (processes * 8) + 1))


def cut_in_chunks(numbered: list, size: int, processes: int) -> list[list]:
    """``numbered`` in chunks of ``size``, but for the last ``processes`` chunks or so, cut in
    quarters of that: the workers take chunks as they finish, so the last ones to finish wait
    on one another for at most a quarter chunk rather than a whole one."""
    tail = max(len(numbered) - processes * size, 0) // size * size  # where the quarters start
    cuts = [*range(0, tail, size), *range(tail, len(numbered), max(size // 4, 1))]
    return [numbered[start:end] for start, end in zip(cuts, [*cuts[1:], len(numbered)])]


def aggregate(
    roots: list[Path],
    *,
    block: int = DEFAULT_BLOCK,
    discount: float = DEFAULT_DISCOUNT,
    processes: int | None = None,
    progress: bool = False,
) -> Tables:
    # the calls table is the size where huge pages cost (metrics.pages); the merged rows are
    # many small objects, freed by their reference counts (records.no_cycle_collection)
    with ordinary_pages(), no_cycle_collection():
        return _aggregate(roots, block, discount, processes, progress)


def _aggregate(roots: list[Path], block: int, discount: float, processes: int | None, progress: bool) -> Tables:
    from tqdm import tqdm

    run_dirs = find_run_dirs([Path(r) for r in roots])
    processes = processes or min(len(os.sched_getaffinity(0)), 8)
    chunk = chunk_size(len(run_dirs), processes)
    numbered = reading_order(run_dirs)
    chunks = cut_in_chunks(numbered, chunk, processes)
    work = partial(_read_chunk, block=block, discount=discount)
    results = []
    laid = LaidColumns(len(run_dirs))
    bar = tqdm(total=len(run_dirs), disable=not progress, desc="aggregate", unit="run")

    def take(result) -> None:
        rows, lengths, columns, problems, read = result
        laid.add(columns, len(lengths))
        results.append((rows, lengths, problems, read))

    if processes > 1 and len(chunks) > 1:
        tree_kernels.warm()  # once here, not once a worker
        with ProcessPoolExecutor(processes, initializer=_start_worker) as pool:
            for part, result in zip(chunks, pool.map(work, chunks)):
                take(result)
                bar.update(len(part))
    else:
        for part in chunks:
            take(work(part))
            bar.update(len(part))
    bar.close()
    problems = [RecordError(Path(path), reason) for _, path, reason in sorted(p for r in results for p in r[2])]
    read = np.array([number for r in results for number in r[3]], dtype=np.int64)
    order = np.argsort(read, kind="stable")  # reading order -> sorted order
    lengths = np.concatenate([r[1] for r in results]) if results else np.zeros(0, np.int64)
    places = _places(lengths, order)
    columns = laid.columns()

    def put(name: str) -> np.ndarray:
        # one column at a time a thread: the column it replaces is freed as soon as it is put, so
        # the next copy can take those pages back before the kernel reports them to the host
        return _put(columns.pop(name), places)

    # the columns are put in table order in threads (numpy's copies release the interpreter lock)
    # while this one builds the runs table
    with ThreadPoolExecutor(processes) as threads:
        names = list(columns)
        putting = threads.map(put, names)
        runs = runs_frame(_rows_in_table_order([r[0] for r in results], None if places is None else order))
        in_table_order = dict(zip(names, putting))
    return Tables(runs, calls_frame(runs, lengths[order], in_table_order), problems)


class LaidColumns:
    """The calls columns of the chunks read, laid end to end in reading order, each in one array
    reserved for the whole corpus at the rate of the chunks so far (reserved memory that is never
    written costs nothing), grown by ``realloc`` where a later chunk outruns it (no copy where the
    allocator maps the array) and cut to its length at the end. Each chunk is copied in as it comes
    and its own arrays let go, so the next chunk's arrays reuse their memory: the table is written
    once into fresh memory, where keeping the chunks' parts and merging them wrote it twice (fresh
    memory is the costly kind: ``metrics.pages``)."""

    def __init__(self, runs: int):
        self.runs, self.runs_added, self.rows, self.reserved = runs, 0, 0, 0
        self._columns: dict[str, np.ndarray] = {}

    def add(self, parts: dict[str, np.ndarray], runs: int) -> None:
        """Append a chunk's columns (``runs`` runs; a chunk whose runs were all left out adds none)."""
        if not runs:
            return
        size = len(next(iter(parts.values())))
        self.runs_added += runs
        needed = self.rows + size
        if needed > self.reserved or not self._columns:
            projected = -(-needed * max(self.runs, self.runs_added) // self.runs_added)
            try:
                self._reserve(max(needed, projected + projected // 8), parts)
            except MemoryError:  # more than the kernel grants at once (a first chunk far below the rest)
                self._reserve(needed, parts)
        for name, part in parts.items():
            column = self._columns[name]
            if not np.can_cast(part.dtype, column.dtype, casting="safe"):
                column = self._columns[name] = column.astype(np.promote_types(column.dtype, part.dtype))
            column[self.rows : needed] = part
        self.rows = needed

    def _reserve(self, rows: int, parts: dict[str, np.ndarray]) -> None:
        self.reserved = rows
        for name, part in parts.items():
            column = self._columns.get(name)
            if column is None:
                self._columns[name] = np.empty(rows, dtype=part.dtype)
            else:
                column.resize(rows, refcheck=False)  # realloc: the new rows are zeroed, the old kept

    def columns(self) -> dict[str, np.ndarray]:
        """The columns, each cut to the rows added ({} where no chunk added any), handed over:
        none is held here any longer, so a column let go by its new owner is freed."""
        columns, self._columns = self._columns, {}
        for column in columns.values():
            column.resize(self.rows, refcheck=False)
        return columns


def _places(lengths: np.ndarray, order: np.ndarray) -> np.ndarray | None:
    """Each call's row in the calls table: the runs read (``lengths`` calls each, laid end to end
    in reading order) are the table's in the order ``order`` (the table's k-th run is
    ``order[k]``); None where the two orders agree."""
    if len(order) == 0 or (order == np.arange(len(order))).all():
        return None
    picked = lengths[order]
    start = np.empty(len(order), dtype=np.int64)
    start[order] = np.cumsum(picked) - picked  # each run's first row in the table
    first = np.cumsum(lengths) - lengths  # each run's first call as read
    return np.repeat(start - first, lengths) + np.arange(int(lengths.sum()))


def _put(column: np.ndarray, places: np.ndarray | None) -> np.ndarray:
    """A calls column laid in reading order, put in table order (``_places``)."""
    if places is None:
        return column
    put = np.empty_like(column)
    put[places] = column
    return put


def _nullable_cost_columns() -> tuple[str, ...]:
    """The cost columns a run may leave empty: those of every method that needs more than the
    prompt sizes (the estimate always prices a run)."""
    return tuple(c for m in cost_methods.methods() if m.needs or m.call_column for c in m.run_columns)


def _rows_in_table_order(parts: list[dict[str, list]], order: np.ndarray | None) -> dict[str, list]:
    """The chunks' rows (each chunk's a list per field: ``_read_chunk``), laid end to end and put
    in table order (the table's k-th run is ``order[k]``; None: read in table order, as
    ``_places`` says); {} where no run was read."""
    parts = [part for part in parts if part]
    if not parts:
        return {}
    positions = None if order is None else order.tolist()
    columns = {}
    for name in parts[0]:
        values = list(chain.from_iterable(part[name] for part in parts))
        columns[name] = values if positions is None else list(map(values.__getitem__, positions))
    return columns


def runs_frame(columns: dict[str, list]) -> pd.DataFrame:
    """The runs table from its rows' columns (a list per field, in table order; {}: no run)."""
    runs = pd.DataFrame(columns) if columns else pd.DataFrame(columns=list(run_columns()))
    for column in (
        "depth",
        "threshold_tokens",
        "wall_s",
        "agent_time_s",
        "setup_s",
        "compression_freq",
        "peak_prompt_tokens",
        *_nullable_cost_columns(),
        "format_errors",
        "seed",
    ):
        runs[column] = pd.to_numeric(runs[column], errors="coerce").astype("float64")
    for column in CATEGORICAL_RUN_COLUMNS:
        runs[column] = runs[column].astype("category")
    return runs


def calls_frame(runs: pd.DataFrame, lengths: np.ndarray, columns: dict[str, np.ndarray]) -> pd.DataFrame:
    if runs.empty:
        return pd.DataFrame(columns=[*CALL_RUN_COLUMNS, *call_columns()])
    data = {}
    for name in CALL_RUN_COLUMNS:
        values = runs[name]
        if name == "attempt":
            data[name] = np.repeat(values.to_numpy(), lengths)
            continue
        category = values.astype("category")
        data[name] = pd.Categorical.from_codes(
            np.repeat(category.cat.codes.to_numpy(), lengths), category.cat.categories
        )
    for name in call_columns():
        data[name] = columns[name]
    data["kind"] = pd.Categorical.from_codes(columns["kind"].astype(np.int8, copy=False), CALL_KINDS)
    return pd.DataFrame(data, copy=False)  # the columns as they are, not copied into blocks


def write_tables(tables: Tables, out_dir: Path) -> tuple[Path, Path]:
    """Write runs.parquet and calls.parquet side by side, each into a temporary file, and rename
    both over the tables only once both are whole: a table that cannot be written leaves both
    files as they were. pyarrow encodes the large calls table without the interpreter lock, so
    the runs table (strings, mostly under the lock) is converted and written meanwhile on the
    other core."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = out_dir / "runs.parquet", out_dir / "calls.parquet"
    with ordinary_pages(), system_arrow_pool(), ExitStack() as renames:  # metrics.pages
        handles = [renames.enter_context(atomic_output(path)) for path in paths]
        with ThreadPoolExecutor(len(paths)) as threads:
            frames = tables.runs, tables.calls
            written = [threads.submit(frame.to_parquet, handle, index=False) for frame, handle in zip(frames, handles)]
        for write in written:
            write.result()  # a failure leaves the stack: every temporary file removed, no table replaced
    return paths


def write_left_out(tables: Tables, out_dir: Path) -> Path:
    """``left_out.json`` next to the tables: ``{"runs": N, "left_out": [{"path", "reason"}]}``,
    written every time (an empty list when every run was read), so it never describes an older
    aggregate."""
    path = Path(out_dir) / LEFT_OUT_FILE
    atomic_write_json(
        path,
        {"runs": len(tables.runs), "left_out": [{"path": str(p.path), "reason": p.reason} for p in tables.problems]},
        indent=1,
    )
    return path
