"""Public-format agent trajectories of our own, shaped like the files the harnesses write.

The shapes follow mini-swe-agent 1.x (``trajectory_format: mini-swe-agent-1``, ```bash fences,
``extra.response`` with usage on each assistant message, ``timestamp`` on the message), 2.x
(``mini-swe-agent-1.1``, ``extra.{response, cost, timestamp, actions}``, a trailing ``exit``
message; text mode with ```mswea_bash_command fences or tool calls), SWE-agent ``.traj``
(``history`` with ``is_demo`` demonstrations and ``tool_call_ids``, ``trajectory`` steps with the
``query`` each sent, ``info.model_stats`` totals only) and OpenAI chat logs. The texts are
invented; no third-party transcript is copied. For the import tests and ``config/imported-example.yaml``.
"""

from __future__ import annotations

import json
from pathlib import Path

COMMANDS = (
    "ls -la src",
    "cat src/app.py",
    "grep -rn parse_config src",
    "sed -i 's/retries = 1/retries = 3/' src/app.py",
    "cat src/app.py",
    "python -m pytest -q tests/test_app.py",
)
OUTPUTS = (
    "app.py\nconfig.py\nutils.py",
    "def parse_config(path):\n    retries = 1\n    return load(path, retries)",
    "src/app.py:1:def parse_config(path):",
    "",
    "def parse_config(path):\n    retries = 3\n    return load(path, retries)",
    "3 passed in 0.12s",
)
SYSTEM = "You are a careful engineer working in a shell. Answer with one command per turn."
TASK = "Fix the bug: parse_config in src/app.py must retry three times, not once."


def _usage(step: int) -> dict:
    return {
        "prompt_tokens": 200 + 60 * step,
        "completion_tokens": 30 + step,
        "total_tokens": 230 + 61 * step,
        "prompt_tokens_details": {"cached_tokens": 180 + 50 * (step - 1) if step > 1 else 0},
    }


def _response(step: int, content: str | None, tool_calls: list | None = None) -> dict:
    return {
        "id": f"chatcmpl-{step}",
        "model": "example-model",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if tool_calls else "stop",
                "message": {"role": "assistant", "content": content, "tool_calls": tool_calls},
            }
        ],
        "usage": _usage(step),
    }


def mini_v1(fence: str = "bash", steps: int = len(COMMANDS)) -> dict:
    """A mini-swe-agent 1.x ``.traj.json`` (what SWE-bench bash-only submissions ship)."""
    messages = [
        {"role": "system", "content": SYSTEM, "timestamp": 1_700_000_000.0},
        {"role": "user", "content": TASK, "timestamp": 1_700_000_000.5},
    ]
    for step in range(1, steps + 1):
        content = f"THOUGHT: step {step}, I look at the code.\n\n```{fence}\n{COMMANDS[step - 1]}\n```"
        messages.append(
            {
                "role": "assistant",
                "content": content,
                "timestamp": 1_700_000_000.0 + 10 * step,
                "extra": {"response": _response(step, content)},
            }
        )
        messages.append(
            {
                "role": "user",
                "content": f"<returncode>0</returncode>\n<output>\n{OUTPUTS[step - 1]}\n</output>",
                "timestamp": 1_700_000_001.0 + 10 * step,
            }
        )
    return {
        "info": {
            "exit_status": "Submitted",
            "submission": "diff --git a/src/app.py b/src/app.py\n",
            "model_stats": {"instance_cost": 0.01 * steps, "api_calls": steps},
            "mini_version": "1.9.1",
            "config": {"model": {"model_name": "example/model-v1"}},
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1",
    }


def mini_v2(tool_calls: bool = False, steps: int = len(COMMANDS)) -> dict:
    """A mini-swe-agent 2.x ``.traj.json``: text mode or tool calling, ending in an ``exit`` message."""
    messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for step in range(1, steps + 1):
        command = COMMANDS[step - 1]
        if tool_calls:
            call = {
                "id": f"call_{step:03d}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
            content = f"Step {step}: I run a command."
            message = {"role": "assistant", "content": content, "tool_calls": [call]}
            response = _response(step, content, [call])
            actions = [{"command": command, "tool_call_id": call["id"]}]
        else:
            content = f"THOUGHT: step {step}.\n\n```mswea_bash_command\n{command}\n```"
            message = {"role": "assistant", "content": content}
            response = _response(step, content)
            actions = [{"command": command}]
        message["extra"] = {
            "actions": actions,
            "response": response,
            "cost": 0.002,
            "timestamp": 1_700_000_000.0 + 10 * step,
        }
        messages.append(message)
        output = f"<returncode>0</returncode>\n<output>\n{OUTPUTS[step - 1]}\n</output>"
        if tool_calls:
            messages.append({"role": "tool", "tool_call_id": f"call_{step:03d}", "content": output})
        else:
            messages.append({"role": "user", "content": output, "extra": {"returncode": 0}})
    messages.append(
        {
            "role": "exit",
            "content": "diff --git a/src/app.py b/src/app.py\n",
            "extra": {"exit_status": "Submitted", "submission": "diff --git a/src/app.py b/src/app.py\n"},
        }
    )
    return {
        "info": {
            "model_stats": {"instance_cost": 0.002 * steps, "api_calls": steps},
            "config": {"model": {"model_name": "example/model-v2"}},
            "mini_version": "2.4.6",
            "exit_status": "Submitted",
            "submission": "diff --git a/src/app.py b/src/app.py\n",
        },
        "messages": messages,
        "trajectory_format": "mini-swe-agent-1.1",
    }


def swe_agent(function_calling: bool = False, demos: int = 1, with_query: bool = True, steps: int = 4) -> dict:
    """A SWE-agent ``.traj``: demonstrations before the task, text (``` fences) or function calling."""
    history: list[dict] = [{"role": "system", "content": SYSTEM, "agent": "main", "message_type": "system_prompt"}]
    for k in range(demos):
        history.append(
            {
                "role": "user",
                "content": f"Here is demonstration {k + 1} of solving another task:\n"
                + "\n".join(f"> {c}" for c in COMMANDS),
                "agent": "main",
                "message_type": "demonstration",
                "is_demo": True,
            }
        )
    history.append({"role": "user", "content": TASK, "agent": "main", "message_type": "observation"})
    trajectory = []
    for step in range(1, steps + 1):
        command = COMMANDS[step - 1]
        thought = f"Step {step}: next I look closer at the code."
        if function_calling:
            item = {
                "role": "assistant",
                "content": thought,
                "thought": thought,
                "action": command,
                "agent": "main",
                "tool_calls": [
                    {
                        "function": {"arguments": json.dumps({"command": command}), "name": "bash"},
                        "id": f"call_{step}",
                        "type": "function",
                    }
                ],
                "message_type": "action",
            }
            observation = {
                "role": "tool",
                "content": OUTPUTS[step - 1] or "Your command ran successfully and did not produce any output.",
                "agent": "main",
                "tool_call_ids": [f"call_{step}"],
                "message_type": "observation",
            }
        else:
            item = {
                "role": "assistant",
                "content": f"{thought}\n```\n{command}\n```",
                "thought": thought,
                "action": command + "\n",
                "agent": "main",
                "message_type": "action",
            }
            observation = {
                "role": "user",
                "content": (OUTPUTS[step - 1] or "Your command ran successfully and did not produce any output.")
                + "\n(Open file: n/a)\n(Current directory: /repo)\nbash-$",
                "agent": "main",
                "message_type": "observation",
            }
        query = [dict(m) for m in history]
        history += [item, observation]
        trajectory.append(
            {
                "action": command + "\n",
                "observation": observation["content"],
                "response": item["content"],
                "state": {"open_file": "n/a", "working_dir": "/repo"},
                "thought": thought,
                "execution_time": 0.1,
                **({"query": query} if with_query else {}),
                "extra_info": {},
            }
        )
    return {
        "environment": "swe_main",
        "trajectory": trajectory,
        "history": history,
        "info": {
            "exit_status": "submitted",
            "submission": "diff --git a/src/app.py b/src/app.py\n",
            "model_stats": {"instance_cost": 0.5, "tokens_sent": 5000, "tokens_received": 200, "api_calls": steps},
        },
    }


def openai_log(conversations: int = 2, steps: int = 3, usage: bool = True) -> str:
    """An OpenAI chat log as JSON lines: one ``{"id", "model", "messages"}`` object per conversation."""
    lines = []
    for n in range(conversations):
        messages: list[dict] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        for step in range(1, steps + 1):
            call = {
                "id": f"c{n}_{step}",
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": COMMANDS[step - 1]})},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            if usage:
                message["usage"] = _usage(step)
            messages += [message, {"role": "tool", "tool_call_id": call["id"], "content": OUTPUTS[step - 1]}]
        lines.append(json.dumps({"id": f"conv-{n}", "model": "example-model", "messages": messages}))
    return "\n".join(lines) + "\n"


def no_action() -> dict:
    """A mini-swe-agent 1.x trajectory whose answers hold no command in any known format."""
    data = mini_v1(steps=2)
    for message in data["messages"]:
        if message["role"] == "assistant":
            message["content"] = "I would now look at the code, but I write no command."
    return data


def write_corpus(folder: Path) -> dict[str, Path]:
    """One file of each shape under ``folder`` (a small corpus: the tests' and the example config's)."""
    folder = Path(folder)
    files = {
        "mini1": ("mini1/task-mini1.traj.json", mini_v1()),
        "mini2": ("mini2/task-mini2.traj.json", mini_v2()),
        "mini2tools": ("mini2/task-mini2tools.traj.json", mini_v2(tool_calls=True)),
        "swe": ("swe/task-swe.traj", swe_agent()),
        "swefc": ("swe/task-swefc.traj", swe_agent(function_calling=True)),
    }
    written = {}
    for key, (name, data) in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1), encoding="utf-8")
        written[key] = path
    chat = folder / "chat" / "log.jsonl"
    chat.parent.mkdir(parents=True, exist_ok=True)
    chat.write_text(openai_log(), encoding="utf-8")
    written["openai"] = chat
    return written
