"""A replayed run on disk, in the run-record format (docs/architecture.md, "Run directory").

``{out}/{benchmark}/{model}/{cell_slug}/{task_id}__a{attempt}/`` with messages.jsonl,
calls.jsonl, trajectory.json and run.json (last, atomically), in schema version 2: messages.jsonl
holds only the messages the policy wrote (run.json ``message_base`` names the source run, whose
store holds the rest) and calls.jsonl encodes each prompt against an earlier one
(``ctxpolicy.rundir.PromptEncoder``); a summary request's content is stored as pieces
referencing the messages it repeats (``rundir.content_pieces``); both are written gzip-compressed (``rundir.write_compressed``:
summary requests repeat the source's text), which every reader in ``rundir`` reads as plain. Identity: the source's benchmark,
model, cohort, task and attempt; the replayed policy; ``track: replay``. run.json's ``replay``
block names the source run and says what the summaries were (``replay_summaries``:
``placeholder``, ``real`` or ``none`` for a policy without a summary stage); placeholder
summaries also make ``identity.summarizer`` ``placeholder``, so the runs table shows them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import asdict
from pathlib import Path

from ctxpolicy.agent.runner import SCHEMA_VERSION, RunIdentity, totals_of
from ctxpolicy.agent.versions import hardware, software_versions
from ctxpolicy.atomic import sync_disks
from ctxpolicy.study.grid import Cell
from ctxpolicy.policies import PolicySpec
from ctxpolicy.replay.engine import ReplayedRun
from ctxpolicy.replay.placeholder import MODEL as PLACEHOLDER
from ctxpolicy.rundir import (
    CALLS_JSONL,
    MESSAGE_BASE,
    MESSAGES_JSONL,
    RUN_JSON,
    TRAJECTORY_JSON,
    PromptEncoder,
    message_base_record,
    pieced_line,
    write_compressed,
    write_record,
    write_run_json,
)
from ctxpolicy.rundir import run_dir as run_dir_in

TRACK = "replay"
TRAJECTORY_FORMAT = "ctxpolicy-replay-1"
SUMMARIES = ("placeholder", "real", "none")


@functools.lru_cache(maxsize=1)
def _host() -> dict:
    return hardware()


def replay_cell(identity: dict, policy: str, setting: str | None, summarizer: str | None) -> str:
    return Cell(
        TRACK, identity["benchmark"], identity["model"], policy, setting, identity.get("cohort") or "main", summarizer
    ).slug


def run_dir_for(out: Path, identity: dict, cell: str) -> Path:
    return run_dir_in(out, identity["benchmark"], identity["model"], cell, identity["task_id"], identity["attempt"])


def summaries_kind(policy: PolicySpec, real: bool) -> str:
    """What a replay's summaries are, by the policy (not by whether one fired on this run, so that
    every run of a policy lands in the same cell)."""
    if not policy.needs_summarizer:
        return "none"
    return "real" if real else "placeholder"


def identity_summarizer(policy: PolicySpec, summarizer: str | None) -> str | None:
    """``identity.summarizer`` of a replay: the endpoint's model, or ``placeholder`` for stand-ins."""
    kind = summaries_kind(policy, summarizer is not None)
    return {"none": None, "placeholder": PLACEHOLDER, "real": summarizer}[kind]


def write_replay(
    replayed: ReplayedRun,
    out: Path,
    *,
    setting: str | None,
    summarizer: str | None,
    real_summaries: bool,
    durable: bool = True,
) -> Path:
    """Write the replay's run directory under ``out``; returns it. ``setting`` is the threshold
    setting (``fixed`` for a number given directly, None for a policy without a threshold);
    ``summarizer`` the summarizer model of real summaries (None: the stand-in or none). Without
    ``durable`` the other files skip their fsync (run.json, the record that counts, never does).
    Many replays at once: ``ReplayBatch``."""
    run_dir, record = _write_files(
        replayed, out, setting=setting, summarizer=summarizer, real_summaries=real_summaries, durable=durable
    )
    write_run_json(run_dir, record)
    return run_dir


class ReplayBatch:
    """Replays written together, as durably as ``write_replay`` but without its fsyncs (a few
    milliseconds each, eight per replay: most of the writing time of a study's replays): every
    replay's files but run.json are written unsynced, ``commit`` syncs the disks once and then
    writes the run.json files, so a run.json never names lines that a crash could lose (a
    run.json lost is a replay not done, redone by the next run); ``close`` commits and syncs."""

    def __init__(self) -> None:
        self._records: list[tuple[Path, dict]] = []

    def write(
        self, replayed: ReplayedRun, out: Path, *, setting: str | None, summarizer: str | None, real_summaries: bool
    ) -> Path:
        """``write_replay``'s run directory, its run.json held back until ``commit``."""
        run_dir, record = _write_files(
            replayed, out, setting=setting, summarizer=summarizer, real_summaries=real_summaries, durable=False
        )
        self._records.append((run_dir, record))
        return run_dir

    def commit(self) -> None:
        if not self._records:
            return
        sync_disks()
        for run_dir, record in self._records:
            write_run_json(run_dir, record, durable=False)
        self._records.clear()

    def close(self) -> None:
        self.commit()
        sync_disks()

    def __enter__(self) -> ReplayBatch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _write_files(
    replayed: ReplayedRun,
    out: Path,
    *,
    setting: str | None,
    summarizer: str | None,
    real_summaries: bool,
    durable: bool,
) -> tuple[Path, dict]:
    """Every file of the replay's run directory but run.json (removed first); returns the run
    directory and the run.json record to write last."""
    source = replayed.source.record
    policy = replayed.policy
    identity_of_source = source["identity"]
    setting = setting if policy.needs_threshold else None
    summaries = summaries_kind(policy, real_summaries)
    summarizer = identity_summarizer(policy, summarizer if real_summaries else None)
    cell = replay_cell(identity_of_source, str(policy), setting, summarizer)
    run_dir = run_dir_for(out, identity_of_source, cell)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / RUN_JSON).unlink(missing_ok=True)  # the record that counts is written last
    inherited = replayed.source.store
    pieces = replayed.content_pieces  # every id a piece names is in the source's store or written before it
    added = [
        pieced_line(line, pieces[line["id"]]) if line["id"] in pieces else line
        for line in replayed.messages
        if line["id"] not in inherited
    ]
    write_compressed(run_dir / MESSAGES_JSONL, _jsonl(added), durable)
    encoder = PromptEncoder()
    lines = "".join(encoder.line(c) for c in replayed.calls)
    write_compressed(run_dir / CALLS_JSONL, lines.encode("utf-8"), durable)
    identity = RunIdentity(
        benchmark=identity_of_source["benchmark"],
        cohort=identity_of_source.get("cohort") or "main",
        task_id=str(identity_of_source["task_id"]),
        stratum=identity_of_source.get("stratum") or "",
        model=identity_of_source["model"],
        policy=str(policy),
        primitive=policy.primitive,
        trigger=policy.trigger,
        threshold_setting=setting,
        threshold_tokens=replayed.threshold if policy.needs_threshold else None,
        depth=policy.depth,
        summarizer=summarizer,
        attempt=int(identity_of_source["attempt"]),
        seed=int(identity_of_source.get("seed") or 0),
        cell=cell,
        track=TRACK,
    )
    source_dir = str(replayed.source.run_dir)
    write_record(
        run_dir / TRAJECTORY_JSON,
        durable=durable,
        data={
            "trajectory_format": TRAJECTORY_FORMAT,
            "source_trajectory": f"{source_dir}/{TRAJECTORY_JSON}",
            "info": {"ctxpolicy": {"identity": asdict(identity)}},
        },
    )
    wall = replayed.end - replayed.start
    versions = source.get("versions") or {}
    record = {
        "schema_version": SCHEMA_VERSION,
        "complete": True,
        "identity": asdict(identity),
        "outcome": source["outcome"],
        "error": source.get("error"),
        "submission": source.get("submission") or "",
        "timing": {
            "start": replayed.start,
            "end": replayed.end,
            "wall_s": wall,
            "setup_s": 0.0,
            "agent_s": wall,
            "llm_s": replayed.summary_latency_s,
            "tool_s": 0.0,
        },
        "totals": totals_of(
            [c.to_json() for c in replayed.calls],
            replayed.source.steps,
            (source.get("totals") or {}).get("format_errors", 0),
        ),
        "settings": dict(source.get("settings") or {}),
        "versions": {
            **software_versions(),
            "model": versions.get("model"),
            "server": {"kind": TRACK, "version": None, "url": "none"},
            "summarizer": (
                {"name": summarizer or next(iter(replayed.summary_models), None)} if summaries == "real" else None
            ),
        },
        "hardware": _host(),
        "trajectory_file": TRAJECTORY_JSON,
        "traceback": None,
        MESSAGE_BASE: message_base_record(run_dir, replayed.source.run_dir, replayed.source.store_sha256),
        "replay": {
            "source_run": source_dir,
            "source_cell": identity_of_source.get("cell"),
            "source_track": identity_of_source.get("track"),
            "replay_summaries": summaries,
        },
    }
    return run_dir, record


def _jsonl(lines: list[dict]) -> bytes:
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
