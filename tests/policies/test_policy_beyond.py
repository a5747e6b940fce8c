"""CC, CT, DUMP and DIGEST: the policies beyond the study."""

import json

import pytest
from policy_histories import text_history, tool_history, tool_pairs_are_well_formed

from ctxpolicy.policies import (
    COMPACTED_MARKER,
    SUMMARY_MARKER,
    DeterministicSummarizer,
    HistoryDump,
    PolicyError,
    apply_policy,
)
from ctxpolicy.policies.compaction import command_signature


def test_command_signature_drops_inlined_file_bodies():
    command = "cat <<'EOF' > calc.py\ndef add(a, b):\n    return a + b\nEOF\npython calc.py"
    signature = command_signature(command)
    assert "return a + b" not in signature
    assert signature.startswith("cat <<EOF > calc.py [body dropped]") and "+1 lines" in signature


def _cc_history(tool_mode):
    long_output, short_output = "x" * 800, "ok"
    history = tool_history([(5, [1])] * 7) if tool_mode else text_history([(5, 1)] * 7)
    history = [dict(m) for m in history]
    observation_role = "tool" if tool_mode else "user"
    observations = [i for i, m in enumerate(history) if i >= 2 and m["role"] == observation_role]
    for n, index in enumerate(observations):
        history[index]["content"] = long_output if n % 2 == 0 else short_output
    first_assistant = history[2]
    first_assistant["content"] = (
        ("T" * 400) + "\n```mswea_bash_command\ncat file0.py\n```" if not tool_mode else "T" * 400
    )
    return history


@pytest.mark.parametrize("tool_mode", [False, True], ids=["text", "tool"])
def test_cc_compacts_older_turns_and_keeps_the_recent_turns_whole(tool_mode):
    history = _cc_history(tool_mode)
    result = apply_policy("CC/Th", history, threshold=0)
    block = result.messages[2]
    assert block["role"] == "user" and block["content"].startswith(COMPACTED_MARKER)
    recent = result.messages[3:]
    assert sum(1 for m in recent if m["role"] == "assistant") == 4
    assert recent == history[len(history) - len(recent) :]
    lines = block["content"].splitlines()
    assert "  result: (800 characters deleted)" in lines and "  result: ok" in lines
    assert any(line.startswith("assistant: " + "T" * 299 + "…") for line in lines)
    assert any("cat file0" in line for line in lines if line.startswith("  ran: "))
    assert tool_pairs_are_well_formed(result.messages)
    (event,) = result.events
    assert event["primitive"] == "CC" and event["target_tokens"] is None and event["messages_removed"] == 6


def test_cc_discards_the_previous_block_instead_of_compacting_it_again():
    history = _cc_history(False)
    first = apply_policy("CC/Th", history, threshold=0).messages
    grown = first + text_history([(5, 1)] * 3)[2:]
    second = apply_policy("CC/Th", grown, threshold=0).messages
    blocks = [m for m in second if m["content"].startswith(COMPACTED_MARKER)]
    assert len(blocks) == 1 and COMPACTED_MARKER not in blocks[0]["content"][len(COMPACTED_MARKER) :]
    assert "cat file0" not in blocks[0]["content"]  # the first block's content is gone
    assert "cat file3" in blocks[0]["content"]


def test_ct_removes_reasoning_except_the_last_ten_assistant_turns():
    history = text_history([(30, 20)] * 12)
    history[2] = {**history[2], "reasoning_content": "long private reasoning"}
    summarizer = DeterministicSummarizer()
    result = apply_policy("CT+SU/Th/0.5", history, threshold=0, summarizer=summarizer)
    ct, su = result.events
    assert ct["primitive"] == "CT" and ct["messages_cleared"] == 2
    prompt = summarizer.requests[0][-1]["content"]  # the user message carries the transcript
    thoughts = [m["content"].split("```")[0].strip() for m in history if m["role"] == "assistant"]
    assert thoughts[0] not in prompt and thoughts[1] not in prompt and thoughts[2] in prompt
    assert "cat file0.py" in prompt  # the action stays


def test_ct_in_tool_mode_keeps_tool_calls():
    history = tool_history([(30, [20])] * 11)
    result = apply_policy("CT+DIGEST/Th/0.5", history, threshold=0)
    assert result.events[0]["messages_cleared"] == 1


def test_dump_writes_the_full_history_and_the_summary_names_it(tmp_path):
    history = text_history([(10, 50)] * 4)
    result = apply_policy(
        "DUMP+SU/Th/0.5",
        history,
        threshold=0,
        summarizer=DeterministicSummarizer(),
        dump=HistoryDump(tmp_path / "ws", visible_dir="/workspace"),
    )
    written = tmp_path / "ws" / ".ctxpolicy-history-0004.json"
    assert json.loads(written.read_text())["messages"] == history
    assert result.messages[2]["content"].endswith("saved as JSON at /workspace/.ctxpolicy-history-0004.json")
    assert [e["primitive"] for e in result.events] == ["SU"]
    assert not list((tmp_path / "ws").glob("*.tmp"))


def test_dump_without_a_directory_is_an_error():
    with pytest.raises(PolicyError, match="dump directory"):
        apply_policy("DUMP+SU/Th/0.5", text_history([(1, 1)]), threshold=0, summarizer=DeterministicSummarizer())


def test_digest_extracts_commands_errors_tests_and_paths_without_a_model_call():
    history = text_history([(5, 60)] * 3)
    history[3] = {
        **history[3],
        "content": "<returncode>1</returncode>\n<output>\nTraceback (most recent call last)\n"
        '  File "src/calc.py", line 3\nAssertionError: 1 != 2\n</output>',
    }
    history[5] = {**history[5], "content": "<returncode>0</returncode>\n<output>\n3 passed in 0.01s\n</output>"}
    result = apply_policy("DIGEST/Th/0.5", history, threshold=0)
    assert result.summary_calls == []
    text = result.messages[2]["content"]
    assert text.startswith(SUMMARY_MARKER)
    for fact in ("$ cat file0.py", "returncode 1", "AssertionError: 1 != 2", "tests: 3 passed", "src/calc.py"):
        assert fact in text


def test_digest_keeps_the_most_recent_facts_within_the_allowance():
    history = text_history([(1, 1)] * 60)
    result = apply_policy("DIGEST/Th/0.7", history, threshold=0)
    text = result.messages[2]["content"]
    assert "$ cat file59.py" in text and "$ cat file0.py" not in text
