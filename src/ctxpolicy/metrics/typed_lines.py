"""A writer's calls.jsonl decoded and checked in one pass of compiled code (msgspec).

Every writer of ours writes schema version 2 lines holding only fields of the call schema. For
those files the lines are decoded straight into typed records whose types are made from the
call schema (``schemas``, the one owner of every field's type and bounds), so parsing and the
field checks are one C pass, and the columns the tables read are taken out of them.

This path takes less than the reader's general path (``records``) takes, never more, and what it
takes it reads as the general path would, value for value (tests/test_metrics_typed_lines.py
holds both to it): every field the schema names is decoded and checked, those the tables do not
read included, so that a file with a value JSON parsing refuses (text that is not UTF-8, a number
out of range) is never taken; a field the schema does not name, an integer written ``3.0``, a
prompt that is not version 2, an empty or unfinished line, an index not above the line before's:
``read`` returns None and the general path reads the file, or names what is wrong with it. The
fields the tables read as JSON values (``events``) are parsed by the general path's parser.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Annotated, Literal, Optional

import msgspec
import orjson

from ctxpolicy.metrics import encoded_prompts
from ctxpolicy.metrics.encoded_prompts import EncodedPrompts
from ctxpolicy.rundir import MESSAGE_IDS, PROMPT
from ctxpolicy.schemas import field_rule, schema


@dataclass(frozen=True)
class CallLines:
    """What the tables take from a run's calls.jsonl, in index order."""

    kinds: list[str]  # each call's kind
    values: dict[str, list]  # the checked typed fields (``records.CALL_TYPED_FIELDS``), by field
    reply_ids: list  # each call's reply_id (None where it has none)
    prompts: EncodedPrompts | list[bytes | None]  # version 2's, else each raw message_ids array (None: none)


# JSON-Schema types -> msgspec's, for the fields read by nobody here (checked all the same)
_PLAIN = {"integer": int, "number": float, "string": str, "boolean": bool}


def _number_type(rule) -> object:
    """A typed field's msgspec type from its ``schemas.FieldRule``: int where the rule takes
    integers only (``3.0`` is refused here, taken by the general path), float where it takes any
    number, in the rule's bounds, optional where it takes null."""
    kind = int if float not in rule.types else float
    typed = Annotated[kind, msgspec.Meta(ge=rule.minimum, le=rule.maximum)]
    return Optional[typed] if type(None) in rule.types else typed


def _plain_type(spec: dict) -> object:
    """A field nobody here reads, typed as the schema says (any value JSON parsing refuses is
    refused), optional: the general path takes it whatever it holds."""
    if "enum" in spec:
        return Optional[Literal[tuple(spec["enum"])]]
    kinds = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    (kind,) = [k for k in kinds if k != "null"]
    return Optional[_PLAIN[kind]]


@functools.lru_cache(maxsize=None)
def _decoder(typed_fields: tuple[str, ...], kinds: tuple[str, ...]) -> tuple[msgspec.json.Decoder, tuple[str, ...]]:
    """The decoder of a calls.jsonl laid out as one JSON array, and its lines' fields in order
    (a line's values in that order: ``msgspec.structs.astuple``). ``typed_fields``: the fields
    checked against their rules (``records.CALL_TYPED_FIELDS``, nullable but for ``index``, as
    ``records._check_call_types`` checks them); ``kinds``: the call kinds."""
    properties = schema("call")["properties"]
    prompt = properties[PROMPT]["properties"]
    bound = Annotated[int, msgspec.Meta(ge=prompt["keep"]["minimum"], le=field_rule("call", "index").maximum)]
    prompt_type = msgspec.defstruct(
        "Prompt",
        [("base", Optional[bound]), ("keep", bound), ("add", list[str])],
        forbid_unknown_fields=True,
        gc=False,
    )
    fields = []
    for name, spec in properties.items():
        if name == MESSAGE_IDS:  # version 1: the general path's
            continue
        if name == "index":
            fields.append((name, _number_type(field_rule("call", name, nullable=False))))
        elif name == "kind":
            fields.append((name, Literal[kinds]))
        elif name == PROMPT:
            fields.append((name, prompt_type))
        elif name == "events":  # its text, parsed by the general path's parser (``_events``)
            fields.append((name, msgspec.Raw, _NO_EVENTS))
        elif name in typed_fields:
            fields.append((name, _number_type(field_rule("call", name)), None))
        else:
            fields.append((name, _plain_type(spec), None))
    line = msgspec.defstruct("CallLine", fields, kw_only=True, forbid_unknown_fields=True, gc=False)
    return msgspec.json.Decoder(list[line]), line.__struct_fields__


def read(data: bytes, typed_fields: tuple[str, ...], kinds: tuple[str, ...]) -> CallLines | None:
    """A calls.jsonl's lines (``data``, the file's bytes), or None where this path does not take
    the file (the general path then reads it)."""
    if not data.endswith(b"\n") or data.startswith(b"\n"):  # an empty line elsewhere makes the array invalid
        return None
    decoder, fields = _decoder(typed_fields, kinds)
    try:
        lines = decoder.decode(b"[" + data[:-1].replace(b"\n", b",") + b"]")
    except (msgspec.DecodeError, RecursionError):  # a ValidationError too: a value this path does not take
        return None
    columns = dict(zip(fields, map(list, zip(*map(msgspec.structs.astuple, lines)))))  # at least one line
    texts = columns["events"]
    if data.count(b'"events"') != sum(text is not _NO_EVENTS for text in texts):
        return None  # more than a key a line holding it: one named twice (the first skipped unchecked), or a text
    events = _events(texts)
    if events is None:
        return None
    columns["events"] = events
    bases, keeps, adds = map(list, zip(*map(msgspec.structs.astuple, columns[PROMPT])))  # its fields' order
    encoded = encoded_prompts.encode(columns["index"], bases, keeps, adds)
    if encoded is None:
        return None
    return CallLines(columns["kind"], {name: columns[name] for name in typed_fields}, columns["reply_id"], encoded)


_NO_EVENTS = msgspec.Raw(b"null")
_EMPTY_EVENTS = {b"[]", b"null"}


def _events(texts: list[msgspec.Raw]) -> list | None:
    """Each line's events (a list, or None), from their text as written: parsed by the general
    path's parser, so that their values are those the general path reads (an integer beyond 64 bits
    is a float there, an integer to msgspec), at the depth where the general path finds them (an
    array of lines, each an object) so that the parser's depth limit falls where it falls there.
    Most lines have none: ``[]`` and ``null`` are taken as they are. None where this path does not
    take them (past the depth limit, or neither a list nor null). The decoder checks no value
    inside the text it hands over (``msgspec.Raw``), so a line that names events twice, the first
    unread, is left to the general path (``read``)."""
    raw = list(map(bytes, texts))
    if set(raw) <= _EMPTY_EVENTS:  # most files: no line has events
        return [[] if text == b"[]" else None for text in raw]
    events = []
    for text in raw:
        if text == b"[]":
            events.append([])
        elif text == b"null":
            events.append(None)
        else:
            try:
                value = orjson.loads(b'[{"events":' + text + b"}]")[0]["events"]
            except orjson.JSONDecodeError:
                return None
            if value is not None and type(value) is not list:
                return None
            events.append(value)
    return events
