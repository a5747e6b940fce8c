"""From the command line and the config to what a run needs: identity, task, endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxpolicy.agent.runner import Endpoint, RunIdentity, run_seed
from ctxpolicy.agent.versions import REPO_ROOT


class PlanError(ValueError):
    """A run cannot be planned: unknown task, missing threshold, bad endpoint…"""


def make_identity(
    *,
    seed: int,
    benchmark: str,
    cohort: str,
    model: str,
    policy: Any,
    task: Any,
    attempt: int,
    threshold_setting: str | None,
    threshold_tokens: int | None,
    summarizer: str | None,
    cell: str,
    track: str,
) -> RunIdentity:
    """``policy`` is a parsed ``ctxpolicy.policies.PolicySpec``; ``seed`` the study's seed (each
    attempt's run seed is derived from it)."""
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
    study: Any, cell: Any, *, task: Any, attempt: int, threshold: int | None, threshold_setting: str | None = None
) -> RunIdentity:
    """The identity of one run of ``cell`` (a ``ctxpolicy.grid.Cell``) of ``study`` (a
    ``ctxpolicy.study.Study``); ``threshold_setting`` replaces the cell's setting where a run was
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


def find_task(adapter: Any, study: Any, benchmark: str, task_id: str, cohort: str | None) -> tuple[Any, str]:
    """The task and the cohort it was found in (the named one first, then the others)."""
    cohorts = list(study.benchmark(benchmark)["cohorts"])
    order = [cohort] if cohort else []
    order += [c for c in cohorts if c not in order]
    for name in order:
        for task in adapter.tasks(name):
            if task.task_id == task_id:
                return task, name
    raise PlanError(f"task {task_id!r}: not in the {benchmark} cohorts ({', '.join(order)})")


def endpoint_for_url(url: str, model: str, model_cfg: dict, served_name: str | None = None) -> Endpoint:
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


def endpoint_for_server(handle: Any) -> Endpoint:
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


def repo_root() -> Path:
    return REPO_ROOT
