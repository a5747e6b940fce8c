"""The JSON schemas of the run records: the one definition of run.json, a calls.jsonl line, a
messages.jsonl line and verdict.json (docs/schema.md, "Run records").

A leaf (standard library and jsonschema): the agent checks the whole contract against these
schemas (``ctxpolicy.agent.validate``); the metrics read the fields they use through a *reading
view* (``reading_view``) or, for JSON lines, column by column (``field_rule``). So both rooms
share one definition without importing each other.

A reading view keeps only the fields a reader uses, lets each be absent or null (an empty cell
in a table) unless the reader needs it, and keeps every type, enum and bound of the contract.
Readers also bound every number to ``SAFE_INTEGER`` in magnitude (``2**53 - 1``: what a float
holds exactly, so no token count, latency or time overflows or loses digits in a table); JSON
holds no NaN or infinity, so a number in bounds is finite.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SCHEMA_DIR = Path(__file__).resolve().parent
SAFE_INTEGER = 2**53 - 1  # the largest magnitude a reader accepts for any number
NAMES = ("run", "call", "message", "verdict")

_PYTHON_TYPES = {
    "integer": (int,),
    "number": (int, float),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "array": (list,),
    "object": (dict,),
}


@functools.lru_cache(maxsize=None)
def _load(name: str) -> str:
    if name not in NAMES:
        raise KeyError(f"no record schema {name!r}; known: {', '.join(NAMES)}")
    return (SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8")


def schema(name: str) -> dict:
    """A fresh copy of the schema ``name`` (run, call, message, verdict)."""
    return json.loads(_load(name))


@functools.lru_cache(maxsize=None)
def validator(name: str):
    """A validator of the whole contract of ``name``."""
    from jsonschema import Draft202012Validator

    return Draft202012Validator(schema(name))


def _nullable(leaf: dict) -> dict:
    leaf = copy.deepcopy(leaf)
    if "type" in leaf:
        types = [leaf["type"]] if isinstance(leaf["type"], str) else list(leaf["type"])
        leaf["type"] = types + ([] if "null" in types else ["null"])
    if "enum" in leaf and None not in leaf["enum"]:
        leaf["enum"] = [*leaf["enum"], None]
    if "const" in leaf:
        leaf["enum"] = [leaf.pop("const"), None]
    return leaf


def _kinds(leaf: dict) -> list[str]:
    kinds = leaf.get("type", [])
    return [kinds] if isinstance(kinds, str) else list(kinds)


def _bounded(leaf: dict) -> dict:
    """A numeric leaf with the readers' bounds (``SAFE_INTEGER``) where the contract gives none."""
    if {"integer", "number"} & set(_kinds(leaf)):
        leaf.setdefault("maximum", SAFE_INTEGER)
        leaf.setdefault("minimum", -SAFE_INTEGER)
    return leaf


def _node(parent: dict, name: str) -> dict:
    try:
        return parent["properties"][name]
    except KeyError:
        raise KeyError(f"field {name} is not in the schema {parent.get('title')!r}") from None


def reading_view(record: dict, read: Iterable[str], required: Iterable[str] = ()) -> dict:
    """The part of schema ``record`` that a reader uses.

    ``read`` lists dotted field paths (``identity.attempt``, ``timing.wall_s``); the view has
    exactly these fields (and the objects that hold them), each with its type, enum and bounds
    from ``record``. A field in ``required`` must be present with the contract's type; any other
    field may also be absent or null. Conditions between fields (``allOf``) are the full contract's business."""
    required = set(required)
    view: dict = {"type": "object", "properties": {}}
    for path in sorted(set(read) | required):
        parts = path.split(".")
        holder, spec = view, record
        for depth, part in enumerate(parts):
            spec = _node(spec, part)
            prefix = ".".join(parts[: depth + 1])
            needed = any(r == prefix or r.startswith(prefix + ".") for r in required)
            if depth == len(parts) - 1:
                child = _bounded(copy.deepcopy(spec) if needed else _nullable(spec))
                holder["properties"][part] = child
            else:
                child = holder["properties"].setdefault(part, {"type": ["object", "null"], "properties": {}})
                if needed:
                    child["type"] = "object"
            if needed and part not in holder.setdefault("required", []):
                holder["required"].append(part)
            holder = child
    return view


@dataclass(frozen=True)
class FieldRule:
    """What one top-level field of a record may hold once parsed from JSON, for checks in bulk."""

    types: frozenset  # exact Python types (``type(True)`` is bool, never an integer here)
    minimum: float | None
    kinds: str  # the schema's type names, for messages: "integer or null"
    maximum: float | None = None

    def violation(self, values: list) -> int | None:
        """The position of the first value of the wrong type, below the minimum or above the
        maximum, else None. As in JSON Schema, a float with an integral value (``3.0``) is an integer."""
        present = set(map(type, values))
        if not present <= self.types:
            whole_floats = "integer" in self.kinds and float not in self.types
            bad = (
                i
                for i, v in enumerate(values)
                if type(v) not in self.types and not (whole_floats and type(v) is float and v.is_integer())
            )
            first = next(bad, None)
            if first is not None:
                return first
        if not {int, float} & self.types:
            return None
        numbers = values if type(None) not in present else [v for v in values if v is not None]
        if numbers and self.minimum is not None and min(numbers) < self.minimum:
            return next(i for i, v in enumerate(values) if v is not None and v < self.minimum)
        if numbers and self.maximum is not None and max(numbers) > self.maximum:
            return next(i for i, v in enumerate(values) if v is not None and v > self.maximum)
        return None

    def why(self, value) -> str:
        if type(value) in self.types or (type(value) is float and value.is_integer() and "integer" in self.kinds):
            if self.maximum is not None and value > self.maximum:
                return f"above the maximum {self.maximum}"
            return f"below the minimum {self.minimum}"
        return f"not {self.kinds}"


@functools.lru_cache(maxsize=None)
def field_rule(name: str, field: str, *, nullable: bool = True) -> FieldRule:
    """The rule of top-level ``field`` of record ``name``; with ``nullable``, null is allowed too."""
    spec = schema(name)["properties"][field]
    kinds = spec.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    if nullable and "null" not in kinds:
        kinds.append("null")
    types = frozenset(t for kind in kinds for t in _PYTHON_TYPES[kind])
    numeric = {"integer", "number"} & set(kinds)
    minimum = spec.get("minimum", -SAFE_INTEGER if numeric else None)
    maximum = spec.get("maximum", SAFE_INTEGER if numeric else None)
    return FieldRule(types, minimum, " or ".join(kinds), maximum)


def describe(error) -> str:
    """One jsonschema error as "field a.b is VALUE: why" (or "field a.b is missing")."""
    path = ".".join(map(str, error.absolute_path))
    if error.validator == "required":
        missing = next((name for name in error.validator_value if name not in error.instance), "?")
        return f"field {path + '.' if path else ''}{missing} is missing"
    value = repr(error.instance)
    value = value if len(value) <= 60 else value[:57] + "..."
    expected = error.validator_value
    if error.validator == "type":
        kinds = [expected] if isinstance(expected, str) else list(expected)
        why = "not " + " or ".join(k for k in kinds)
    elif error.validator == "enum":
        why = "not one of " + ", ".join(map(repr, expected))
    elif error.validator == "minimum":
        why = f"below the minimum {expected}"
    elif error.validator == "maximum":
        why = f"above the maximum {expected}"
    else:
        why = error.message
    return f"field {path or '(top)'} is {value}: {why}"


# Keywords ``quick_check`` compiles; a view with any other (a condition, a pattern) is always
# handed to the full validator. Annotations change nothing.
_QUICK_KEYWORDS = frozenset({"type", "enum", "const", "minimum", "maximum", "pattern", "properties", "required"})
_ANNOTATIONS = frozenset({"title", "description", "$comment", "default", "examples"})
_SIMPLE_TYPES = (str, type(None))  # enum and const members the quick check compares itself


def _exact_types(kinds: list[str]) -> frozenset:
    """The Python types a value of these JSON types parses to (a bool is no integer or number);
    a float with an integral value also counts as an integer, checked apart."""
    types = {t for kind in kinds for t in _PYTHON_TYPES[kind]}
    if "integer" in kinds or "number" in kinds:
        types.discard(bool)
        types.add(int)
    if "boolean" in kinds:
        types.add(bool)
    return frozenset(types)


def _compile(node: dict):
    """A predicate for one schema node, or None where it uses a keyword the quick check does not
    compile (the full validator then decides)."""
    if set(node) - _QUICK_KEYWORDS - _ANNOTATIONS:
        return None
    tests = []
    if "type" in node:
        kinds = _kinds(node)
        types = _exact_types(kinds)
        integral_floats = "integer" in kinds and "number" not in kinds
        tests.append(
            lambda v, types=types, whole=integral_floats: (
                type(v) in types or (whole and type(v) is float and v.is_integer())
            )
        )
    for key in ("enum", "const"):
        if key in node:
            members = node[key] if key == "enum" else [node[key]]
            if not all(isinstance(m, (*_SIMPLE_TYPES, bool)) for m in members):
                return None
            allowed = frozenset((type(m), m) for m in members)
            tests.append(lambda v, allowed=allowed: type(v) in (str, type(None), bool) and (type(v), v) in allowed)
    if "pattern" in node:  # searched, not matched whole: as the validator's own ``pattern`` does
        tests.append(lambda v, rx=re.compile(node["pattern"]): type(v) is not str or rx.search(v) is not None)
    if "minimum" in node:
        tests.append(lambda v, low=node["minimum"]: type(v) not in (int, float) or v >= low)
    if "maximum" in node:
        tests.append(lambda v, high=node["maximum"]: type(v) not in (int, float) or v <= high)
    children = []
    for name, child in (node.get("properties") or {}).items():
        test = _compile(child)
        if test is None:
            return None
        children.append((name, test))
    required = tuple(node.get("required", ()))

    def check(value) -> bool:
        if not all(test(value) for test in tests):
            return False
        if type(value) is not dict:
            return True  # properties and required concern objects only
        if not all(name in value for name in required):
            return False
        return all(name not in value or test(value[name]) for name, test in children)

    return check


def quick_check(view: dict):
    """A compiled predicate for a reading view (``reading_view``): True only where the record
    certainly satisfies the view, so that a reader runs the generic validator (for its messages)
    only on the records that may fail it. Returns None for a view with keywords it does not
    compile. Written here rather than taken from a schema compiler: the views use seven keywords,
    and the predicate must never accept what the Draft 2020-12 validator refuses (a bool is no
    integer, ``1`` is no ``true``), which this one guarantees by falling back on anything unsure."""
    return _compile(view)
