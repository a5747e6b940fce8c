"""TR: drop the oldest whole messages of the window until it is at or under target.

The last window message always stays, so an oversized last message may leave the window over
target. Necessary deviation in tool-calling mode: an assistant message with ``tool_calls`` and
the ``tool`` results answering it are dropped together (see :func:`history.units`), because the
chat API rejects a request in which either half of a tool-call pair dangles.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxpolicy.policies.history import Message, token_list, units
from ctxpolicy.policies.rewrite import Rewrite


def truncate(window: Sequence[Message], target: int) -> Rewrite | None:
    tokens = token_list(window)
    total = sum(tokens)
    spans = units(window)
    keep_from = 0
    for start, end in spans[:-1]:
        if total <= target:
            break
        total -= sum(tokens[start:end])
        keep_from = end
    if keep_from == 0:
        return None
    return Rewrite(list(window[keep_from:]), removed=keep_from)
