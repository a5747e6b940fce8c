"""SWE-bench instances from a local JSON/JSONL/parquet copy or from the hub (through `datasets`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxpolicy.benchmarks.base import BenchmarkError

LOCAL_SUFFIXES = (".json", ".jsonl", ".parquet")
# what grading with swebench 5 reads from an instance (swebench.harness.utils.make_test_spec)
GRADING_COLUMNS = (
    "instance_id",
    "repo",
    "version",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
    "eval_script",
    "log_parser",
    "eval_type",
)


def missing_dataset_message(bench: str, name: str, path: Path | None, reason: str) -> str:
    where = f"{path} does not exist" if path is not None else f"the hub dataset {name} cannot be loaded ({reason})"
    return (
        f"benchmark {bench}: SWE-bench instances unavailable: {where}. Either set "
        f"benchmarks.{bench}.dataset.path to a local .jsonl/.json/.parquet copy of {name}, or make "
        f"the hub reachable (or its `datasets` cache present) so that {name} loads by name"
    )


def load_instances(
    bench: str, name: str, split: str, path: Path | None, instance_ids: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """instance_id -> instance, for the requested ids (all when None); unknown ids are an error."""
    from swebench.harness.utils import load_swebench_dataset

    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise BenchmarkError(missing_dataset_message(bench, name, path, "missing file"))
        if path.suffix not in LOCAL_SUFFIXES:
            raise BenchmarkError(f"benchmarks.{bench}.dataset.path: {path} is not one of {', '.join(LOCAL_SUFFIXES)}")
        source = str(path)
    else:
        source = name
    try:
        rows = load_swebench_dataset(source, split)
    except Exception as exc:  # datasets raises many kinds (offline, not found, connection)
        raise BenchmarkError(missing_dataset_message(bench, name, path, f"{type(exc).__name__}: {exc}")) from None
    instances = {row["instance_id"]: dict(row) for row in rows}
    if instance_ids is not None:
        missing = [i for i in instance_ids if i not in instances]
        if missing:
            raise BenchmarkError(f"benchmark {bench}: {len(missing)} id(s) not in {source}: {', '.join(missing[:5])}")
        instances = {i: instances[i] for i in instance_ids}
    return instances


def require_grading_columns(bench: str, instance: dict[str, Any]) -> None:
    missing = [c for c in GRADING_COLUMNS if c not in instance]
    if missing:
        raise BenchmarkError(
            f"benchmark {bench}: instance {instance.get('instance_id')!r} lacks {', '.join(missing)} "
            "(swebench 5 grades from the dataset's own eval_script/log_parser: use the current "
            "SWE-bench/SWE-bench_Verified release)"
        )
