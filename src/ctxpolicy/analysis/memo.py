"""A memo for pure functions of one text, bounded by the characters it holds, not by entries.

The audit meets the same messages again and again (a run's steps, and the replays of one
source, share them), so its text functions are memoised; but a message can be a few hundred
thousand characters (a long tool output, a placeholder summary of tens of thousands of words),
and an audit of the study's size meets millions of them: a memo bounded by entries could hold
gigabytes. This one is cleared whole when the texts it keys reach ``max_chars``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_MAX_CHARS = 32_000_000


def text_memo(max_chars: int = DEFAULT_MAX_CHARS) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """Decorator: memoise ``f(text)`` while the memoised texts hold at most ``max_chars``
    characters (``f.cache_clear()`` empties it). The value is shared: return immutable values."""

    def decorate(f: Callable[[str], T]) -> Callable[[str], T]:
        memo: dict[str, T] = {}
        held = 0

        @functools.wraps(f)
        def memoised(text: str) -> T:
            nonlocal held
            try:
                return memo[text]
            except KeyError:
                pass
            value = f(text)
            if held + len(text) > max_chars:
                memo.clear()
                held = 0
            memo[text] = value
            held += len(text)
            return value

        def cache_clear() -> None:
            nonlocal held
            memo.clear()
            held = 0

        memoised.cache_clear = cache_clear  # type: ignore[attr-defined]
        return memoised

    return decorate
