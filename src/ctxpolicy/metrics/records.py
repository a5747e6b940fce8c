"""Reading one run directory into a run row and its call columns.

A run directory counts only when its ``run.json`` says ``complete: true``, every field the tables
read has the type the record's JSON schema gives it (``ctxpolicy.schemas``: run.json and
verdict.json through a jsonschema reading view, calls.jsonl and messages.jsonl column by column),
every number is within ``schemas.SAFE_INTEGER`` in magnitude, its record files are regular files
inside the run directory (``rundir.open_regular``), and its ``calls.jsonl`` and message store
parse and agree (every message id a call sent is in the store, no call index repeats, and the
agent and summary calls are as many as ``run.json``'s totals say). Both schema versions are read:
the prompts and the store (a replay's source store included) resolve through ``ctxpolicy.rundir``
(``resolve_prompts``, ``message_store_files``). Anything else, an unexpected exception included,
raises ``RecordError`` naming the path, the field and the value, so that the aggregate can report
it and leave the run out.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import operator
import os
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np
import orjson

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.metrics.commands import count_commands, count_repeats, reply_times
from ctxpolicy.policies import actions
from ctxpolicy.metrics import call_ids, cost_methods, encoded_prompts, tree_kernels, typed_lines
from ctxpolicy.metrics.cost import DEFAULT_BLOCK, DEFAULT_DISCOUNT, has_otrc, unchanged_prefix
from ctxpolicy.metrics.chunk import BATCH_POSITIONS, ParsedRun, agent_time, source_of, tables  # noqa: F401 (agent_time: read from here)
from ctxpolicy.metrics.cost_methods import PrefixTree, PrefixTrees, Sequences, SourceCalls
from ctxpolicy.metrics.encoded_prompts import EncodedPrompts
from ctxpolicy.metrics.typed_lines import CallLines
from ctxpolicy import rundir
from ctxpolicy.rundir import CALL_KINDS, CALLS_JSONL, RUN_JSON, VERDICT_JSON
from ctxpolicy.schemas import describe, field_rule, quick_check, reading_view, schema

# What the tables take from run.json and verdict.json; the NEEDED ones must be there, the others
# may be absent or null (an empty cell). Types, enums and bounds come from the schemas.
RUN_NEEDED = (
    "complete",
    "identity.benchmark",
    "identity.model",
    "identity.policy",
    "identity.task_id",
    "identity.attempt",
    "outcome",
    "timing.wall_s",
)
RUN_READ = (
    *RUN_NEEDED,
    "identity.cell",
    "identity.track",
    "identity.cohort",
    "identity.primitive",
    "identity.trigger",
    "identity.depth",
    "identity.threshold_setting",
    "identity.threshold_tokens",
    "identity.summarizer",
    "identity.stratum",
    "identity.seed",
    "timing.setup_s",
    "timing.agent_s",
    "error",
    "totals.steps",
    "totals.format_errors",
    "totals.agent_calls",
    "totals.summary_calls",
)
VERDICT_NEEDED = ("resolved",)
VERDICT_READ = ("resolved", "harness", "report", "log")
CALL_FIELDS = ("index", "kind")
CALL_RUN_COLUMNS = ("run_dir", "cell", "benchmark", "model", "policy", "setting", "task_id", "attempt")
CALL_RECORDED = (  # the calls table's columns read from calls.jsonl, after CALL_RUN_COLUMNS
    "index",
    "kind",
    "step",
    "start",
    "end",
    "latency_s",
    "prompt_tokens",
    "completion_tokens",
    "cached_tokens",
    "est_tokens_before",
    "est_tokens_after",
)


def call_derived() -> tuple[str, ...]:
    """The calls table's columns computed by the reader: the events, then each cost method's
    per-call counts (``cost_methods.calls_columns``)."""
    return ("n_events", *cost_methods.calls_columns())


def call_columns() -> tuple[str, ...]:
    """The calls table's own columns, after CALL_RUN_COLUMNS (docs/schema.md)."""
    return (*CALL_RECORDED, *call_derived())


CALL_DERIVED = call_derived()  # for the registry's own methods
CALL_COLUMNS = call_columns()
# calls.jsonl fields checked column by column against the call schema (one jsonschema validation
# per line would cost more than the rest of the parsing together): the numeric columns and the events.
CALL_TYPED_FIELDS = (*(c for c in CALL_RECORDED if c != "kind"), "events")
RUN_BASE_COLUMNS = (  # the runs table, in order (docs/schema.md), each cost method's after format_errors
    "run_dir",
    "cell",
    "track",
    "benchmark",
    "cohort",
    "model",
    "policy",
    "primitive",
    "trigger",
    "depth",
    "setting",
    "threshold_tokens",
    "summarizer",
    "task_id",
    "stratum",
    "attempt",
    "seed",
    "outcome",
    "error",
    "resolved",
    "has_verdict",
    "outcome_class",
    "time_limited",
    "wall_s",
    "agent_time_s",
    "setup_s",
    "steps",
    "agent_calls",
    "summary_calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "peak_prompt_tokens",
    "n_prompt_counts",
    "compression_events",
    "compression_freq",
    "format_errors",
    "summary_input",
    "agent_latency_s",
    "summary_latency_s",
    "compressions",
    "retrieval_cmds",
    "execution_cmds",
)


COST_AFTER = "format_errors"  # the runs table's cost columns follow this one


def run_columns() -> tuple[str, ...]:
    """The runs table's columns, in order: the cost methods' (``cost_methods.run_columns``) after
    ``format_errors``."""
    at = RUN_BASE_COLUMNS.index(COST_AFTER) + 1
    return (*RUN_BASE_COLUMNS[:at], *cost_methods.run_columns(), *RUN_BASE_COLUMNS[at:])


RUN_COLUMNS = run_columns()  # for the registry's own methods


class RecordError(CtxpolicyError):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


@dataclass
class RunRows:
    """One run as the tables hold it: its runs-table row and its calls-table columns."""

    row: dict
    calls: dict[str, np.ndarray]


def find_run_dirs(roots: list[Path]) -> list[Path]:
    """Every run directory under the roots, complete or not (``ctxpolicy.rundir.find_run_dirs``:
    never inside a run directory, nor in ``workspace/`` or ``stale/``)."""
    for root in map(Path, roots):
        if not root.is_dir():
            raise RecordError(root, "no such directory")
    return rundir.find_run_dirs(roots)


def _read_bytes(path: Path) -> bytes:
    """A record file's bytes: a regular file inside its run directory (``rundir.open_regular``)."""
    try:
        return rundir.read_bytes(path)
    except rundir.NotRegularFileError as exc:
        raise RecordError(path, exc.reason) from None
    except FileNotFoundError:
        raise RecordError(path, "missing") from None
    except IsADirectoryError:
        raise RecordError(path, "is a directory, not a file") from None
    except OSError as exc:
        raise RecordError(path, f"unreadable ({exc.strerror or exc})") from None


def _load_json(path: Path, optional: bool = False):
    """A JSON record file's value; with ``optional``, None where there is no such file (nor a
    dangling link by that name, which is reported missing)."""
    try:
        data = _read_bytes(path)
    except RecordError as exc:
        if optional and exc.reason == "missing" and not os.path.lexists(path):
            return None
        raise
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise RecordError(path, f"corrupt JSON ({exc})") from None


def _reading_view(name: str) -> dict:
    read, needed = {"run": (RUN_READ, RUN_NEEDED), "verdict": (VERDICT_READ, VERDICT_NEEDED)}[name]
    return reading_view(schema(name), read, needed)


@functools.lru_cache(maxsize=None)
def _reading_validator(name: str):
    from jsonschema import Draft202012Validator

    return Draft202012Validator(_reading_view(name))


@functools.lru_cache(maxsize=None)
def _quick_check(name: str):
    return quick_check(_reading_view(name)) or (lambda record: False)


def _check_record(name: str, record, path: Path) -> None:
    """Every field the tables read from ``record`` has its schema type; needed ones are there.
    The compiled check (``schemas.quick_check``) passes a valid record; the generic validator
    runs only on the others, and names what is wrong."""
    if _quick_check(name)(record):
        return
    errors = sorted(_reading_validator(name).iter_errors(record), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise RecordError(
            path,
            "; ".join(describe(e) for e in errors[:3]) + (f"; and {len(errors) - 3} more" if len(errors) > 3 else ""),
        )


def _field(record: dict, key: str, path: Path, where: str):
    if key not in record or record[key] is None:
        raise RecordError(path, f"field {where}{key} is missing")
    return record[key]


def read_run(run_dir: Path, block: int = DEFAULT_BLOCK, discount: float = DEFAULT_DISCOUNT) -> RunRows:
    """One run's row and call columns. Raises ``RecordError`` for every way the run can be
    unreadable, an unexpected one included: one bad record never stops a whole aggregate."""
    rows, _, columns, problems, _ = read_runs([Path(run_dir)], block, discount)
    if problems:
        raise problems[0][1]
    return RunRows(rows[0], columns)


def read_runs(run_dirs: list[Path], block: int = DEFAULT_BLOCK, discount: float = DEFAULT_DISCOUNT):
    """``read_run`` of many runs, each read and checked on its own (``parse_run``), their columns
    counted together (``metrics.chunk.tables``, in batches of about ``chunk.BATCH_POSITIONS``
    message positions): the rows, the runs' numbers of calls, their call columns laid end to
    end, the runs left out as (position in ``run_dirs``, ``RecordError``) and the positions of
    the runs read. Where counting a batch fails unexpectedly, each of its runs is counted alone,
    so that only the run that fails is left out, named."""
    with no_cycle_collection():
        return _read_runs(run_dirs, block, discount)


@contextlib.contextmanager
def no_cycle_collection():
    """Python's cycle collector paused: parsed records are trees of dicts and lists (and the
    runs' rows dicts), freed by their reference counts, while the collector's passes over the
    objects every parsed file makes took a tenth of the reading. It runs again, as before, once
    the block ends."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _read_runs(run_dirs: list[Path], block: int, discount: float):
    problems, counted = [], []
    batch, numbers, positions = [], [], 0
    for number, run_dir in enumerate(run_dirs):
        try:
            parsed = parse_run(run_dir)
        except RecordError as exc:
            problems.append((number, exc))
            continue
        batch.append(parsed)
        numbers.append(number)
        positions += 0 if parsed.sequences is None else int(parsed.sequences.lengths.sum())
        if positions >= BATCH_POSITIONS:
            counted += _counted(batch, numbers, block, discount, problems)
            batch, numbers, positions = [], [], 0
    counted += _counted(batch, numbers, block, discount, problems)
    problems.sort(key=lambda problem: problem[0])
    if not counted:
        return [], np.zeros(0, np.int64), _no_columns(), problems, []
    rows = [row for part in counted for row in part[0]]
    columns = {k: np.concatenate([part[2][k] for part in counted]) for k in counted[0][2]}
    read = [number for part in counted for number in part[3]]
    return rows, np.concatenate([part[1] for part in counted]), columns, problems, read


def _counted(parsed: list[ParsedRun], numbers: list[int], block: int, discount: float, problems: list) -> list:
    """``tables`` of the parsed runs (numbered ``numbers``) as [(rows, sizes, columns, numbers)];
    run by run where counting them together fails, each failing run added to ``problems``."""
    if not parsed:
        return []
    try:
        return [(*tables(parsed, block, discount), numbers)]
    except Exception:  # a reader bug or a shape no check foresaw
        if len(parsed) == 1:
            problems.append((numbers[0], _unexpected(parsed[0].run_dir)))
            return []
    return [part for p, number in zip(parsed, numbers) for part in _counted([p], [number], block, discount, problems)]


def _no_columns() -> dict[str, np.ndarray]:
    return {k: np.zeros(0) for k in call_columns()}


def _unexpected(run_dir: Path) -> RecordError:
    """The exception being handled as the ``RecordError`` that leaves ``run_dir`` out."""
    import sys

    exc = sys.exc_info()[1]
    error = RecordError(Path(run_dir), f"unreadable ({type(exc).__name__}: {exc})")
    error.__cause__ = exc
    return error


# The reason an open proxy conversation (run.json rewritten after every call, docs/proxy.md) is
# left out: the one every reader of a run tree gives (``rundir.STILL_OPEN``).
OPEN_CONVERSATION = rundir.STILL_OPEN


def parse_run(run_dir: Path) -> ParsedRun:
    """``read_run``'s reading and checks of one run, without its columns."""
    try:
        return _parse_run(Path(run_dir))
    except RecordError:
        raise
    except Exception as exc:  # a reader bug or a shape no check foresaw
        raise RecordError(Path(run_dir), f"unreadable ({type(exc).__name__}: {exc})") from exc


def _parse_run(run_dir: Path) -> ParsedRun:
    run_path = run_dir / RUN_JSON
    run = _load_json(run_path)
    if isinstance(run, dict) and run.get("complete") is False and (run.get("proxy") or {}).get("open") is True:
        raise RecordError(run_path, OPEN_CONVERSATION)
    if not isinstance(run, dict) or run.get("complete") is not True:
        value = run.get("complete") if isinstance(run, dict) else run
        raise RecordError(run_path, f"field complete is {value!r}, not true")
    _check_record("run", run, run_path)

    verdict_path = run_dir / VERDICT_JSON
    verdict = _load_json(verdict_path, optional=True)
    if verdict is not None:
        _check_record("verdict", verdict, verdict_path)

    action_format = action_format_of(run, run_path)
    store, commands, assistant = _read_stores(run_dir, action_format, run)
    calls_path = run_dir / CALLS_JSONL
    lines = _read_calls(calls_path)
    values, prompts = lines.values, lines.prompts
    agent = [kind == "agent" for kind in lines.kinds]
    commands = _with_repeats(commands, assistant, lines, _longest_agent_prompt(prompts, agent), action_format)
    _check_call_counts(agent, run.get("totals"), calls_path)
    source = source_calls(run_dir, run) if rundir.message_base(run_dir, run) is not None else None
    events = _events(values["index"], values["events"], calls_path)
    if isinstance(prompts, EncodedPrompts):
        sequences = _encoded_sequences(prompts, np.array(agent, dtype=bool), store, calls_path, values["index"])
        return ParsedRun(run_dir, run, verdict, commands, values, agent, events, sequences, source)
    agent_segments = [segment for segment, is_agent in zip(prompts, agent) if is_agent]
    sequences = None
    if None not in agent_segments:  # without message sequences no prefix is known
        indexes = [index for index, is_agent in zip(values["index"], agent) if is_agent]
        codes, tokens, lengths = _sequences(agent_segments, store, calls_path, indexes)
        sequences = Sequences(codes.astype(np.uint64, copy=False), tokens, lengths)
    return ParsedRun(run_dir, run, verdict, commands, values, agent, events, sequences, source)


def _longest_agent_prompt(prompts: EncodedPrompts | list[bytes | None], agent: list[bool]) -> list[str]:
    """The ids of the first agent call's prompt holding the most messages ([] where none has one)."""
    calls = [k for k, is_agent in enumerate(agent) if is_agent]
    if isinstance(prompts, EncodedPrompts):
        return prompts.longest(calls)
    return _ids_of(max((prompts[k] for k in calls if prompts[k] is not None), key=len, default=b""))


def _encoded_sequences(
    prompts: EncodedPrompts, agent: np.ndarray, store: dict[str, int], path: Path, indexes: list[int]
) -> PrefixTrees:
    """The agent calls' prompts from version-2 prompts, as their prefix tree (laid end to end only
    when a method reads them so); an id the store lacks is named with the first agent call (in
    index order) whose prompt holds it, as ``_sequences`` names it."""
    try:
        tokens = np.fromiter(map(store.__getitem__, prompts.ids), np.int64, len(prompts.ids))
    except KeyError:
        at, call, _ = prompts.agent_positions(agent)
        unknown = np.fromiter((mid not in store for mid in prompts.ids), bool, len(prompts.ids))[at]
        if unknown.any():  # else only summary calls hold an unknown id: the version-1 path reads it too
            first = int(np.argmax(unknown))
            raise _unknown_id(path, indexes[call[first]], prompts.ids[at[first]]) from None
        tokens = np.fromiter((store.get(mid, 0) for mid in prompts.ids), np.int64, len(prompts.ids))
    through = tree_kernels.prefix_tokens(prompts.parent, prompts.message, tokens)

    def positions() -> Sequences:
        at, _, lengths = prompts.agent_positions(agent)
        return Sequences(prompts.keys()[at], tokens[at], lengths)

    return PrefixTrees(
        [PrefixTree(prompts.parent, through, prompts.first, prompts.ends[agent], prompts.lengths[agent], positions)]
    )


def source_calls(run_dir: Path, run: dict | None = None) -> SourceCalls:
    """The agent calls of the run a replay's store extends (run.json ``message_base``: its source
    run), as the measured profile reads them: prompt and provider-cached tokens, local counts.
    ``run``: the run's run.json, already read."""
    source = rundir.message_base(run_dir, run)
    path = source / CALLS_JSONL
    try:
        stat = path.stat()
    except OSError:
        raise RecordError(path, "missing (the source run of a replay)") from None
    return _source_calls(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _source_calls(path: Path, mtime_ns: int, size: int) -> SourceCalls:
    """A source run's calls, parsed once per process (its replays, one per configuration, share it)."""
    lines = _read_calls(path)
    return own_source(lines.kinds, lines.values)


def own_source(kinds: list[str], values: dict[str, list]) -> SourceCalls:
    """A run's own agent calls (``kinds``: each call's kind) as a source (a run that was really
    served is its own profile)."""
    agent = np.array([kind == "agent" for kind in kinds], dtype=bool)

    def column(name: str) -> np.ndarray:
        return np.array(values[name], dtype=np.float64).reshape(len(kinds))  # null -> NaN

    return source_of(agent, column("prompt_tokens"), column("cached_tokens"), column("est_tokens_after"))


def action_format_of(run: dict, path: Path) -> str:
    """The run's ``settings.action_format`` (``mswea_bash_command`` when it names none)."""
    try:
        return actions.of_record(run)
    except actions.ActionFormatError as exc:
        raise RecordError(path, str(exc)) from None


def _with_repeats(commands, assistant: dict[str, dict], lines: CallLines, longest: list[str], action_format: str):
    """The command counts with each repeated reply counted every time it was given (``longest``:
    the ids of the longest agent prompt)."""
    times = reply_times(longest, [reply for reply, kind in zip(lines.reply_ids, lines.kinds) if kind == "agent"])
    if not times:
        return commands
    r, e = count_repeats(assistant, times, action_format)
    return commands[0] + r, commands[1] + e


def _ids_of(segment: bytes) -> list[str]:
    """The ids of an id array's inside: each comma-separated piece, blanks and quotes around it
    cut. Where every piece is one quoted string (``"a","b"``: split at each ``","``, no comma or
    quote left inside a piece), in one split."""
    if segment[:1] == b'"' and segment[-1:] == b'"' and len(segment) > 1 and segment.isascii():
        inner = segment[1:-1]
        commas = inner.count(b",")
        ids = inner.decode().split('","')
        if len(ids) == commas + 1 and inner.count(b'"') == 2 * commas:
            return ids
    return [piece.strip().strip(b'"').decode() for piece in segment.split(b",") if piece.strip()]


def _read_stores(
    run_dir: Path, action_format: str, run: dict | None = None
) -> tuple[dict[str, int], tuple[int, int], dict[str, dict]]:
    """Message id -> tokens over the run's whole message store (its own ``messages.jsonl`` and,
    schema version 2, its ``message_base`` chain's), the (retrieval, execution) command counts
    of its distinct assistant messages in the run's action format (a base's counted once: a writer
    stores only what its base lacks), and those messages by id. ``run``: the run's run.json,
    already read."""
    try:
        files = rundir.message_store_files(run_dir, run)
    except rundir.RunRecordError as exc:
        raise RecordError(exc.path, exc.reason) from None
    store, assistant = _read_store(files[0])
    retrieval, execution = count_commands(list(assistant.values()), action_format)
    for path in files[1:]:
        stat = path.stat()
        base, (r, e), base_assistant = _base_store(path, stat.st_mtime_ns, stat.st_size, action_format)
        store = {**base, **store}
        assistant = {**base_assistant, **assistant}
        retrieval, execution = retrieval + r, execution + e
    return store, (retrieval, execution), assistant


@functools.lru_cache(maxsize=64)
def _base_store(
    path: Path, mtime_ns: int, size: int, action_format: str
) -> tuple[dict[str, int], tuple[int, int], dict[str, dict]]:
    """A source run's store as its replays read it, parsed once per process (its replays, one per
    configuration, share it); the file's mtime and size are in the key."""
    store, assistant = _read_store(path)
    return store, count_commands(list(assistant.values()), action_format), assistant


def _read_store(path: Path) -> tuple[dict[str, int], dict[str, dict]]:
    """Message id -> tokens, and the assistant messages by id (for the command counts)."""
    data = _read_bytes(path)
    entries = _parse_lines(data, path)
    try:
        ids = list(map(_ID, entries))
        tokens = list(map(_TOKENS, entries))
    except (KeyError, TypeError):
        for number, entry in enumerate(entries, 1):
            if not isinstance(entry, dict):
                raise RecordError(path, f"line {number}: not an object") from None
            for key in ("id", "tokens"):
                _field(entry, key, path, f"line {number}: ")
        raise
    for name, values in (("id", ids), ("tokens", tokens)):
        rule = field_rule("message", name, nullable=False)
        where = rule.violation(values)
        if where is not None:
            value = values[where]
            raise RecordError(path, f"line {where + 1}: field {name} is {_shown(value)}: {rule.why(value)}")
    store = dict(zip(ids, tokens))
    assistant = {
        entry["id"]: message
        for entry in entries  # every entry is an object: it has an id
        if type(message := entry.get("message")) is dict and message.get("role") == "assistant"
    }
    if any(map(dict.__contains__, entries, repeat(rundir.CONTENT_PIECES))):  # every entry is a dict (it has an id)
        for entry in entries:
            if entry["id"] in assistant and rundir.CONTENT_PIECES in entry:
                raise RecordError(path, f"message {entry['id']}: field {rundir.CONTENT_PIECES} on an assistant message")
    return store, assistant


_ID, _TOKENS = operator.itemgetter("id"), operator.itemgetter("tokens")


def _parse_lines(data: bytes, path: Path) -> list:
    """JSON lines -> values, in one parser call (JSON text never holds a raw newline)."""
    if data and not data.endswith(b"\n"):
        raise RecordError(path, "partial: last line has no newline")
    body = data.rstrip(b"\n")
    try:  # an empty line makes the array invalid: only then are the empty lines looked for
        return orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:
        pass
    if b"\n\n" in body or body.startswith(b"\n"):
        body = b"\n".join(line for line in body.split(b"\n") if line.strip())
        try:
            return orjson.loads(b"[" + body.replace(b"\n", b",") + b"]")
        except orjson.JSONDecodeError:
            pass
    for number, line in enumerate(data.splitlines(), 1):  # find the line to blame
        try:
            orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError as exc:
            raise RecordError(path, f"corrupt line {number} ({exc})") from None
    raise RecordError(path, "corrupt JSON lines")


def _read_calls(path: Path) -> CallLines:
    """The calls in index order: their kinds, the values of their typed fields (checked), their
    reply ids and their prompts: version 2's as written (``encoded_prompts``), else each call's
    raw message_ids array text (None: no prompt).

    A writer's version-2 file is decoded and checked in one compiled pass (``typed_lines``); any
    other file takes the general path below, which names what is wrong with it. A version-1
    file's id arrays are most of it; cutting them out before JSON parsing and decoding them in
    bulk (``call_ids``) is what keeps the aggregate of 35,000 runs short. A version-2 file's
    prompts are expanded in bulk, never as lists of strings.
    """
    data = _read_bytes(path)
    # a version-1 file (its first line names message_ids) is not tried: the typed decoder refuses
    # any line naming them, so the first line is only a shortcut (searching the whole file took
    # about 30 µs, a tenth of reading a version-2 file)
    version_1 = b'"message_ids"' in data[: data.find(b"\n")]
    if not version_1 and (lines := typed_lines.read(data, CALL_TYPED_FIELDS, CALL_KINDS)) is not None:
        return lines
    return _read_calls_generally(data, path)


def _read_calls_generally(data: bytes, path: Path) -> CallLines:
    """``_read_calls`` of any file (``data``: its bytes), naming what is wrong with it."""
    cut = call_ids.split_lines(data) if b'"message_ids"' in data else None
    encoded = None
    if cut is not None:  # one id array per line
        rest, segments = cut
        calls = _parse_lines(b'"message_ids":null'.join(rest), path)
    elif (encoded := encoded_prompts.expand(calls := _parse_lines(data, path))) is not None:
        segments = encoded  # in index order: expand reads only lines in increasing index order
    else:
        if not all(isinstance(c, dict) for c in calls):
            _blame_call(calls, path)
        for call in calls:
            if call.get("message_ids") is not None and not isinstance(call["message_ids"], list):
                raise RecordError(
                    path, f"call {call.get('index')!r}: field message_ids is {_shown(call['message_ids'])}: not array"
                )
        try:  # schema version 2 ("prompt") and version 1 lines alike
            prompts = rundir.resolve_prompts(calls, path)
        except rundir.RunRecordError as exc:
            raise RecordError(path, exc.reason) from None
        segments = [None if ids is None else orjson.dumps(ids)[1:-1] for ids in prompts]
    if not _calls_have_index_and_kind(calls):
        _blame_call(calls, path)
    values = _check_call_types(calls, path)
    indexes = values["index"]
    if encoded is None and indexes != sorted(indexes):
        order = sorted(range(len(calls)), key=indexes.__getitem__)
        calls, segments = [calls[i] for i in order], [segments[i] for i in order]
        values = {name: [column[i] for i in order] for name, column in values.items()}
    _check_unique_indexes(values["index"], path)
    return CallLines(list(map(_KIND, calls)), values, [call.get("reply_id") for call in calls], segments)


_INDEX, _KIND = operator.itemgetter("index"), operator.itemgetter("kind")


def _calls_have_index_and_kind(calls: list) -> bool:
    """Every call is an object with an index and a kind of ``CALL_KINDS``: checked over all calls
    at once, each line's own check only where that fails (``_blame_call`` then names the line)."""
    try:
        return None not in map(_INDEX, calls) and set(map(_KIND, calls)) <= set(CALL_KINDS)
    except (KeyError, TypeError):
        return all(isinstance(c, dict) and c.get("index") is not None and c.get("kind") in CALL_KINDS for c in calls)


def _check_unique_indexes(indexes: list, path: Path) -> None:
    """Call indexes (sorted) appear once each: a repeated one is a call recorded twice."""
    for before, after in zip(indexes, indexes[1:]):
        if before == after:
            raise RecordError(path, f"field index: call {after!r} appears {indexes.count(after)} times")


def _check_call_counts(agent: list[bool], totals, path: Path) -> None:
    """The agent and summary calls in calls.jsonl (``agent``: whether each call is an agent call)
    are as many as run.json's ``totals`` say (where it says): fewer lines is a calls.jsonl cut
    short, more is one appended to after the run ended."""
    if not isinstance(totals, dict):
        return
    agents = sum(agent)
    for name, counted in (("agent_calls", agents), ("summary_calls", len(agent) - agents)):
        said = totals.get(name)
        if said is not None and said != counted:
            raise RecordError(path, f"{counted} {name.replace('_', ' ')}, but {RUN_JSON} totals.{name} says {said}")


def _blame_call(calls: list, path: Path) -> None:
    for number, call in enumerate(calls, 1):
        if not isinstance(call, dict):
            raise RecordError(path, f"line {number}: not an object")
        for key in CALL_FIELDS:
            _field(call, key, path, f"line {number}: ")
        if call["kind"] not in CALL_KINDS:
            raise RecordError(path, f"line {number}: field kind is {call['kind']!r}")


def _check_call_types(calls: list[dict], path: Path) -> dict[str, list]:
    """Each typed field, over all calls at once, against the call schema (null: not reported).
    Returns the checked values by field, for the columns."""
    try:  # one C call per line while every line has every typed field (a writer's lines do)
        by_field = list(map(list, zip(*map(_TYPED_GETTER, calls)))) if calls else [[] for _ in CALL_TYPED_FIELDS]
    except KeyError:
        by_field = [[call.get(name) for call in calls] for name in CALL_TYPED_FIELDS]
    checked = {}
    for name, values in zip(CALL_TYPED_FIELDS, by_field):
        rule = field_rule("call", name, nullable=name != "index")
        where = rule.violation(values)
        if where is not None:
            raise RecordError(
                path,
                f"line {where + 1} (call {calls[where]['index']!r}): field {name} is "
                f"{_shown(values[where])}: {rule.why(values[where])}",
            )
        checked[name] = values
    return checked


_TYPED_GETTER = operator.itemgetter(*CALL_TYPED_FIELDS)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _sequences(
    segments: list[bytes], store: dict[str, int], path: Path, indexes: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, tokens, lengths) of the agent calls' message sequences laid end to end."""
    fast = call_ids.fixed_width_keys(segments)
    keys = call_ids.fixed_width_keys([b'"' + '","'.join(store).encode() + b'"']) if store else None
    if fast is not None and keys is not None:
        codes, lengths = fast
        at = call_ids.key_positions(keys[0], codes)
        if at is not None:
            return codes, np.fromiter(store.values(), np.int64, len(store))[at], lengths
    return _sequences_by_name(segments, store, path, indexes)  # also names any unknown id


def _sequences_by_name(
    segments: list[bytes], store: dict[str, int], path: Path, indexes: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ids = [orjson.loads(b"[" + s + b"]") for s in segments]
    known: dict[str, int] = {}
    for call, sequence in zip(indexes, ids):
        for mid in sequence:
            if mid not in store:
                raise _unknown_id(path, call, mid)
            known.setdefault(mid, len(known))
    flat = [mid for sequence in ids for mid in sequence]
    return (
        np.array([known[m] for m in flat], dtype=np.int64),
        np.array([store[m] for m in flat], dtype=np.int64),
        np.array([len(s) for s in ids], dtype=np.int64),
    )


def _unknown_id(path: Path, call, mid: str) -> RecordError:
    """An agent call's prompt names a message the store lacks (both schema versions say it so)."""
    return RecordError(path, f"call {call}: message id {mid} is not in messages.jsonl")


def _events(indexes: list[int], events_of: list, path: Path) -> list[tuple[int, int, int, int, bool]]:
    """Per call with compression events: (its position, the number of events, the step's (U, T)
    from ``unchanged_prefix`` (-1, -1 where they do not say where the change was), whether one
    is OTRC). ``events_of`` holds each call's ``events``, already checked to be a list or null;
    ``indexes`` each call's index."""
    found = []
    for i in [i for i, events in enumerate(events_of) if events]:  # most calls have none
        try:
            where = unchanged_prefix(events_of[i])
        except ValueError as exc:
            raise RecordError(path, f"call {indexes[i]}: {exc}") from None
        unchanged, before = (-1, -1) if where is None else where
        found.append((i, len(events_of[i]), unchanged, before, has_otrc(events_of[i])))
    return found
