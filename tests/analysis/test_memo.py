"""The audit's text memo: bounded by the characters it holds."""

from ctxpolicy.analysis.memo import text_memo


def test_a_text_memo_answers_from_memory_and_is_cleared_when_full():
    calls = []

    @text_memo(max_chars=10)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    assert [length("abcd"), length("abcd"), length("efgh")] == [4, 4, 4] and calls == ["abcd", "efgh"]
    length("ijkl")  # 12 characters: the memo is emptied first
    assert length("abcd") == 4 and calls == ["abcd", "efgh", "ijkl", "abcd"]
    length.cache_clear()
    length("ijkl")
    assert calls[-1] == "ijkl"
