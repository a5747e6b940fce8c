"""Builders and hypothesis strategies for agent histories in both mini-swe-agent formats."""

from __future__ import annotations

import json

from hypothesis import strategies as st

SYSTEM = {"role": "system", "content": "You are a helpful assistant that can interact with a computer."}
TASK = {"role": "user", "content": "Please solve this issue: the function add() in calc.py returns a - b."}


def words(n: int, seed: int = 0) -> str:
    return " ".join(f"w{(seed * 7919 + i) % 997}" for i in range(n))


def observation_text(n_words: int, seed: int, returncode: int = 0) -> str:
    return f"<returncode>{returncode}</returncode>\n<output>\n{words(n_words, seed)}\n</output>"


def text_step(i: int, thought_words: int, output_words: int) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": f"THOUGHT: {words(thought_words, i)}\n\n```mswea_bash_command\ncat file{i}.py\n```",
            "extra": {"actions": [{"command": f"cat file{i}.py"}], "step": i},
        },
        {"role": "user", "content": observation_text(output_words, i + 1000), "extra": {"returncode": 0, "step": i}},
    ]


def tool_step(i: int, thought_words: int, output_words: list[int]) -> list[dict]:
    ids = [f"call_{i}_{k}" for k in range(len(output_words))]
    assistant = {
        "role": "assistant",
        "content": words(thought_words, i) if thought_words else None,
        "tool_calls": [
            {
                "id": cid,
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": f"cat file{i}_{k}.py"})},
            }
            for k, cid in enumerate(ids)
        ],
        "extra": {"actions": [{"command": f"cat file{i}_{k}.py", "tool_call_id": cid} for k, cid in enumerate(ids)]},
    }
    results = [
        {
            "role": "tool",
            "tool_call_id": cid,
            "content": observation_text(n, i * 10 + k),
            "extra": {"returncode": 0, "step": i},
        }
        for k, (cid, n) in enumerate(zip(ids, output_words))
    ]
    return [assistant, *results]


def text_history(steps: list[tuple[int, int]]) -> list[dict]:
    history = [dict(SYSTEM), dict(TASK)]
    for i, (thought, output) in enumerate(steps):
        history += text_step(i, thought, output)
    return history


def tool_history(steps: list[tuple[int, list[int]]]) -> list[dict]:
    history = [dict(SYSTEM), dict(TASK)]
    for i, (thought, outputs) in enumerate(steps):
        history += tool_step(i, thought, outputs)
    return history


text_steps = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 300)), min_size=0, max_size=25)
tool_steps = st.lists(
    st.tuples(st.integers(0, 60), st.lists(st.integers(0, 300), min_size=1, max_size=3)), min_size=0, max_size=20
)


histories = st.one_of(text_steps.map(text_history), tool_steps.map(tool_history))


def tool_pairs_are_well_formed(messages: list[dict]) -> bool:
    """Every tool result follows its call, and every call made before the last message is answered."""
    open_ids: set[str] = set()
    for message in messages:
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_ids:
                return False
            open_ids.discard(message["tool_call_id"])
        else:
            if open_ids:
                return False
            open_ids = {c["id"] for c in message.get("tool_calls") or ()}
    return True
