"""Cohort files (read by ``ctxpolicy.cohort_file``) and their seeded, stratified drawing.

Drawing is a pure function of (items, quotas, seed): the same inputs give the same cohort on
every machine and Python version (random.Random with a string seed is stable across both).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ctxpolicy import cohort_file as cohort_files  # the reader; ``cohort_file`` below names one file
from ctxpolicy.benchmarks.base import BenchmarkError


def parse_cohort(text: str, source: str = "<cohort>") -> list[str]:
    """``ctxpolicy.cohort_file.parse_cohort``, its errors as ``BenchmarkError``."""
    try:
        return cohort_files.parse_cohort(text, source)
    except cohort_files.CohortError as exc:
        raise BenchmarkError(str(exc)) from None


def cohort_file(benchmark: str, bench_cfg: Mapping, repo_root: Path, cohort: str) -> Path:
    """The file that lists a cohort's task ids, as the benchmark's config names it."""
    cohorts = bench_cfg.get("cohorts") or {}
    if cohort not in cohorts:
        raise BenchmarkError(
            f"benchmark {benchmark}: no cohort {cohort!r} in benchmarks.{benchmark}.cohorts "
            f"(available: {', '.join(sorted(cohorts)) or 'none'})"
        )
    return Path(repo_root) / cohorts[cohort]


def read_cohort(path: Path) -> list[str]:
    """``ctxpolicy.cohort_file.read_cohort`` (relative paths: under the repository root), its errors
    as ``BenchmarkError``."""
    try:
        return cohort_files.read_cohort(path)
    except cohort_files.CohortError as exc:
        raise BenchmarkError(str(exc)) from None


def unknown_ids(ids: Iterable[str], known: Iterable[str]) -> list[str]:
    known_set = set(known)
    return [i for i in ids if i not in known_set]


def require_known(ids: Sequence[str], known: Iterable[str], source: str) -> None:
    missing = unknown_ids(ids, known)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise BenchmarkError(f"{source}: unknown task id(s): {shown}")


def stratified_sample(items: Sequence[tuple[str, str]], quotas: Mapping[str, int], seed: int) -> list[str]:
    """Draw quotas[stratum] ids from each stratum of (task_id, stratum) items, without replacement."""
    by_stratum: dict[str, list[str]] = {}
    for task_id, stratum in items:
        by_stratum.setdefault(stratum, []).append(task_id)
    drawn: list[str] = []
    for stratum, n in quotas.items():
        pool = sorted(by_stratum.get(stratum, []))
        if n > len(pool):
            raise BenchmarkError(f"stratum {stratum!r} has {len(pool)} tasks, cannot draw {n}")
        drawn += random.Random(f"{seed}:{stratum}").sample(pool, n)
    return drawn


def stratum_counts(ids: Iterable[str], stratum_of: Mapping[str, str]) -> dict[str, int]:
    return dict(Counter(stratum_of[i] for i in ids))


def cohort_problems(
    ids: Sequence[str],
    stratum_of: Mapping[str, str],
    expected: Mapping[str, int] | None = None,
    subset_of: Sequence[str] | None = None,
) -> list[str]:
    """Everything wrong with a cohort, as sentences (empty when it is fine)."""
    problems = []
    duplicates = [i for i, n in Counter(ids).items() if n > 1]
    if duplicates:
        problems.append(f"duplicate ids: {', '.join(sorted(duplicates))}")
    missing = unknown_ids(ids, stratum_of)
    if missing:
        problems.append(f"unknown ids: {', '.join(missing)}")
    if expected is not None and not missing:
        counts = stratum_counts(ids, stratum_of)
        if counts != dict(expected):
            problems.append(
                f"strata {dict(sorted(counts.items()))} differ from expected {dict(sorted(expected.items()))}"
            )
    if subset_of is not None:
        outside = unknown_ids(ids, subset_of)
        if outside:
            problems.append(f"ids not in the parent cohort: {', '.join(outside)}")
    return problems


def format_cohort(ids: Sequence[str], header: Sequence[str] = ()) -> str:
    lines = [f"# {h}" if h else "#" for h in header]
    return "\n".join([*lines, *ids]) + "\n"


def draw_cohorts(
    items: Sequence[tuple[str, str, int]], design: Mapping[str, Mapping], seed: int
) -> dict[str, list[str]]:
    """Draw every cohort of a design from (task_id, stratum, rank) items.

    design: {cohort: {"strata": {stratum: n}, "from": parent cohort (optional)}}; a cohort with
    `from` is drawn out of its parent (the study's sweep subset out of its main cohort), so
    parents must come first. Each cohort is listed by rank (easiest first), stratum, then id.
    """
    rank_of = {task_id: (rank, stratum, task_id) for task_id, stratum, rank in items}
    cohorts: dict[str, list[str]] = {}
    for name, spec in design.items():
        parent = spec.get("from")
        if parent is not None and parent not in cohorts:
            raise BenchmarkError(f"cohort {name!r} is drawn from {parent!r}, which is not defined before it")
        pool = [(i, rank_of[i][1]) for i in cohorts[parent]] if parent else [(i, s) for i, s, _ in items]
        drawn = stratified_sample(pool, spec["strata"], seed)
        cohorts[name] = sorted(drawn, key=rank_of.__getitem__)
    return cohorts
