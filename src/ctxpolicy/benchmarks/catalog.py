"""What each benchmark offers to cohort files: every task id with its stratum and difficulty
rank, the study's cohort design, and where the list came from. Needs no dataset download."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxpolicy.benchmarks.base import BenchmarkError


@dataclass(frozen=True)
class Catalog:
    items: list[tuple[str, str, int]]  # (task_id, stratum, difficulty rank)
    design: dict[str, dict[str, Any]]  # the study's cohorts ({} where cohorts are hand-made)
    source: str

    @property
    def stratum_of(self) -> dict[str, str]:
        return {task_id: stratum for task_id, stratum, _ in self.items}


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def swebench_catalog(metadata: Path | None = None) -> Catalog:
    from ctxpolicy.benchmarks import swe_bench

    path = Path(metadata) if metadata else swe_bench.INDEX_FILE
    index = swe_bench.read_metadata_file(path) if metadata else swe_bench.verified_index()
    source = f"{path.name} (sha256 {_sha256(path)[:16]})"
    return Catalog(swe_bench.index_items(index), swe_bench.STUDY_DESIGN, source)


def terminalbench_catalog(dataset_path: Path | None = None) -> Catalog:
    from ctxpolicy.benchmarks import terminal_bench

    task_ids = terminal_bench.core_index()["task_ids"]
    difficulty = {}
    if dataset_path is not None:
        for task_id in task_ids:
            task_yaml = Path(dataset_path) / task_id / "task.yaml"
            if task_yaml.is_file():
                difficulty[task_id] = terminal_bench.read_task_yaml(task_yaml.parent).get("difficulty", "")
    source = f"{terminal_bench.INDEX_FILE.name} (sha256 {_sha256(terminal_bench.INDEX_FILE)[:16]})"
    if difficulty:
        source += f", difficulties from {dataset_path}"
    return Catalog(terminal_bench.index_items(task_ids, difficulty), terminal_bench.STUDY_DESIGN, source)


def local_catalog() -> Catalog:
    from ctxpolicy.benchmarks.local import LocalAdapter

    tasks = LocalAdapter({"cohorts": {}}, Path(".")).all_tasks()
    rank = {"easy": 0, "medium": 1, "hard": 2}
    items = [(t.task_id, t.stratum, rank.get(t.metadata.get("difficulty"), 1)) for t in tasks.values()]
    return Catalog(items, {}, "the offline suite (ctxpolicy.benchmarks.local_suite)")


def catalog_for(adapter: str, *, metadata: Path | None = None, dataset_path: Path | None = None) -> Catalog:
    if adapter == "swebench":
        return swebench_catalog(metadata)
    if adapter == "terminalbench":
        return terminalbench_catalog(dataset_path)
    if adapter == "local":
        return local_catalog()
    raise BenchmarkError(f"no task catalog for adapter {adapter!r}")
