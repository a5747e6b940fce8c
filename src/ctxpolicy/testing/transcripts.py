"""Synthetic full-context (FC) run directories: agent transcripts to replay at scale.

Each run is a system prompt and a task, then ``steps`` rounds of an assistant message (a thought
and one shell command) and an observation (the command's output, of varied length: listings,
file contents, test logs, tracebacks). Calls are logged as the harness logs an FC run: every
prompt is the previous one plus the round's two messages (schema version 2, through
``ctxpolicy.rundir.PromptEncoder``). Everything is drawn from one seeded generator per run, so a
run's files depend only on ``seed``, its ``task_id`` and the shape asked for.

``shape="real"`` draws observations the way real trajectories have them (public SWE-bench
trajectories: most outputs tens to hundreds of tokens, a heavy tail of file dumps and logs of
thousands, and now and then one of over 50K tokens, ``HUGE_EVERY``); the default, ``"plain"``,
keeps them under 2,500 words.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from ctxpolicy.agent.messages import api_message, message_id
from ctxpolicy.rundir import (
    CALLS_JSONL,
    CALLS_SCHEMA_VERSION,
    MESSAGES_JSONL,
    TRAJECTORY_JSON,
    CallRecord,
    PromptEncoder,
    write_record,
    write_run_json,
)
from ctxpolicy.tokens import count_message

BENCHMARK, MODEL = "synthetic", "synthetic-model"
SHAPES = ("plain", "real")
HUGE_EVERY = 400  # shape "real": about one observation in this many is a dump of 40K-45K words (over 50K tokens)
WORDS = (
    "def",
    "return",
    "self",
    "value",
    "config",
    "path",
    "error",
    "test",
    "assert",
    "import",
    "result",
    "request",
    "handler",
    "cache",
    "token",
    "parse",
    "build",
    "index",
    "merge",
    "update",
    "render",
)
FILES = ("app", "models", "views", "utils", "parser", "cache", "client", "server", "schema", "cli")
COMMANDS = (
    "cat src/{f}.py",
    "grep -rn {w} src",
    "python -m pytest -q tests/test_{f}.py",
    "ls -la src",
    "sed -n 1,120p src/{f}.py",
    "git diff",
    "python run_{f}.py",
)


def _text(rng: np.random.Generator, words: int) -> str:
    picks = rng.integers(0, len(WORDS), size=words)
    lines, line = [], []
    for i, k in enumerate(picks):
        line.append(WORDS[k] if i % 7 else f"{WORDS[k]}_{int(rng.integers(0, 1000))}")
        if len(line) >= 10:
            lines.append(" ".join(line))
            line = []
    return "\n".join(lines + [" ".join(line)] if line else lines)


def _observation_words(rng: np.random.Generator, shape: str) -> int:
    if shape == "plain":
        return min(int(rng.lognormal(np.log(180), 0.8)), 2500)
    if rng.random() < 1 / HUGE_EVERY:
        return int(rng.integers(40_000, 45_000))
    return min(int(rng.lognormal(np.log(120), 1.3)), 20_000)


def transcript(seed: int, task_id: str, steps: int, shape: str = "plain") -> list[dict]:
    """The run's complete history: system, task, then ``steps`` (assistant, observation) rounds."""
    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r}: expected one of {', '.join(SHAPES)}")
    rng = np.random.default_rng([seed, zlib.crc32(task_id.encode())])
    messages = [
        {"role": "system", "content": "You are a careful software engineer. " + _text(rng, 300)},
        {"role": "user", "content": f"Task {task_id}: fix the failing test.\n" + _text(rng, 150)},
    ]
    for step in range(1, steps + 1):
        f = FILES[int(rng.integers(0, len(FILES)))]
        command = COMMANDS[int(rng.integers(0, len(COMMANDS)))].format(f=f, w=WORDS[int(rng.integers(0, len(WORDS)))])
        thought = _text(rng, int(rng.integers(15, 60)))
        messages.append(
            {
                "role": "assistant",
                "content": f"THOUGHT: step {step}. {thought}\n\n```mswea_bash_command\n{command}\n```",
            }
        )
        size = _observation_words(rng, shape)
        messages.append(
            {
                "role": "user",
                "content": f"<returncode>{int(rng.integers(0, 2))}</returncode>\n<output>\n"
                f"{_text(rng, size)}\n</output>",
            }
        )
    return messages


def write_fc_run(run_dir: Path, *, seed: int, task_id: str, steps: int = 40, shape: str = "plain") -> Path:
    """One complete FC run directory of ``steps`` agent calls (the last answer submits)."""
    return write_fc_history(run_dir, transcript(seed, task_id, steps, shape), seed=seed, task_id=task_id)


def write_fc_history(run_dir: Path, history: list[dict], *, seed: int, task_id: str) -> Path:
    """One complete FC run directory of a given history: system, task, then (assistant,
    observation) rounds; one agent call per round, each prompt the previous one plus a round."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    steps = (len(history) - 2) // 2
    ids = [message_id(api_message(m)) for m in history]
    tokens = [count_message(m) for m in history]
    store = "".join(  # one line per distinct message, as every writer's store
        json.dumps({"id": mid, "tokens": t, "message": m}, ensure_ascii=False) + "\n"
        for mid, t, m in dict((mid, (mid, t, m)) for mid, t, m in zip(ids, tokens, history)).values()
    )
    calls, start = [], 1_764_430_000.0
    for step in range(1, steps + 1):
        sent = 2 * step  # system, task, and the rounds before this call
        prompt = sum(tokens[:sent])
        calls.append(
            CallRecord(
                index=step - 1,
                kind="agent",
                step=step,
                start=start + step,
                end=start + step + 1.0,
                latency_s=1.0,
                status="ok",
                error=None,
                prompt_tokens=prompt,
                completion_tokens=tokens[sent],
                cached_tokens=None,
                est_tokens_before=prompt,
                est_tokens_after=prompt,
                message_ids=ids[:sent],
                events=[],
                attempts=1,
                finish_reason="stop",
                model=MODEL,
            )
        )
    (run_dir / MESSAGES_JSONL).write_text(store, encoding="utf-8")
    encoder = PromptEncoder()
    (run_dir / CALLS_JSONL).write_text("".join(encoder.line(c) for c in calls), encoding="utf-8")
    write_record(
        run_dir / TRAJECTORY_JSON,
        {"trajectory_format": "mini-swe-agent-1.1", "messages": history + [{"role": "exit", "content": "done"}]},
    )
    write_run_json(run_dir, _record(task_id, seed, [c.to_json() for c in calls]))
    return run_dir


def write_fc_cell(cell_dir: Path, *, runs: int, steps: int = 40, seed: int = 0) -> list[Path]:
    """``runs`` FC runs (tasks ``task-0000``, ...) under ``cell_dir``."""
    return [
        write_fc_run(Path(cell_dir) / f"task-{k:04d}__a1", seed=seed, task_id=f"task-{k:04d}", steps=steps)
        for k in range(runs)
    ]


def _record(task_id: str, seed: int, calls: list[dict]) -> dict:
    prompts = [c["prompt_tokens"] for c in calls]
    return {
        "schema_version": CALLS_SCHEMA_VERSION,
        "complete": True,
        "identity": {
            "benchmark": BENCHMARK,
            "cohort": "main",
            "task_id": task_id,
            "stratum": "synthetic",
            "model": MODEL,
            "policy": "FC",
            "primitive": "FC",
            "trigger": None,
            "threshold_setting": None,
            "threshold_tokens": None,
            "depth": None,
            "summarizer": None,
            "attempt": 1,
            "seed": seed,
            "cell": "FC",
            "track": "full",
        },
        "outcome": "submitted",
        "error": None,
        "submission": "",
        "timing": {
            "start": calls[0]["start"] if calls else 0.0,
            "end": calls[-1]["end"] if calls else 0.0,
            "wall_s": float(len(calls)),
            "setup_s": 0.0,
            "agent_s": float(len(calls)),
            "llm_s": float(len(calls)),
            "tool_s": 0.0,
        },
        "totals": {
            "steps": len(calls),
            "agent_calls": len(calls),
            "summary_calls": 0,
            "prompt_tokens": sum(prompts),
            "completion_tokens": sum(c["completion_tokens"] for c in calls),
            "cached_tokens": None,
            "compression_events": 0,
            "format_errors": 0,
            "peak_prompt_tokens": max(prompts, default=0),
            "failed_calls": 0,
        },
        "settings": {
            "temperature": 0.0,
            "max_tokens": 1024,
            "step_limit": len(calls) + 1,
            "wall_time_limit_s": None,
            "command_timeout_s": 60,
            "format_error_limit": 3,
            "cache_block_tokens": 16,
            "mode": "text",
        },
        "versions": {
            "ctxpolicy": None,
            "git_commit": None,
            "git_dirty": None,
            "mini_swe_agent": None,
            "litellm": None,
            "python": "synthetic",
            "model": {"name": MODEL, "file": None, "sha256": None, "hub_id": None, "revision": None},
            "server": {"kind": None, "version": None, "url": "synthetic"},
        },
        "trajectory_file": TRAJECTORY_JSON,
    }
