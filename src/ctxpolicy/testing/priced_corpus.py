"""A synthetic corpus in mini-swe-agent 1.x shape with every call's provider usage and price.

Each trajectory (``trajectory_format: mini-swe-agent-1``) is a system prompt, a task and N steps
of an assistant reply (a ```bash fence) and a tool output of varied length; every assistant
message carries ``extra.response.usage`` (prompt, completion and cached tokens, like a provider
behind litellm reports them), its ``timestamp`` and its price: ``extra.cost`` or, for OpenRouter's
shape, ``extra.response.usage.cost``. The prompt tokens are the local (cl100k_base) count of the
messages sent times a tokenizer ratio plus a per-message overhead, so the server counts differ
from the local ones as a real provider's do; the cached tokens follow a provider profile (some
calls get nothing from the cache, some part of the previous prompt, most all of it, in 128-token
increments from 1,024 tokens); the price comes from litellm's own price map for ``model``
(``ctxpolicy.metrics.prices``), never from a table of ours. The texts are invented.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ctxpolicy.tokens import count_message

SYSTEM = "You are a careful engineer in a shell. Reply with a THOUGHT and one bash command in a fence."
TASK = "Issue {n}: the parser in src/module_{n}.py drops the last field of every record. Fix it."
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()
TOKENIZER_RATIO = 1.07  # server tokens per local token
MESSAGE_OVERHEAD = 4  # server tokens the chat template adds per message
# the provider's profile: P(nothing cached), P(part of the previous prompt), else all of it
MISS, PARTIAL = 0.1, 0.35


def server_prompt(messages: list[dict]) -> int:
    return _server_tokens(sum(_local_tokens(m) for m in messages), len(messages))


def _local_tokens(message: dict) -> int:
    return count_message({"role": message["role"], "content": message["content"]})


def _server_tokens(local: int, messages: int) -> int:
    return int(local * TOKENIZER_RATIO) + MESSAGE_OVERHEAD * messages


def _output(rng: np.random.Generator, step: int, verbosity: float = 1.0) -> str:
    lines = int(rng.choice([1, 3, 12, 40, 90], p=[0.2, 0.3, 0.25, 0.15, 0.1]))
    lines = lines if verbosity == 1.0 else max(1, round(lines * verbosity))
    return "\n".join(f"{step}:{i}: " + " ".join(rng.choice(WORDS, size=int(rng.integers(4, 12)))) for i in range(lines))


def _cached(rng: np.random.Generator, previous: int) -> int:
    """The provider's cached tokens for a call whose previous prompt was ``previous`` tokens."""
    draw = rng.random()
    if previous < 1024 or draw < MISS:
        return 0
    share = rng.uniform(0.5, 0.9) if draw < MISS + PARTIAL else 1.0
    return max(0, 1024 + (int(previous * share) - 1024) // 128 * 128) if previous * share >= 1024 else 0


def trajectory(
    n: int, *, steps: int, model: str, seed: int = 0, openrouter: bool = False, verbosity: float = 1.0
) -> dict:
    """One run's ``.traj.json``; ``openrouter`` puts the price in ``extra.response.usage.cost``;
    ``verbosity`` scales the tool outputs' line counts (1: the default mix, about 250 tokens an
    output on average)."""
    from ctxpolicy.metrics.prices import price_card

    card = price_card(model)
    rng = np.random.default_rng([seed, n])
    clock = 1_760_000_000.0 + 10_000 * n
    messages = [
        {"role": "system", "content": SYSTEM, "timestamp": clock},
        {"role": "user", "content": TASK.format(n=n), "timestamp": clock + 0.5},
    ]
    previous, total = 0, 0.0
    local = sum(_local_tokens(m) for m in messages)  # the messages' local count, kept as they grow
    for step in range(1, steps + 1):
        command = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" if step == steps else f"grep -n field src/module_{n}.py"
        content = f"THOUGHT: step {step}: I look at what the parser does next.\n\n```bash\n{command}\n```"
        prompt = _server_tokens(local, len(messages))
        cached = _cached(rng, previous)
        completion = 20 + int(rng.integers(0, 60))
        cost = card.dollars(prompt - cached, cached, 0, completion)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        extra: dict = {"response": {"id": f"gen-{n}-{step}", "model": model, "usage": usage}}
        if openrouter:
            usage["cost"] = cost
        else:
            extra["cost"] = cost
        clock += float(rng.uniform(3, 40))
        messages.append({"role": "assistant", "content": content, "timestamp": clock, "extra": extra})
        local += _local_tokens(messages[-1])
        if step < steps:
            output = _output(rng, step, verbosity)
            messages.append(
                {
                    "role": "user",
                    "content": f"<returncode>0</returncode>\n<output>\n{output}\n</output>",
                    "timestamp": clock + 1,
                }
            )
            local += _local_tokens(messages[-1])
        previous, total = prompt, total + cost
    return {
        "info": {
            "exit_status": "Submitted",
            "submission": f"diff --git a/src/module_{n}.py b/src/module_{n}.py\n",
            "model_stats": {"instance_cost": total, "api_calls": steps},
            "mini_version": "1.14.0",
            "config": {"model": {"model_name": model}},
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
    }


def write_priced_corpus(
    folder: Path, *, runs: int = 4, steps: int = 30, model: str = "gpt-4o", seed: int = 0, openrouter_every: int = 0
) -> list[Path]:
    """``runs`` trajectories as ``folder/task-{n}.traj.json``; every ``openrouter_every``-th in
    OpenRouter's shape (0: none)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(runs):
        openrouter = bool(openrouter_every) and n % openrouter_every == openrouter_every - 1
        path = folder / f"task-{n:03d}.traj.json"
        data = trajectory(n, steps=steps, model=model, seed=seed, openrouter=openrouter)
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")
        paths.append(path)
    return paths
