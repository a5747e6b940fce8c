"""Primitives that replace message content in place: TRC, OTRC and CT."""

from __future__ import annotations

from collections.abc import Sequence

from ctxpolicy.policies import actions
from ctxpolicy.policies.history import (
    PLACEHOLDER,
    Message,
    is_generated_block,
    is_observation,
    is_placeholder,
    placeholder_for,
    text_of,
    token_list,
    uses_tool_calls,
    with_content,
)
from ctxpolicy.policies.rewrite import Rewrite, StageContext
from ctxpolicy.policies.truncation import truncate
from ctxpolicy.tokens import count_text

TRC_KEEP_RECENT_RESULTS = 3
OTRC_MIN_CALLS = 5
OTRC_MIN_MESSAGES = 10
OTRC_POSITION_FROM_END = 9
CT_KEEP_RECENT_TURNS = 10


def clear_tool_results(window: Sequence[Message], target: int, *, fall_back_to_tr: bool) -> Rewrite | None:
    """TRC: clear older tool results, oldest first, until the window is at or under target.

    The three most recent tool results are never cleared; existing placeholders and summaries
    are skipped, and a result no longer than the placeholder is left as it is. When clearing
    cannot reach the target and ``fall_back_to_tr`` is set, TR finishes the job.
    """
    tool_mode = uses_tool_calls(window)
    tokens = token_list(window)
    total = sum(tokens)
    results = [i for i, m in enumerate(window) if is_observation(m, tool_mode)]
    placeholder_tokens = count_text(PLACEHOLDER)
    new_window = list(window)
    cleared = 0
    for index in results[:-TRC_KEEP_RECENT_RESULTS] if len(results) > TRC_KEEP_RECENT_RESULTS else ():
        if total <= target:
            break
        if is_placeholder(window[index]) or tokens[index] <= placeholder_tokens:
            continue
        new_window[index] = with_content(window[index], PLACEHOLDER)
        total -= tokens[index] - placeholder_tokens
        cleared += 1
    if total > target and fall_back_to_tr:
        fallback = truncate(new_window, target)
        if fallback is not None:
            return Rewrite(fallback.window, removed=fallback.removed, cleared=cleared, fallback="TR")
    return Rewrite(new_window, cleared=cleared) if cleared else None


def clear_ninth_from_end(window: Sequence[Message], context: StageContext) -> Rewrite | None:
    """OTRC: once five calls and ten messages exist, replace the ninth message from the end.

    The rule is positional: it does not choose by role or marker (so after a stacked rewrite, or
    when the history ends with an assistant message, it may clear a summary or an assistant
    message, under ``MESSAGE_PLACEHOLDER``, not the tool-result one), but it never touches the
    protected prefix and never clears a placeholder again. Only the content is replaced, so a
    tool-call pair stays well formed.
    """
    if context.calls < OTRC_MIN_CALLS or context.history_length < OTRC_MIN_MESSAGES:
        return None
    if len(window) < OTRC_POSITION_FROM_END:
        return None
    index = len(window) - OTRC_POSITION_FROM_END
    if is_placeholder(window[index]):
        return None
    new_window = list(window)
    new_window[index] = with_content(window[index], placeholder_for(window[index], uses_tool_calls(window)))
    return Rewrite(new_window, cleared=1)


def clear_all_but_last_results(window: Sequence[Message], keep: int) -> Rewrite | None:
    """OTRC with ``kM`` (observation masking): every tool result but the last ``keep`` becomes
    the placeholder. Placeholders, summaries and results no longer than the placeholder are
    left as they are; only the content is replaced, so a tool-call pair stays well formed."""
    tool_mode = uses_tool_calls(window)
    results = [i for i, m in enumerate(window) if is_observation(m, tool_mode) and not is_generated_block(m)]
    placeholder_tokens = count_text(PLACEHOLDER)
    new_window, cleared = list(window), 0
    for index in results[: max(len(results) - keep, 0)]:
        message = window[index]
        if is_placeholder(message) or count_text(text_of(message)) <= placeholder_tokens:
            continue
        new_window[index] = with_content(message, placeholder_for(message, tool_mode))
        cleared += 1
    return Rewrite(new_window, cleared=cleared) if cleared else None


def _without_thinking(message: Message, action_format: str | None) -> dict | None:
    found = actions.fenced_actions(text_of(message), action_format)
    content = "\n\n".join(actions.fence(command, label) for label, command, _ in found)  # the run's own fence
    stripped = {k: v for k, v in message.items() if k not in ("reasoning_content", "thinking_blocks")}
    if isinstance(message.get("content"), str) or message.get("content") is None:
        if (message.get("content") or "") != content:
            stripped["content"] = content
    return stripped if stripped != dict(message) else None


def clear_thinking(window: Sequence[Message], action_format: str | None = None) -> Rewrite | None:
    """CT: remove reasoning text from assistant turns except the last ten.

    What stays of an older assistant turn is its action: the command block in text mode (in the
    run's action format, written with the fence it was written with), the ``tool_calls`` in
    tool-calling mode. ``reasoning_content`` and ``thinking_blocks`` go too.
    """
    assistants = [i for i, m in enumerate(window) if m.get("role") == "assistant" and not is_generated_block(m)]
    new_window = list(window)
    cleared = 0
    for index in assistants[:-CT_KEEP_RECENT_TURNS] if len(assistants) > CT_KEEP_RECENT_TURNS else ():
        replacement = _without_thinking(window[index], action_format)
        if replacement is not None:
            new_window[index] = replacement
            cleared += 1
    return Rewrite(new_window, cleared=cleared) if cleared else None
