"""SWE-bench's report formats read into one verdict per task (``verdict.json`` of an imported run).

* the harness's summary report: a JSON object with ``resolved_ids`` (and, where present,
  ``unresolved_ids``, ``error_ids``, ``completed_ids``, ``submitted_ids``);
* the per-instance report: ``{instance_id: {"resolved": bool, ...}}``;
* a CSV with the columns ``instance_id,resolved`` (``true/false``, ``1/0``, ``yes/no``).

A task the report does not name gets no verdict when the report lists who was graded
(``completed_ids``, ``submitted_ids``, ``unresolved_ids`` or per-instance entries), and
``resolved: false`` when it is a bare ``resolved_ids`` list (the leaderboard's own reading).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError

HARNESS = "swe-bench-report"
TRUE, FALSE = ("true", "1", "yes", "y", "t"), ("false", "0", "no", "n", "f", "")
LISTS = ("unresolved_ids", "error_ids", "completed_ids", "submitted_ids", "empty_patch_ids")


class VerdictsError(CtxpolicyError, ValueError):
    """A verdicts file that cannot be read; the message names the file, the field and the value."""


class Verdicts:
    """Task id -> resolved, from one report file."""

    def __init__(self, path: Path, resolved: dict[str, bool], default: bool | None) -> None:
        self.path, self.resolved, self.default = Path(path), resolved, default

    def verdict(self, task_id: str) -> dict | None:
        """The task's ``verdict.json`` (None: the report does not grade it)."""
        value = self.resolved.get(task_id, self.default)
        if value is None:
            return None
        return {"resolved": value, "harness": HARNESS, "report": {"task_id": task_id}, "log": str(self.path)}


def read_verdicts(path: str | Path) -> Verdicts:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise VerdictsError(f"{path}: unreadable ({exc})") from None
    if path.suffix.lower() == ".csv":
        return Verdicts(path, _from_csv(path, text), None)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VerdictsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise VerdictsError(f"{path}: nested too deeply to read") from None
    if not isinstance(data, dict):
        raise VerdictsError(f"{path}: (top level) is a {type(data).__name__}; expected an object")
    if "resolved_ids" in data:
        return _from_summary(path, data)
    resolved = {}
    for task_id, entry in data.items():
        value = entry.get("resolved") if isinstance(entry, dict) else None
        if not isinstance(value, bool):
            raise VerdictsError(f"{path}: field {task_id}.resolved is {value!r}; expected true or false")
        resolved[task_id] = value
    return Verdicts(path, resolved, None)


def _ids(path: Path, data: dict, key: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise VerdictsError(f"{path}: field {key} is {json.dumps(value)[:60]}; expected a list of instance ids")
    return value


def _from_summary(path: Path, data: dict) -> Verdicts:
    resolved = dict.fromkeys(_ids(path, data, "resolved_ids"), True)
    graded = False
    for key in LISTS:
        if key in data:
            graded = True
            for task_id in _ids(path, data, key):
                resolved.setdefault(task_id, False)
    return Verdicts(path, resolved, None if graded else False)


def _from_csv(path: Path, text: str) -> dict[str, bool]:
    reader = csv.DictReader(io.StringIO(text))
    missing = {"instance_id", "resolved"} - set(reader.fieldnames or ())
    if missing:
        raise VerdictsError(f"{path}: header {reader.fieldnames}: missing column(s) {', '.join(sorted(missing))}")
    resolved = {}
    for number, row in enumerate(reader, 2):
        value = (row["resolved"] or "").strip().lower()
        if value not in TRUE + FALSE:
            raise VerdictsError(f"{path}: line {number}: field resolved is {row['resolved']!r}; expected true or false")
        resolved[row["instance_id"].strip()] = value in TRUE
    return resolved
