"""Per-step cost of every rule-based policy on a long history (target: under 2 ms median).

A synthetic agent history of 400 messages and about 100,000 cl100k tokens is advanced step by
step: each step appends a new assistant message and observation (new strings, so their tokens
are counted for real) and drops the oldest pair, then applies the policy once, as the agent
harness does before a call. Timed: ``apply_policy`` including all token counting. Each policy is
measured with its threshold below the history (so it fires every step) and, for threshold
policies, above it (the common idle case).

    .venv/bin/python benchmarks/bench_policies.py [--messages 400] [--tokens 100000] [--steps 200]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from ctxpolicy.policies import apply_policy, parse_spec
from ctxpolicy.tokens import count_messages

STUDY_RULE_BASED = ["TR/Th/0.5", "TR/Th/0.3", "TR/Th/0.7", "TRC/Th", "OTRC/St", "OTRC+TR/St+Th/0.5"]
# Beyond the study: these rebuild a block from the whole older history whenever they fire, so a
# firing step also counts the tokens of that new block; in a run they fire rarely.
BEYOND_RULE_BASED = ["CC/Th", "DIGEST/Th/0.5", "CT+DIGEST/Th/0.5"]
TARGET_MS = 2.0


def _observation(step: int, words: int) -> str:
    body = " ".join(f"line{step}_{k} value={k * 31 % 977}" for k in range(words // 2))
    return f"<returncode>0</returncode>\n<output>\n{body}\n</output>"


def step_pair(step: int, words: int) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": f"THOUGHT: step {step}, inspect the next file.\n\n"
            f"```mswea_bash_command\nsed -n 1,80p src/module_{step}.py\n```",
            "extra": {"step": step},
        },
        {"role": "user", "content": _observation(step, words), "extra": {"step": step}},
    ]


def build_history(messages: int, tokens: int) -> tuple[list[dict], int]:
    prefix = [
        {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
        {"role": "user", "content": "Please solve this issue: fix the failing test in tests/test_calc.py."},
    ]
    pairs = (messages - len(prefix)) // 2

    def history(words: int) -> list[dict]:
        return prefix + [m for s in range(pairs) for m in step_pair(s, words)]

    words = 100
    words = max(2, math.ceil(words * tokens / count_messages(history(words))))  # tokens grow about linearly
    while count_messages(history(words)) < tokens:
        words += 2
    return history(words), words


def measure(spec: str, history: list[dict], words: int, steps: int, fire: bool) -> list[float]:
    parsed = parse_spec(spec)
    running = list(history)
    base_step = len(history)
    timings = []
    for step in range(steps):
        running = running[:2] + running[4:] + step_pair(base_step + step, words)
        threshold = 0 if fire else 10**9
        start = time.perf_counter()
        apply_policy(parsed, running, threshold=threshold if parsed.needs_threshold else None, calls=len(running))
        timings.append((time.perf_counter() - start) * 1000)
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    history, words = build_history(args.messages, args.tokens)
    print(f"history: {len(history)} messages, {count_messages(history)} tokens; {args.steps} steps per row")
    print(f"{'policy':<22} {'case':<6} {'median ms':>10} {'p95 ms':>8}  target < {TARGET_MS} ms (study rule-based)")
    worst = 0.0
    for spec in STUDY_RULE_BASED + BEYOND_RULE_BASED:
        cases = [True, False] if parse_spec(spec).needs_threshold else [True]
        for fire in cases:
            timings = measure(spec, history, words, args.steps, fire)
            median = statistics.median(timings)
            p95 = statistics.quantiles(timings, n=20)[-1]
            if spec in STUDY_RULE_BASED:
                worst = max(worst, median)
                verdict = "ok" if median < TARGET_MS else "SLOW"
            else:
                verdict = "(beyond the study: rebuilds its block)"
            print(f"{spec:<22} {'fires' if fire else 'idle':<6} {median:>10.3f} {p95:>8.3f}  {verdict}")
    print(
        f"worst median of the study's rule-based policies: {worst:.3f} ms "
        f"({'meets' if worst < TARGET_MS else 'misses'} the {TARGET_MS} ms target)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
