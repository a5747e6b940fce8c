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

import functools
import operator
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.metrics.commands import count_commands, count_repeats, reply_times
from ctxpolicy.policies import actions
from ctxpolicy.metrics import call_ids, cost_methods
from ctxpolicy.metrics.cost import DEFAULT_BLOCK, DEFAULT_DISCOUNT, billed, has_otrc, unchanged_prefix
from ctxpolicy.metrics.cost_methods import RunCalls, Sequences, SourceCalls
from ctxpolicy.metrics.outcomes import harness_timed_out, is_time_limited, outcome_class
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


def agent_time(timing: dict) -> float | None:
    """The run's latency as A.5 measures it, from the agent's start to the run's end: ``agent_s``
    (the agent loop; the wall-time limit starts at the same instant), else ``wall_s - setup_s``
    for records that have only those, else ``wall_s`` (a record without a setup time has none
    to leave out); None when the record has no time."""
    agent = timing.get("agent_s")
    if isinstance(agent, (int, float)) and not isinstance(agent, bool):
        return float(agent)
    wall, setup = timing.get("wall_s"), timing.get("setup_s")
    if not isinstance(wall, (int, float)) or isinstance(wall, bool):
        return None
    if isinstance(setup, (int, float)) and not isinstance(setup, bool):
        return max(float(wall) - float(setup), 0.0)
    return float(wall)


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
    try:
        return _read_run(Path(run_dir), block, discount)
    except RecordError:
        raise
    except Exception as exc:  # a reader bug or a shape no check foresaw
        raise RecordError(Path(run_dir), f"unreadable ({type(exc).__name__}: {exc})") from exc


# The reason an open proxy conversation (run.json rewritten after every call, docs/proxy.md) is
# left out: the one every reader of a run tree gives (``rundir.STILL_OPEN``).
OPEN_CONVERSATION = rundir.STILL_OPEN


def _read_run(run_dir: Path, block: int, discount: float) -> RunRows:
    run_path = run_dir / RUN_JSON
    run = _load_json(run_path)
    if isinstance(run, dict) and run.get("complete") is False and (run.get("proxy") or {}).get("open") is True:
        raise RecordError(run_path, OPEN_CONVERSATION)
    if not isinstance(run, dict) or run.get("complete") is not True:
        value = run.get("complete") if isinstance(run, dict) else run
        raise RecordError(run_path, f"field complete is {value!r}, not true")
    _check_record("run", run, run_path)
    identity = run["identity"]

    verdict_path = run_dir / VERDICT_JSON
    verdict = _load_json(verdict_path, optional=True)
    if verdict is not None:
        _check_record("verdict", verdict, verdict_path)

    action_format = action_format_of(run, run_path)
    store, commands, assistant = _read_stores(run_dir, action_format, run)
    calls, values, id_segments = _read_calls(run_dir / CALLS_JSONL)
    commands = _with_repeats(commands, assistant, calls, id_segments, action_format)
    _check_call_counts(calls, run.get("totals"), run_dir / CALLS_JSONL)
    source = source_calls(run_dir, run) if rundir.message_base(run_dir, run) is not None else None
    columns = _call_columns(calls, values, id_segments, store, run_dir / CALLS_JSONL, block, source)
    row = _run_row(run_dir, run, identity, verdict, columns, discount)
    row["retrieval_cmds"], row["execution_cmds"] = commands
    return RunRows(row, columns)


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
    calls, values, _ = _read_calls(path)
    return own_source(calls, values)


def own_source(calls: list[dict], values: dict[str, list]) -> SourceCalls:
    """A run's own agent calls as a source (a run that was really served is its own profile)."""
    agent = np.array([c["kind"] == "agent" for c in calls], dtype=bool)

    def column(name: str) -> np.ndarray:
        return np.array(values[name], dtype=np.float64).reshape(len(calls))  # null -> NaN

    return _source_of(agent, column("prompt_tokens"), column("cached_tokens"), column("est_tokens_after"))


def _source_of(agent: np.ndarray, prompts: np.ndarray, cached: np.ndarray, after: np.ndarray) -> SourceCalls:
    """``own_source`` from the calls' numeric columns (NaN: not reported): a prompt not reported
    counts 0, a local count not reported is the prompt's."""
    prompts = np.where(np.isnan(prompts), 0.0, prompts)[agent]
    local = after[agent]
    return SourceCalls(prompts, cached[agent], np.where(np.isnan(local), prompts, local))


def action_format_of(run: dict, path: Path) -> str:
    """The run's ``settings.action_format`` (``mswea_bash_command`` when it names none)."""
    try:
        return actions.of_record(run)
    except actions.ActionFormatError as exc:
        raise RecordError(path, str(exc)) from None


def _with_repeats(commands, assistant: dict[str, dict], calls: list[dict], segments, action_format: str):
    """The command counts with each repeated reply counted every time it was given."""
    agent = [k for k, call in enumerate(calls) if call["kind"] == "agent"]
    longest = max((segments[k] for k in agent if segments[k] is not None), key=len, default=b"")
    ids = [piece.strip().strip(b'"').decode() for piece in longest.split(b",") if piece.strip()]
    times = reply_times(ids, [calls[k].get("reply_id") for k in agent])
    if not times:
        return commands
    r, e = count_repeats(assistant, times, action_format)
    return commands[0] + r, commands[1] + e


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
    if _PIECES_KEY in data:  # only then can a line have pieces
        for entry in entries:
            if entry["id"] in assistant and rundir.CONTENT_PIECES in entry:
                raise RecordError(path, f"message {entry['id']}: field {rundir.CONTENT_PIECES} on an assistant message")
    return store, assistant


_ID, _TOKENS = operator.itemgetter("id"), operator.itemgetter("tokens")
_PIECES_KEY = f'"{rundir.CONTENT_PIECES}"'.encode()


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


def _read_calls(path: Path) -> tuple[list[dict], dict[str, list], list[bytes | None]]:
    """Calls in index order, the values of their typed fields (checked, in the same order), and
    each call's raw message_ids array text kept apart.

    The id arrays are most of a calls.jsonl; cutting them out before JSON parsing and decoding
    them in bulk (``call_ids``) is what keeps the aggregate of 35,000 runs short.
    """
    data = _read_bytes(path)
    cut = call_ids.split_lines(data)
    if cut is not None:  # one id array per line
        rest, segments = cut
        calls = _parse_lines(b'"message_ids":null'.join(rest), path)
    else:
        calls = _parse_lines(data, path)
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
    if indexes != sorted(indexes):
        order = sorted(range(len(calls)), key=indexes.__getitem__)
        calls, segments = [calls[i] for i in order], [segments[i] for i in order]
        values = {name: [column[i] for i in order] for name, column in values.items()}
    _check_unique_indexes(values["index"], path)
    return calls, values, segments


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


def _check_call_counts(calls: list[dict], totals, path: Path) -> None:
    """The agent and summary calls in calls.jsonl are as many as run.json's ``totals`` say (where
    it says): fewer lines is a calls.jsonl cut short, more is one appended to after the run ended."""
    if not isinstance(totals, dict):
        return
    agent = sum(1 for call in calls if call["kind"] == "agent")
    for name, counted in (("agent_calls", agent), ("summary_calls", len(calls) - agent)):
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
        signed = codes.view(np.int64)  # numpy searches int64 faster than uint64; only equality matters
        order = np.argsort(keys[0].view(np.int64))
        sorted_keys = keys[0].view(np.int64)[order]
        sorted_tokens = np.fromiter(store.values(), np.int64, len(store))[order]
        where = np.minimum(np.searchsorted(sorted_keys, signed), len(sorted_keys) - 1)
        if (sorted_keys[where] == signed).all():
            return codes, sorted_tokens[where], lengths
    return _sequences_by_name(segments, store, path, indexes)  # also names any unknown id


def _sequences_by_name(
    segments: list[bytes], store: dict[str, int], path: Path, indexes: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ids = [orjson.loads(b"[" + s + b"]") for s in segments]
    known: dict[str, int] = {}
    for call, sequence in zip(indexes, ids):
        for mid in sequence:
            if mid not in store:
                raise RecordError(path, f"call {call}: message id {mid} is not in messages.jsonl")
            known.setdefault(mid, len(known))
    flat = [mid for sequence in ids for mid in sequence]
    return (
        np.array([known[m] for m in flat], dtype=np.int64),
        np.array([store[m] for m in flat], dtype=np.int64),
        np.array([len(s) for s in ids], dtype=np.int64),
    )


_FLOAT_FIELDS = tuple(c for c in CALL_RECORDED if c not in CALL_FIELDS)  # the numeric ones, in order


def _call_columns(
    calls: list[dict],
    values: dict[str, list],
    segments: list[bytes | None],
    store: dict[str, int],
    path: Path,
    block: int,
    source=None,
) -> dict[str, np.ndarray]:
    n = len(calls)
    # every numeric field in one conversion (null -> NaN: the server or the record did not say)
    numeric = np.array([values[key] for key in _FLOAT_FIELDS], dtype=np.float64).reshape(len(_FLOAT_FIELDS), n)
    floats = dict(zip(_FLOAT_FIELDS, numeric))

    def column(key: str) -> np.ndarray:
        return floats[key]

    agent = np.array([c["kind"] == "agent" for c in calls], dtype=bool)
    prompt_column = column("prompt_tokens")
    counted = ~np.isnan(prompt_column)
    prompts = np.nan_to_num(prompt_column).astype(np.int64)
    events, unchanged, before = _event_columns(calls, values["events"], path)

    where = np.flatnonzero(agent)
    agent_segments = [segments[i] for i in where]
    sequences = None
    if all(s is not None for s in agent_segments):  # without message sequences no prefix is known
        codes, tokens, lengths = _sequences(agent_segments, store, path, [values["index"][i] for i in where])
        sequences = Sequences(codes, tokens, lengths)
    otrc = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(events):  # only a call with events can have an OTRC one
        otrc[i] = has_otrc(calls[i].get("events"))
    after = column("est_tokens_after")
    run_calls = RunCalls(
        prompts[agent],
        reported_cached=column("cached_tokens")[agent],
        otrc=otrc[agent],
        unchanged=unchanged[agent],
        before=before[agent],
        after=np.where(np.isnan(after), -1, after)[agent].astype(np.int64),
        start=column("start")[agent],
        sequences=sequences,
        source=_source_of(agent, prompt_column, column("cached_tokens"), after) if source is None else source,
    )
    derived = {}
    for method, counts in cost_methods.count_all(run_calls, block).items():
        entry = cost_methods.method(method)
        for name, part in zip(entry.calls_columns, ("cached", "written")):
            full = np.zeros(n, dtype=np.float64)
            if counts is None:
                full[agent] = np.nan
            else:
                full[agent] = counts.cached if part == "cached" else counts.written_or_zero()
            derived[name] = full

    return {
        "index": np.array(values["index"], dtype=np.int64),
        "kind": np.where(agent, 0, 1).astype(np.int8),  # codes into CALL_KINDS
        "step": column("step"),
        "start": column("start"),
        "end": column("end"),
        "latency_s": column("latency_s"),
        "prompt_tokens": prompts,
        "prompt_counted": counted,
        "completion_tokens": np.nan_to_num(column("completion_tokens")).astype(np.int64),
        # clamped to the call's prompt, as the runs table's measured cost clamps it (metrics.cost.billed):
        # a server that reports more cached than prompt tokens is not believed past the prompt
        "cached_tokens": _at_most(column("cached_tokens"), prompt_column),
        "est_tokens_before": column("est_tokens_before"),
        "est_tokens_after": column("est_tokens_after"),
        "n_events": events,
        **derived,
    }


def _at_most(cached: np.ndarray, prompts: np.ndarray) -> np.ndarray:
    """``cached`` cut to ``prompts`` where both are known (NaN, not reported, stays NaN)."""
    with np.errstate(invalid="ignore"):
        return np.where(cached > prompts, prompts, cached)


def _event_columns(calls: list[dict], events_of: list, path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per call: the number of compression events, and the step's (U, T) from ``unchanged_prefix``
    (-1 where there are no events or they do not say where the change was). ``events_of`` holds
    each call's ``events``, already checked to be a list or null."""
    n = len(calls)
    counts = np.zeros(n, dtype=np.int64)
    unchanged, before = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    for i in [i for i, events in enumerate(events_of) if events]:  # most calls have none
        counts[i] = len(events_of[i])
        try:
            where = unchanged_prefix(events_of[i])
        except ValueError as exc:
            raise RecordError(path, f"call {calls[i]['index']}: {exc}") from None
        if where is not None:
            unchanged[i], before[i] = where
    return counts, unchanged, before


def method_bills(
    calls: dict[str, np.ndarray], agent: np.ndarray, prompts: np.ndarray, summary_input: int, discount: float
) -> dict[str, float | int | None]:
    """Each cost method's runs-table columns for one run (None where the method cannot price it:
    a per-call count is NaN, or the run has no agent call and the method needs the server's)."""
    out: dict[str, float | int | None] = {}
    for method in cost_methods.methods():
        cached = calls[method.call_column or method.cached_column][agent]
        written = calls[method.written_column][agent] if method.writes else None
        known = not np.isnan(cached).any() and (len(cached) > 0 or method.call_column is None)
        bill = (
            billed(
                prompts,
                cached.astype(np.int64),
                summary_input,
                discount,
                written=None if written is None else written.astype(np.int64),
                write_premium=method.write_premium,
            )
            if known
            else None
        )
        values = (
            (None,) * len(method.run_columns)
            if bill is None
            else (bill.billed_input, bill.fresh, bill.cached, *((bill.written,) if method.writes else ()))
        )
        out.update(zip(method.run_columns, values))
    return out


def _run_row(
    run_dir: Path, run: dict, identity: dict, verdict: dict | None, calls: dict[str, np.ndarray], discount: float
) -> dict:
    agent = calls["kind"] == 0
    prompts = calls["prompt_tokens"][agent]
    summary_input = int(calls["prompt_tokens"][~agent].sum())
    totals = run.get("totals") or {}
    timing = run["timing"]
    n_agent = int(agent.sum())
    n_counted = int((agent & calls["prompt_counted"]).sum())
    n_events = int(calls["n_events"].sum())
    bills = method_bills(calls, agent, prompts, summary_input, discount)
    resolved = bool(verdict and verdict["resolved"])
    outcome = run.get("outcome")
    prompt_total = int(calls["prompt_tokens"].sum())
    completion_total = int(calls["completion_tokens"].sum())
    return {
        "run_dir": str(run_dir),
        "cell": identity.get("cell") or run_dir.parent.name,
        "track": identity.get("track"),
        "benchmark": identity["benchmark"],
        "cohort": identity.get("cohort"),
        "model": identity["model"],
        "policy": identity["policy"],
        "primitive": identity.get("primitive"),
        "trigger": identity.get("trigger"),
        "depth": identity.get("depth"),
        "setting": identity.get("threshold_setting"),
        "threshold_tokens": identity.get("threshold_tokens"),
        "summarizer": identity.get("summarizer"),
        "task_id": str(identity["task_id"]),
        "stratum": identity.get("stratum"),
        "attempt": int(identity["attempt"]),
        "seed": identity.get("seed"),
        "outcome": outcome,
        "error": run.get("error"),
        "resolved": resolved,
        "has_verdict": verdict is not None,
        "outcome_class": outcome_class(outcome, resolved, harness_timed_out(verdict)),
        "time_limited": is_time_limited(outcome, harness_timed_out(verdict)),
        "wall_s": timing.get("wall_s"),
        "agent_time_s": agent_time(timing),
        "setup_s": timing.get("setup_s"),
        "steps": n_agent if totals.get("steps") is None else totals["steps"],
        "agent_calls": n_agent,
        "summary_calls": int((~agent).sum()),
        "prompt_tokens": prompt_total,
        "completion_tokens": completion_total,
        "total_tokens": prompt_total + completion_total,
        "peak_prompt_tokens": int(prompts.max()) if n_counted else None,
        "n_prompt_counts": n_counted,
        "compression_events": n_events,
        "compression_freq": n_events / n_agent if n_agent else None,
        "format_errors": totals.get("format_errors"),
        **bills,
        "summary_input": summary_input,
        "agent_latency_s": float(np.nansum(calls["latency_s"][agent])) if n_agent else None,
        "summary_latency_s": float(np.nansum(calls["latency_s"][~agent])),
        "compressions": int((calls["n_events"] > 0).sum()),
    }
