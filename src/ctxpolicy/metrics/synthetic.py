"""Synthetic run directories that follow the run-record contract (docs/architecture.md).

They feed tests, the figure fixture and the metrics benchmark, so the policies have
effects every comparison can see: compression keeps prompts under the threshold (with
clearing, truncation and summary events, the latter with their own summary calls), it adds
reacquisition steps and retrieval commands, long full-context runs run into the time limit
more often, and each policy shifts the success probability a little.

Everything is drawn from one seeded generator per run, so a run's files depend only on
``seed`` and the run's identity, not on the order or number of processes.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ctxpolicy.atomic import atomic_write_text

DEFAULT_POLICIES = ("FC", "TR/Th/0.5", "TRC/Th", "SU/Th/0.5", "OTRC+TR/St+Th/0.5")
SETTING_SCALE = {"tight": 0.6, "primary": 0.8, "loose": 1.0}
CLEARED = "[output cleared to save context]"
HEAD = 2  # system prompt and task: no policy touches them

RETRIEVAL = ["cat src/{f}.py", "head -n 40 src/{f}.py", "grep -rn {f} src", "ls -la src",
             "sed -n 1,80p src/{f}.py", "git diff", "find . -name '{f}*'", "tail -n 20 log.txt"]
EXECUTION = ["python -m pytest -q tests/test_{f}.py", "python run_{f}.py",
             "sed -i 's/old/new/' src/{f}.py", "pip install {f}",
             "cat > src/{f}.py <<'EOF'\nprint(1)\nEOF", "make {f}"]
SUCCESS_SHIFT = {"FC": 0.0, "TR": -0.06, "TRC": -0.02, "OTRC": -0.03, "SU": -0.08, "S-p": -0.05}


@dataclass(frozen=True)
class Spec:
    policy: str
    primitive: str | None
    trigger: str | None
    depth: float | None


def parse_policy(policy: str) -> Spec:
    """Minimal P/T/D reader for the synthetic generator ("FC", "TRC/Th", "TR/Th/0.5")."""
    parts = policy.split("/")
    if parts == ["FC"]:
        return Spec("FC", None, None, None)
    depth = float(parts[2]) if len(parts) > 2 else None
    return Spec(policy, parts[0], parts[1] if len(parts) > 1 else None, depth)


def cell_slug(policy: str, setting: str | None) -> str:
    base = policy.replace("/", "_")
    return base if setting is None else f"{base}__{setting}"


def canonical(message: dict) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def message_id(canonical_json: str) -> str:
    return hashlib.sha256(canonical_json.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RunSpec:
    run_dir: Path
    benchmark: str
    model: str
    policy: str
    setting: str | None
    threshold: int | None
    task_id: str
    task_index: int
    attempt: int
    calls_per_run: int
    seed: int


def make_runs(root: Path, *, models: Sequence[str] = ("qwen05b",),
              benchmarks: Sequence[str] = ("local",),
              policies: Sequence[str] = DEFAULT_POLICIES,
              settings: Sequence[str | None] = ("primary",),
              tasks: int | Sequence[str] = 20, attempts: int = 3, calls_per_run: int = 20,
              seed: int = 0, processes: int = 1, progress: bool = False) -> list[Path]:
    """Write synthetic run directories under ``root`` and return them.

    Layout: ``root/{benchmark}/{model}/{cell_slug}/{task_id}__a{attempt}/``. FC gets one
    cell per (benchmark, model); every other policy one cell per threshold setting (a setting
    of None makes a cell without a threshold, for step-triggered policies). ``tasks`` is a
    count or a list of task ids; ``processes`` > 1 writes in parallel with identical output.
    """
    root = Path(root)
    task_ids = [f"task-{i:04d}" for i in range(tasks)] if isinstance(tasks, int) else list(tasks)
    specs = list(_run_specs(root, models, benchmarks, policies, settings, task_ids, attempts,
                            calls_per_run, seed))
    for cell_dir in {s.run_dir.parent for s in specs}:
        cell_dir.mkdir(parents=True, exist_ok=True)
    if processes > 1:
        with ProcessPoolExecutor(processes) as pool:
            done = pool.map(write_run, specs, chunksize=64)
            _drain(done, len(specs), progress)
    else:
        _drain(map(write_run, specs), len(specs), progress)
    return [s.run_dir for s in specs]


def _drain(results: Iterable, total: int, progress: bool) -> None:
    from tqdm import tqdm

    for _ in tqdm(results, total=total, disable=not progress, desc="synthetic runs", unit="run"):
        pass


def _run_specs(root, models, benchmarks, policies, settings, task_ids, attempts,
               calls_per_run, seed):
    for benchmark in benchmarks:
        for model in models:
            fc_peak = 260 * calls_per_run + 900  # typical full-context peak in this generator
            for policy in policies:
                is_fc = parse_policy(policy).primitive is None
                for setting in [None] if is_fc else settings:
                    threshold = (None if is_fc or setting is None
                                 else int(round(fc_peak * SETTING_SCALE.get(setting, 0.8) * 0.5, -2)))
                    cell_dir = root / benchmark / model / cell_slug(policy, setting)
                    for t, task_id in enumerate(task_ids):
                        for attempt in range(1, attempts + 1):
                            yield RunSpec(cell_dir / f"{task_id}__a{attempt}", benchmark, model,
                                          policy, setting, threshold, task_id, t, attempt,
                                          calls_per_run, seed)


def _rng(spec: RunSpec) -> np.random.Generator:
    key = f"{spec.seed}|{spec.benchmark}|{spec.model}|{spec.policy}|{spec.setting}|{spec.task_id}|{spec.attempt}"
    return np.random.default_rng(zlib.crc32(key.encode()) + (spec.seed << 32))


def _task_params(spec: RunSpec) -> tuple[float, float]:
    """Per-task difficulty and length, shared by every policy (that is what makes pairing work)."""
    r = np.random.default_rng([spec.seed, zlib.crc32(f"{spec.benchmark}|{spec.task_id}".encode())])
    return float(r.beta(2.0, 1.6)), float(r.lognormal(0.0, 0.25))


class _Store:
    """Content-addressed message store of one run, written as messages.jsonl."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.tokens: dict[str, int] = {}

    def add(self, role: str, content: str, tokens: int) -> str:
        text = canonical({"content": content, "role": role})
        mid = message_id(text)
        if mid not in self.tokens:
            self.tokens[mid] = tokens
            self.lines.append(f'{{"id":"{mid}","tokens":{tokens},"message":{text}}}\n')
        return mid


def write_run(spec: RunSpec) -> Path:
    rng = _rng(spec)
    pol = parse_policy(spec.policy)
    p_task, length = _task_params(spec)
    store = _Store()
    prefix = f"{spec.task_id} a{spec.attempt} {spec.policy} {spec.setting}"
    history = [store.add("system", "You are a careful software agent. Reply with one bash block.", 380),
               store.add("user", f"Task {spec.task_id}: fix the failing behaviour described here.",
                         int(300 + 400 * length))]

    compresses = pol.primitive is not None
    base_steps = spec.calls_per_run * length * (1.12 if compresses else 1.0)
    step_limit = int(spec.calls_per_run * 1.6) + 2
    planned = int(np.clip(rng.poisson(base_steps), 2, step_limit))
    p_retrieval = 0.38 + (0.12 if compresses else 0.0)
    t = 1_764_430_000.0 + 1000.0 * spec.task_index + 100_000.0 * spec.attempt
    start, calls, n_events_total, peak, fmt_errors = t, [], 0, 0, 0
    summary_calls = 0
    wall_limit = _wall_limit(spec.calls_per_run)
    time_limited = False

    size = _history_tokens(history, store)
    sums = {"prompt": 0, "completion": 0, "cached": 0}
    for step in range(1, planned + 1):
        events: list[dict] = []
        est_before = size
        if compresses and _should_fire(pol, spec.threshold, size, step):
            history, events, summary = _compress(pol, spec.threshold, history, store, rng, prefix, step)
            size = _history_tokens(history, store)
            if summary is not None:
                summary_ids, summary_prompt = summary
                lat = 0.4 + summary_prompt * 0.00012
                completion = int(rng.integers(120, 400))
                calls.append(_call_line(len(calls), "summary", step, t, lat, summary_prompt, completion,
                                        None, est_before, est_before, summary_ids, []))
                sums["prompt"] += summary_prompt
                sums["completion"] += completion
                t += lat
                summary_calls += 1
        prompt = int(size * 1.03) + 4 * len(history) + 3
        cached = 0 if not calls else _server_cached(size - sum(store.tokens[m] for m in history[-2:]), rng)
        peak = max(peak, prompt)
        completion = int(rng.integers(40, 220))
        lat = 0.3 + 0.00012 * (prompt - cached) + 0.0003 * cached + completion * 0.01
        calls.append(_call_line(len(calls), "agent", step, t, lat, prompt, completion, cached,
                                est_before, size, history, events))
        sums["prompt"] += prompt
        sums["completion"] += completion
        sums["cached"] += cached
        n_events_total += len(events)
        t += lat + float(rng.exponential(0.8))  # command execution
        if t - start > wall_limit:
            time_limited = True
            break
        command = _command(rng, p_retrieval, step)
        observation_tokens = int(rng.lognormal(5.0, 0.7))
        history = history + [store.add("assistant", f"THOUGHT: step {step} of {prefix}.\n\n"
                                       f"```mswea_bash_command\n{command}\n```", completion),
                             store.add("user", f"<output step={step} run={prefix}/>", observation_tokens)]
        size += completion + observation_tokens
        if rng.random() < 0.01:
            fmt_errors += 1

    outcome = "time_limit" if time_limited else "step_limit" if planned >= step_limit else "submitted"
    if outcome == "submitted" and rng.random() < 0.02:
        outcome = "error"
    p_success = np.clip(p_task + SUCCESS_SHIFT.get((pol.primitive or "FC").split("+")[0], -0.04), 0, 1)
    resolved = outcome == "submitted" and rng.random() < p_success

    run_dir = spec.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "messages.jsonl").write_text("".join(store.lines))
    (run_dir / "calls.jsonl").write_text("".join(calls))
    agent_calls = len(calls) - summary_calls
    totals = {"steps": agent_calls, "agent_calls": agent_calls, "summary_calls": summary_calls,
              "prompt_tokens": sums["prompt"], "completion_tokens": sums["completion"],
              "cached_tokens": sums["cached"], "compression_events": n_events_total,
              "format_errors": fmt_errors, "peak_prompt_tokens": peak}
    record = _run_record(spec, pol, outcome, start, t, totals)
    if rng.random() > 0.01:  # a few runs stay ungraded, as in real studies
        atomic_write_text(run_dir / "verdict.json", json.dumps(
            {"resolved": bool(resolved), "harness": "synthetic", "report": {}, "log": ""}), durable=False)
    atomic_write_text(run_dir / "run.json", json.dumps(record), durable=False)
    return run_dir


def _wall_limit(calls_per_run: int) -> float:
    """About 1.5 times the expected wall time of a full-context run of average length."""
    n = calls_per_run
    return round(1.5 * (2.45 * n + 0.0003 * (1000 * n + 160 * n * n)), 1)


def _history_tokens(history: list[str], store: _Store) -> int:
    return sum(store.tokens[m] for m in history)


def _should_fire(pol: Spec, threshold: int | None, tokens: int, step: int) -> bool:
    over = threshold is not None and tokens > threshold
    if pol.trigger and pol.trigger.startswith("St"):
        return step % 8 == 0 and (over or "+" not in pol.trigger)
    return over


def _compress(pol: Spec, threshold: int | None, history: list[str], store: _Store,
              rng: np.random.Generator, prefix: str, step: int):
    events, summary = [], None
    for primitive in pol.primitive.split("+"):
        original, before = history, _history_tokens(history, store)
        depth = pol.depth if pol.depth is not None else 1.0
        window = history[HEAD:-2] if len(history) > HEAD + 2 else []
        if not window:
            continue
        cut = max(1, int(len(window) * depth))
        removed = cleared = summary_tokens = 0
        if primitive in ("TRC", "OTRC"):
            targets = [i for i, m in enumerate(history[:-2]) if i >= HEAD and i % 2 == 1
                       and store.tokens[m] > 20]
            if not targets:
                continue
            first = targets[0]
            stub = store.add("user", CLEARED, 12)
            chosen = set(targets)
            history = [stub if i in chosen else m for i, m in enumerate(history)]
            cleared = len(targets)
        elif primitive in ("SU", "S-p"):
            first = HEAD
            summary_text = f"Summary of steps before {step} in {prefix}."
            summary_tokens = int(rng.integers(150, 400))
            request = [store.add("system", "Summarize the agent's progress.", 40)] + window[:cut]
            summary = (request, _history_tokens(request, store) + 4 * len(request))
            history = history[:HEAD] + [store.add("user", summary_text, summary_tokens)] + history[HEAD + cut:]
            removed = cut
        else:  # truncation and anything unknown
            first = HEAD
            history = history[:HEAD] + history[HEAD + cut:]
            removed = cut
        after = _history_tokens(history, store)
        events.append({"primitive": primitive, "trigger": pol.trigger, "depth": pol.depth,
                       "window_tokens_before": before - _history_tokens(history[:HEAD], store),
                       "window_tokens_after": after - _history_tokens(history[:HEAD], store),
                       "total_tokens_before": before, "total_tokens_after": after,
                       "target_tokens": int(threshold * (1 - depth)) if threshold else None,
                       "messages_removed": removed, "messages_cleared": cleared,
                       "summary_tokens": summary_tokens, "first_changed_index": first,
                       "unchanged_prefix_tokens": _history_tokens(original[:first], store), "fallback": None})
    return history, events, summary


def _server_cached(previous_tokens: int, rng: np.random.Generator) -> int:
    """Server-side prefix hit: about the whole previous context, occasionally evicted."""
    if rng.random() < 0.03:
        return 0
    return int(rng.integers(0, 4)) * 16 + (previous_tokens // 16) * 16


def _command(rng: np.random.Generator, p_retrieval: float, step: int) -> str:
    pool = RETRIEVAL if rng.random() < p_retrieval else EXECUTION
    return pool[int(rng.integers(len(pool)))].format(f=f"mod{step % 7}")


def _call_line(index, kind, step, start, latency, prompt, completion, cached, est_before,
               est_after, message_ids, events) -> str:
    ids = '","'.join(message_ids)
    return (f'{{"index":{index},"kind":"{kind}","step":{step},"start":{start:.3f},'
            f'"end":{start + latency:.3f},"latency_s":{latency:.3f},"status":"ok","error":null,'
            f'"prompt_tokens":{prompt},"completion_tokens":{completion},'
            f'"cached_tokens":{"null" if cached is None else cached},'
            f'"est_tokens_before":{est_before},"est_tokens_after":{est_after},'
            f'"message_ids":["{ids}"],"events":{json.dumps(events, separators=(",", ":"))}}}\n')


def _run_record(spec: RunSpec, pol: Spec, outcome: str, start: float, end: float, totals: dict) -> dict:
    return {
        "schema_version": 1, "complete": True,
        "identity": {"benchmark": spec.benchmark, "cohort": "main", "task_id": spec.task_id,
                     "stratum": f"stratum-{spec.task_index % 3}", "model": spec.model,
                     "policy": spec.policy, "primitive": pol.primitive, "trigger": pol.trigger,
                     "threshold_setting": spec.setting, "threshold_tokens": spec.threshold,
                     "depth": pol.depth, "summarizer": None, "attempt": spec.attempt,
                     "seed": spec.seed, "cell": spec.run_dir.parent.name, "track": "full"},
        "outcome": outcome, "error": "synthetic failure" if outcome == "error" else None,
        "submission": "diff --git a/x b/x\n" if outcome == "submitted" else None,
        "timing": {"start": start, "end": end, "wall_s": round(end - start, 3)},
        "totals": totals,
        "settings": {"temperature": 0.2, "max_tokens": 512,
                     "step_limit": int(spec.calls_per_run * 1.6) + 2,
                     "wall_time_limit_s": _wall_limit(spec.calls_per_run), "command_timeout_s": 30,
                     "format_error_limit": 3, "cache_block_tokens": 16},
        "versions": {"ctxpolicy": "synthetic", "git_commit": None, "git_dirty": False},
        "trajectory_file": "trajectory.json",
    }
