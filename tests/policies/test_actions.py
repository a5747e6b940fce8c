"""The action formats' one owner: fences, detection, the default of older records."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxpolicy.metrics.commands import count_commands
from ctxpolicy.policies import actions


def test_fences_are_matched_in_order_and_by_label():
    text = "Look:\n```python\nx = 1\n```\nthen\n```bash\ncat a.py\n```\nand ```mswea_bash_command\nls\n```"
    assert actions.fenced_commands(text, "bash") == ["cat a.py"]
    assert actions.fenced_commands(
        text.replace("```mswea_bash_command", "```mswea_bash_command\n"), "mswea_bash_command"
    ) == ["ls"]
    assert actions.fenced_commands("```\nls -la\n```", "bash") == ["ls -la"]  # SWE-agent's unlabelled fence
    assert actions.without_actions(text, "bash").count("```") == 4  # the python block and the mswea one stay


def test_detection_and_the_default():
    assistant = lambda content, **kw: {"role": "assistant", "content": content, **kw}  # noqa: E731
    assert actions.detect([assistant("```bash\nls\n```")]) == "bash"
    assert (
        actions.detect([assistant("```bash\nls\n```"), assistant("```mswea_bash_command\nls\n```")])
        == "mswea_bash_command"
    )
    assert actions.detect([assistant("x", tool_calls=[{"id": "1"}])]) == "tool_calls"
    assert actions.detect([assistant("no command"), {"role": "user", "content": "```bash\nls\n```"}]) is None
    assert actions.of_record({"settings": {}}) == actions.DEFAULT == "mswea_bash_command"
    with pytest.raises(actions.ActionFormatError, match="'zsh' is no action format"):
        actions.of_record({"settings": {"action_format": "zsh"}})


def test_the_command_counts_follow_the_format():
    messages = [
        {"role": "assistant", "content": "```bash\ncat a.py\n```"},
        {"role": "assistant", "content": "```bash\nmake\n```"},
    ]
    assert count_commands(messages) == (0, 0)  # an older run's default format: not these fences
    assert count_commands(messages, "bash") == (1, 1)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="`\n\x00ab h", max_size=40))
def test_the_fence_pattern_finds_the_blocks_the_plain_lazy_pattern_finds(text):
    """``FENCED_BLOCK`` matches a body a run of characters at a time; it must find exactly what the
    plain pattern (body: the shortest text up to the first three backticks) finds."""
    plain = re.compile(r"```([^\n`\x00]*)\n([^\x00]*?)```")
    assert [m.span() + m.groups() for m in actions.FENCED_BLOCK.finditer(text)] == [
        m.span() + m.groups() for m in plain.finditer(text)
    ]
