"""Cohort files: one task id per line, ``#`` starts a comment; the one reader of them.

A relative path is relative to the repository root (``ctxpolicy.paths``), never to the current
directory. A missing, unreadable, empty or duplicated-id file is a ``CohortError`` naming the
file: no reader ever falls back to "every task". Standard library only: every room may import it.
"""

from __future__ import annotations

from pathlib import Path

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.paths import in_repo


class CohortError(CtxpolicyError, ValueError):
    """A cohort file that cannot be used; the message names the file (and line)."""


def parse_cohort(text: str, source: str = "<cohort>") -> list[str]:
    """The task ids of a cohort file's text, in file order."""
    ids: list[str] = []
    first_line: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        task_id = raw.split("#", 1)[0].strip()
        if not task_id:
            continue
        if task_id in first_line:
            raise CohortError(f"{source}:{lineno}: duplicate task id {task_id!r} (first on line {first_line[task_id]})")
        first_line[task_id] = lineno
        ids.append(task_id)
    if not ids:
        raise CohortError(f"{source}: cohort file lists no task ids")
    return ids


def cohort_path(path: str | Path) -> Path:
    """Where a cohort file named in a config lies (relative: under the repository root)."""
    return in_repo(path)


def read_cohort(path: str | Path) -> list[str]:
    """The task ids of the cohort file at ``path`` (relative: under the repository root)."""
    path = cohort_path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CohortError(f"cohort file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CohortError(f"{path}: cannot read cohort file ({getattr(exc, 'strerror', None) or exc})") from None
    return parse_cohort(text, str(path))
