"""The run records of a data set read a second time, in plain Python, for the independent counts.

Only ``ctxpolicy.rundir``'s record readers are used (no ``ctxpolicy.metrics``, no
``ctxpolicy.figures``): one ``Run`` per complete run directory, with the values the study's
definitions need (study A.5, A.5.1, A.5.2), each computed here from ``run.json``,
``verdict.json`` and ``calls.jsonl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.rundir import (
    CALLS_JSONL,
    find_run_dirs,
    is_complete_run,
    read_calls,
    read_message_store,
    read_run_json,
    read_verdict,
)

from independent import shell

CACHE_DISCOUNT = 0.1  # A.5.2: cached input at one tenth of a fresh token
BLOCK = 16  # A.5.2: 16-token cache blocks
LARGE_DROP = (1000, 0.25)  # A.5.2: a reduction of at least max(1000, 0.25 P) tokens


@dataclass(frozen=True)
class Run:
    path: str
    benchmark: str
    model: str
    cohort: str
    track: str
    cell: str
    policy: str
    primitive: str | None
    depth: float | None
    setting: str | None
    threshold: int | None
    summarizer: str | None
    task: str
    attempt: int
    outcome: str | None
    graded: bool  # a verdict.json exists
    resolved: bool  # the verdict says resolved (a missing verdict is unresolved)
    harness_timeout: bool  # the benchmark harness stopped the run for time (its report says so)
    wall_s: float | None
    agent_s: float | None  # A.5's latency: the agent's start to the end (timing.agent_s, else wall - setup)
    tokens: int  # prompt + output tokens of every call, agent and summary (A.5.1)
    prompt_counts: int  # agent calls with a server-reported prompt count
    agent_calls: int
    summary_calls: int
    agent_call_s: float  # seconds inside the agent's calls (their latency_s summed)
    summary_call_s: float  # ... inside the summary calls
    firing_steps: int  # agent steps at which the policy compressed (a stacked policy's stages once)
    events: int  # compression events (each stage)
    billed_estimated: float  # A.5.2, reconstructed cache
    billed_measured: float | None  # A.5.2 with the server's cached counts (None: a call lacks one)
    billed_exact: float | None  # docs/metrics.md 3.2, the prefix simulation (None: a call lacks its prompt ids)
    retrieval_cmds: int  # the agent's commands that read state back (docs/metrics.md, A.5 reacquisition view)
    execution_cmds: int  # ... and all its other commands
    peak_prompt: int | None
    prompts: tuple[int, ...]  # agent calls' prompt sizes, in order
    cached_estimated: tuple[int, ...]  # each agent call's cached input by A.5.2's reconstruction
    cached_exact: tuple[int, ...] | None  # ... by the prefix simulation (None: a call lacks its prompt ids)
    cached_measured: tuple[int, ...] | None  # ... as the server reported it (None: a call lacks it)
    summary_input: int  # the summary calls' prompt tokens, always billed fresh (A.5.2)

    @property
    def time_limited(self) -> bool:
        """A.5: the run reached the time limit (the agent's, or the benchmark harness's timeout)."""
        return self.outcome == "time_limit" or self.harness_timeout


def _floor(tokens: int) -> int:
    return tokens // BLOCK * BLOCK


def _unchanged(events: list[dict]) -> tuple[int, int] | None:
    """(tokens before the first changed message, tokens of the history) of an OTRC step."""
    if any(e.get("unchanged_prefix_tokens") is None for e in events):
        return None
    return min(e["unchanged_prefix_tokens"] for e in events), events[0]["total_tokens_before"]


def cached_estimate(prompts: list[int], steps: list[list[dict]], sent: list[int | None] | None = None) -> list[int]:
    """A.5.2's reconstruction of each agent call's cached input, call by call: the first call has
    nothing cached; a large reduction keeps only the stable prefix (the first prompt), unless an
    OTRC event says where the history changed; an OTRC step keeps its own prompt up to the cleared message (the unchanged tokens' share of the
    history it sent, ``sent[k]`` local tokens), never more than the previous prompt; growth keeps
    the previous prompt; a smaller unexplained reduction keeps the stable prefix. Whole 16-token
    blocks only."""
    sent = sent or [None] * len(prompts)
    cached = []
    for k, p in enumerate(prompts):
        if k == 0:
            cached.append(0)
            continue
        prev, stable = prompts[k - 1], min(prompts[0], p)
        otrc = any(e.get("primitive") == "OTRC" for e in steps[k])
        placed = otrc and _unchanged(steps[k]) is not None and _unchanged(steps[k])[1] > 0
        if p <= prev - max(LARGE_DROP[0], LARGE_DROP[1] * prev) and not placed:
            value = stable
        elif otrc:
            where = _unchanged(steps[k])
            if where is None or where[1] <= 0:
                value = stable
            else:
                u, t = where
                if sent[k]:  # the share of this call's own prompt before the cleared message
                    value = min(p, prev, min(u, sent[k]) * p // sent[k])
                else:
                    value = min(p, min(u, t) * prev // t)
        elif p >= prev:
            value = prev
        else:
            value = stable
        cached.append(_floor(value))
    return cached


def _billed(prompts: list[int], cached: list[int], summary_input: int) -> float:
    cached = [min(c, p) for c, p in zip(cached, prompts)]
    return sum(prompts) - sum(cached) + CACHE_DISCOUNT * sum(cached) + summary_input


def exact_cached(sequences: list[list[str]], sizes: dict[str, int], prompts: list[int]) -> list[int]:
    """docs/metrics.md 3.2: each agent call's longest whole-message prefix that begins an
    earlier agent call's prompt, in local tokens (L_shared of the call's L_k), rescaled to its
    server prompt P_k as floor(P_k * L_shared / L_k), at most P_k, whole 16-token blocks.

    Counted with a trie of the earlier prompts (the pipeline hashes prefixes instead)."""
    trie: dict = {}
    cached = []
    for ids, prompt in zip(sequences, prompts):
        node, shared, total, matching = trie, 0, 0, True
        for mid in ids:  # one walk: down the earlier prompts' trie while it matches, then adding to it
            total += sizes[mid]
            if matching and mid in node:
                shared += sizes[mid]
                node = node[mid]
            else:
                matching = False
                node = node.setdefault(mid, {})
        cached.append(_floor(min(shared * prompt // max(total, 1), prompt)))
    return cached


def read_run(run_dir: Path) -> Run:
    run = read_run_json(run_dir)
    identity = run["identity"]
    verdict = read_verdict(run_dir)
    report = (verdict or {}).get("report")
    mode = report.get("failure_mode") if isinstance(report, dict) else None
    calls = read_calls(run_dir) if (run_dir / CALLS_JSONL).exists() else []  # each with its whole prompt
    agent = [c for c in calls if c["kind"] == "agent"]
    prompts = [c["prompt_tokens"] or 0 for c in agent]
    summary_input = sum(c["prompt_tokens"] or 0 for c in calls if c["kind"] != "agent")
    measured = [c.get("cached_tokens") for c in agent]
    store = read_message_store(run_dir)
    sequences = [c.get("message_ids") for c in agent]
    sizes = {mid: int(line["tokens"]) for mid, line in store.items()}
    fmt = (run.get("settings") or {}).get("action_format") or shell.DEFAULT_FORMAT
    commands = [c for line in store.values() for c in shell.commands(line["message"], fmt)]
    retrieval = sum(map(shell.is_read, commands))
    estimated = cached_estimate(
        prompts, [c.get("events") or [] for c in agent], [c.get("est_tokens_after") for c in agent]
    )
    exact = None if any(ids is None for ids in sequences) else exact_cached(sequences, sizes, prompts)
    counted = [c["prompt_tokens"] for c in agent if c["prompt_tokens"] is not None]
    return Run(
        path=str(run_dir),
        benchmark=identity["benchmark"],
        model=identity["model"],
        cohort=identity["cohort"],
        track=identity["track"],
        cell=identity["cell"],
        policy=identity["policy"],
        primitive=identity.get("primitive"),
        depth=identity.get("depth"),
        setting=identity.get("threshold_setting"),
        threshold=identity.get("threshold_tokens"),
        summarizer=identity.get("summarizer"),
        task=str(identity["task_id"]),
        attempt=int(identity["attempt"]),
        outcome=run.get("outcome"),
        graded=verdict is not None,
        resolved=bool(verdict and verdict.get("resolved") is True),
        # the harness stopped the agent for time (terminal-bench's agent_timeout; Harbor's report
        # flag); the verifier's test_timeout stopped only the tests
        harness_timeout=mode == "agent_timeout" or (isinstance(report, dict) and report.get("time_limited") is True),
        wall_s=(run.get("timing") or {}).get("wall_s"),
        agent_s=_agent_seconds(run.get("timing") or {}),
        tokens=sum((c["prompt_tokens"] or 0) + (c["completion_tokens"] or 0) for c in calls),
        prompt_counts=len(counted),
        agent_calls=len(agent),
        summary_calls=len(calls) - len(agent),
        agent_call_s=sum(c.get("latency_s") or 0.0 for c in agent),
        summary_call_s=sum(c.get("latency_s") or 0.0 for c in calls if c["kind"] != "agent"),
        firing_steps=len({c["step"] for c in calls if c.get("events")}),
        events=sum(len(c.get("events") or []) for c in calls),
        billed_estimated=_billed(prompts, estimated, summary_input),
        billed_measured=None
        if not agent or any(m is None for m in measured)
        else _billed(prompts, [int(m) for m in measured], summary_input),
        billed_exact=None if exact is None else _billed(prompts, exact, summary_input),
        retrieval_cmds=retrieval,
        execution_cmds=len(commands) - retrieval,
        peak_prompt=max(counted) if counted else None,
        prompts=tuple(prompts),
        cached_estimated=tuple(estimated),
        cached_exact=None if exact is None else tuple(exact),
        cached_measured=None if not agent or any(m is None for m in measured) else tuple(int(m) for m in measured),
        summary_input=summary_input,
    )


def read_runs(runs_root: Path) -> list[Run]:
    """Every complete run under ``runs_root`` (``rundir`` finds them; never workspace/ or stale/)."""
    return [read_run(d) for d in find_run_dirs([runs_root]) if is_complete_run(d)]


def _agent_seconds(timing: dict) -> float | None:
    """The run's own time: ``agent_s`` when recorded; else the whole run less its setup."""
    if timing.get("agent_s") is not None:
        return float(timing["agent_s"])
    if timing.get("wall_s") is None:
        return None
    return float(timing["wall_s"]) - float(timing.get("setup_s") or 0.0)
