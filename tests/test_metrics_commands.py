"""Retrieval versus execution classification of agent commands."""

from __future__ import annotations

import json

import pytest

from ctxpolicy.metrics.commands import commands_of, count_commands, is_retrieval, reply_times


@pytest.mark.parametrize(
    "command",
    [
        "cat src/app.py",
        "head -n 20 setup.py",
        "tail -f log.txt",
        "grep -rn 'def main' src",
        "find . -name '*.py'",
        "ls -la",
        "sed -n '10,40p' src/app.py",
        "git show HEAD",
        "git diff",
        "git log --oneline -5",
        "cd src && ls",
        "cat a.py | grep foo",
        "wc -l *.py",
    ],
)
def test_reads_are_retrieval(command):
    assert is_retrieval(command)


@pytest.mark.parametrize(
    "command",
    [
        "python -m pytest -q",
        "sed -i 's/a/b/' x.py",
        "pip install numpy",
        "cat > x.py <<'EOF'\nx\nEOF",
        "echo hi > notes.txt",
        "git commit -am fix",
        "cd src && python run.py",
        "find . -name '*.pyc' -delete",
        "grep foo a.py | tee out.txt",
        "make",
        "cd src",
    ],
)
def test_changes_and_runs_are_execution(command):
    assert not is_retrieval(command)


def test_commands_come_from_text_blocks_and_tool_calls():
    text = {"role": "assistant", "content": "THOUGHT: look\n\n```mswea_bash_command\ncat a.py\n```"}
    tool = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"function": {"name": "bash", "arguments": json.dumps({"command": "pytest -q"})}}],
    }
    assert commands_of(text) == ["cat a.py"]
    assert commands_of(tool) == ["pytest -q"]
    user = {"role": "user", "content": "```mswea_bash_command\nls\n```"}
    assert count_commands([text, tool, user]) == (1, 1)  # user messages are not commands


def test_reply_times_take_the_larger_of_the_prompt_count_and_the_named_replies():
    prompt = ["sys", "a", "b", "a", "c", "a", "b"]
    named = [None, "b", "b", "b", "d", None, "e", "e"]
    # a: 3 in the prompt; b: 2 there, 3 named; c: once; d: named once; e: named twice, not in the prompt
    assert reply_times(prompt, named) == {"a": 3, "b": 3, "e": 2}
    assert reply_times([], [None, None]) == {}
