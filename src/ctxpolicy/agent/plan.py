"""From the study and one of its cells to what the runs need: the plan of a cell (its tasks,
attempts, threshold and settings), each run's identity and task, the endpoint."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ctxpolicy.errors import UsageError
from ctxpolicy.agent.runner import Endpoint, RunIdentity, RunResult, run_seed
from ctxpolicy.agent.settings import RunSettings, build_settings
from ctxpolicy.agent.versions import REPO_ROOT
from ctxpolicy import rundir
from ctxpolicy.study import Pair, Study

if TYPE_CHECKING:
    from ctxpolicy.benchmarks.base import BenchmarkAdapter, Task
    from ctxpolicy.study.grid import Cell
    from ctxpolicy.policies import PolicySpec
    from ctxpolicy.serving.server import ServerHandle


class PlanError(UsageError, ValueError):
    """A run cannot be planned: unknown task, missing threshold, bad endpoint…"""


@dataclass(frozen=True)
class PlannedRun:
    """One run of a cell: its directory, task and attempt, and how to execute it."""

    run_dir: Path
    task_id: str
    attempt: int
    execute: Callable[[], RunResult] | None = None  # None: an outside harness executes it


@dataclass(frozen=True)
class CellPlan:
    """Every run of one cell, planned: what ``agent.cell.execute_cell`` runs."""

    study: Study
    adapter: BenchmarkAdapter
    tasks: list[Task]
    attempts: int
    concurrency: int
    cell: Cell  # its policy parsed once (cell.spec)
    threshold: int | None
    thresholds_file: Path | None  # where ``threshold`` was read; None without a threshold
    settings_of: dict[str, RunSettings]  # by task id

    def info(self) -> dict:
        """The cell's description at the top of cell.json."""
        cell = self.cell
        return {
            "slug": cell.slug,
            "track": cell.track,
            "benchmark": cell.benchmark,
            "model": cell.model,
            "policy": cell.policy,
            "threshold_setting": cell.setting,
            "threshold_tokens": self.threshold,
            "cohort": cell.cohort,
            "summarizer": cell.summarizer,
            "attempts": self.attempts,
            "concurrency": self.concurrency,
        }

    def runs(self, cell_dir: Path) -> list[PlannedRun]:
        """Every run of the cell, not yet bound to an endpoint."""
        return [
            PlannedRun(Path(cell_dir) / rundir.run_dir_name(task.task_id, attempt), task.task_id, attempt)
            for task in self.tasks
            for attempt in range(1, self.attempts + 1)
        ]


def plan_cell(
    study: Study,
    cell: Cell,
    *,
    thresholds: Path | None = None,
    attempts: int | None = None,
    concurrency: int | None = None,
    tasks: Sequence[str] | None = None,
    overrides: dict | None = None,
) -> CellPlan:
    """The plan of ``cell`` of ``study``: its tasks (the cohort cut to the benchmark's cohort_limit, or the named ``tasks`` of them), its
    threshold (from ``thresholds`` or the pair's thresholds file), ``attempts`` and ``concurrency``
    (default: the study's), each task's run settings with ``overrides``. Bad values raise PlanError
    naming the option."""
    for option, value in (("--concurrency", concurrency), ("--attempts", attempts)):
        if value is not None and value < 1:  # 0 must not fall back to the config's value
            raise PlanError(f"{option} {value}: must be 1 or more")
    threshold = study.resolve_threshold(cell, thresholds)
    thresholds_file = (
        None if cell.setting is None else (thresholds or study.thresholds_file(Pair(cell.model, cell.benchmark)))
    )
    adapter = make_adapter(study, cell.benchmark)
    wanted = study.tasks(cell)
    if tasks:
        unknown = sorted(set(tasks) - set(wanted))
        if unknown:
            raise PlanError(
                f"--tasks: {', '.join(unknown)} not among the cell's tasks (cohort {cell.cohort}, "
                "cut to the benchmark's cohort_limit)"
            )
        wanted = list(tasks)
    chosen = [t for t in adapter.tasks(cell.cohort) if t.task_id in set(wanted)]
    settings_of = {
        t.task_id: build_settings(
            study, cell.benchmark, cell.model, task_timeout_s=t.timeout_s, overrides=overrides or {}
        )
        for t in chosen
    }
    return CellPlan(
        study,
        adapter,
        chosen,
        attempts or study.attempts,
        concurrency or study.concurrency(cell.benchmark),
        cell,
        threshold,
        thresholds_file,
        settings_of,
    )


def make_adapter(study: Study, benchmark: str) -> BenchmarkAdapter:
    """The benchmark's adapter, its environment checked."""
    from ctxpolicy.benchmarks import get_adapter

    adapter = get_adapter(benchmark, study.benchmark(benchmark), REPO_ROOT)
    adapter.check_environment()
    return adapter


def make_identity(
    *,
    seed: int,
    benchmark: str,
    cohort: str,
    model: str,
    policy: PolicySpec,
    task: Task,
    attempt: int,
    threshold_setting: str | None,
    threshold_tokens: int | None,
    summarizer: str | None,
    cell: str,
    track: str,
) -> RunIdentity:
    """``seed`` is the study's seed (each attempt's run seed is derived from it)."""
    return RunIdentity(
        benchmark=benchmark,
        cohort=cohort,
        task_id=task.task_id,
        stratum=task.stratum,
        model=model,
        policy=str(policy),
        primitive=policy.primitive,
        trigger=policy.trigger,
        threshold_setting=threshold_setting if policy.needs_threshold else None,
        threshold_tokens=threshold_tokens if policy.needs_threshold else None,
        depth=policy.depth,
        summarizer=summarizer,
        attempt=attempt,
        seed=run_seed(seed, attempt),
        cell=cell,
        track=track,
    )


def cell_identity(
    study: Study, cell: Cell, *, task: Task, attempt: int, threshold: int | None, threshold_setting: str | None = None
) -> RunIdentity:
    """The identity of one run of ``cell`` of ``study``; ``threshold_setting`` replaces the cell's setting where a run was
    given tokens directly (``fixed``)."""
    return make_identity(
        seed=study.seed,
        benchmark=cell.benchmark,
        cohort=cell.cohort,
        model=cell.model,
        policy=cell.spec,
        task=task,
        attempt=attempt,
        threshold_setting=threshold_setting or cell.setting,
        threshold_tokens=threshold,
        summarizer=cell.summarizer,
        cell=cell.slug,
        track=cell.track,
    )


def find_task(
    adapter: BenchmarkAdapter, study: Study, benchmark: str, task_id: str, cohort: str | None
) -> tuple[Task, str]:
    """The task and the cohort it was found in (the named one first, then the others)."""
    cohorts = list(study.benchmark(benchmark)["cohorts"])
    order = [cohort] if cohort else []
    order += [c for c in cohorts if c not in order]
    for name in order:
        for task in adapter.tasks(name):
            if task.task_id == task_id:
                return task, name
    raise PlanError(f"task {task_id!r}: not in the {benchmark} cohorts ({', '.join(order)})")


def endpoint_for_url(url: str, model: str, model_cfg: Mapping[str, object], served_name: str | None = None) -> Endpoint:
    """An endpoint that someone else runs (``--endpoint URL``): we record what we know of it."""
    if not url.startswith(("http://", "https://")):
        raise PlanError(f"--endpoint: {url!r} is not an http(s) URL such as http://127.0.0.1:8000/v1")
    name = served_name or model_cfg.get("served_name") or model
    return Endpoint(
        base_url=url.rstrip("/"),
        served_name=name,
        server={"kind": "endpoint", "version": None, "url": url.rstrip("/")},
        model={
            "name": name,
            "file": None,
            "sha256": None,
            "hub_id": model_cfg.get("hub_id"),
            "revision": model_cfg.get("revision"),
        },
    )


def endpoint_for_server(handle: ServerHandle) -> Endpoint:
    """An endpoint for a server started by ``ctxpolicy.serving.start_server``; its ``info`` has
    the one shape ``ctxpolicy.serving.server.server_info`` writes."""
    info = handle.info
    url = handle.base_url.rstrip("/")
    try:
        server = {"kind": info["kind"], "version": info["version"], "url": url}
        model = {key: info["model"][key] for key in ("name", "file", "sha256", "hub_id", "revision")}
    except (KeyError, TypeError) as exc:
        raise PlanError(f"server {url}: its info lacks {exc} (see ctxpolicy.serving.server.server_info)") from None
    return Endpoint(base_url=url, served_name=handle.served_name, server=server, model=model)


@contextlib.contextmanager
def model_endpoint(
    model_cfg: Mapping[str, object], model: str, *, url: str | None, served_name: str | None, log_path: Path
) -> Iterator[Endpoint]:
    """The endpoint of ``model`` (its config block ``model_cfg``, ``Study.model``): the given URL
    as is, else the server the block describes, started (llamacpp, vllm) or health-checked
    (endpoint) by ``ctxpolicy.serving`` and stopped after."""
    api_key = os.environ.get(model_cfg["api_key_env"]) if model_cfg.get("api_key_env") else None
    if url:
        yield dataclasses.replace(endpoint_for_url(url, model, model_cfg, served_name), api_key=api_key)
        return
    from ctxpolicy.serving import start_server

    log_path.parent.mkdir(parents=True, exist_ok=True)
    with start_server(model_cfg, log_path=log_path) as handle:
        yield dataclasses.replace(endpoint_for_server(handle), api_key=api_key)


def repo_root() -> Path:
    return REPO_ROOT
