"""Which source runs one replay job of many takes (``ctxpolicy replay --shard K/N``).

A corpus's replays are cut by source run, not by policy: a job then reads each of its sources
once and replays it under every configuration, with the token counts of its messages cached
across them. A run's replays cost about what its agent calls do, and a submission's runs range
from a handful of calls to over a hundred, so the shards are balanced by calls (longest first,
each to the shard with the fewest calls so far), not by the number of runs. Every job of a
corpus computes the same cut from the same runs, so the shards never overlap and miss none.
"""

from __future__ import annotations

import re
from pathlib import Path

from ctxpolicy.errors import UsageError
from ctxpolicy.rundir import RUN_JSON, read_json

_SHARD = re.compile(r"(\d+)/(\d+)")


class ShardError(UsageError, ValueError):
    """A --shard value or a number of shards that cannot be: exit code 2."""


def parse_shard(text: str) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N) as (K, N); ``ShardError`` naming the value otherwise."""
    match = _SHARD.fullmatch(text.strip())
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise ShardError(f"--shard is {text!r}; it must be K/N with 1 <= K <= N (e.g. 3/8)")
    return int(match.group(1)), int(match.group(2))


def balanced_shards(weights: list[int], shards: int) -> list[list[int]]:
    """The positions of ``weights`` cut into ``shards`` lists of near-equal summed weight: the
    heaviest first, each to the lightest shard so far (the lowest-numbered on a tie); each list
    in ascending order. Deterministic: the same weights always give the same cut."""
    if shards < 1:
        raise ShardError(f"shards is {shards}: not a positive number")
    loads = [0] * shards
    members: list[list[int]] = [[] for _ in range(shards)]
    for position in sorted(range(len(weights)), key=lambda i: (-weights[i], i)):
        lightest = min(range(shards), key=lambda s: (loads[s], s))
        loads[lightest] += weights[position]
        members[lightest].append(position)
    return [sorted(m) for m in members]


def agent_calls(run_dir: Path) -> int:
    """The agent calls a complete run's ``run.json`` counts (``totals.agent_calls``; 1 when it
    counts none, so that every run weighs something)."""
    totals = read_json(Path(run_dir) / RUN_JSON).get("totals") or {}
    calls = totals.get("agent_calls")
    return calls if isinstance(calls, int) and calls > 0 else 1


def shard_of(run_dirs: list[Path], shard: int, shards: int) -> list[Path]:
    """The runs of shard ``shard`` (1-based) of ``shards``, balanced by agent calls, in the
    order given."""
    cut = balanced_shards([agent_calls(d) for d in run_dirs], shards)
    return [run_dirs[i] for i in cut[shard - 1]]
