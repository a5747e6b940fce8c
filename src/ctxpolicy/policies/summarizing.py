"""SU, S, SU-p and S-p: replace the window, or its older head, with one user-role summary."""

from __future__ import annotations

from collections.abc import Sequence

from ctxpolicy.policies.history import SUMMARY_MARKER, Message, token_list, units
from ctxpolicy.policies.prompts import MIN_ALLOWANCE_TOKENS, PromptError, summary_block, summary_request
from ctxpolicy.policies.rewrite import PolicyError, Rewrite, StageContext
from ctxpolicy.policies.summarizer import SummaryCall
from ctxpolicy.policies.truncation import truncate
from ctxpolicy.tokens import count_message, join_counted

SUMMARY_ERROR_FALLBACK = "TR:summary-error"


def summary_message(text: str, dump_path: str | None = None) -> dict:
    """Our marker line, then the summary as written (S: its block, unchanged); counted from
    its parts (``join_counted``: a long summary is not encoded again)."""
    parts = [f"{SUMMARY_MARKER} Summary of the earlier part of this task:\n\n", text.strip()]
    if dump_path:
        parts.append(f"\n\nThe full history up to this summary is saved as JSON at {dump_path}")
    return {"role": "user", "content": join_counted(parts)}


def _request_summary(stage: str, window: Sequence[Message], allowance: int, context: StageContext) -> SummaryCall:
    if context.summarizer is None:
        raise PolicyError(f"policy stage {stage} needs a summarizer")
    try:
        request = summary_request(stage, window, allowance)
    except PromptError as exc:
        raise PolicyError(str(exc)) from None
    return context.summarizer.summarize(request)


def _summary_text(stage: str, call: SummaryCall) -> str:
    return summary_block(call.text) if stage in ("S", "S-p") else call.text


def _on_error(window: Sequence[Message], target: int, call: SummaryCall) -> Rewrite:
    truncated = truncate(window, target)
    kept = truncated.window if truncated else list(window)
    return Rewrite(kept, removed=len(window) - len(kept), fallback=SUMMARY_ERROR_FALLBACK, summary_calls=[call])


def summarize_window(stage: str, window: Sequence[Message], target: int, context: StageContext) -> Rewrite:
    """SU / S: the whole window becomes one summary written within ``target`` tokens (soft)."""
    call = _request_summary(stage, window, max(MIN_ALLOWANCE_TOKENS, target), context)
    if call.error:
        return _on_error(window, target, call)
    message = summary_message(_summary_text(stage, call), context.dump_path)
    tokens = count_message(message)
    # S falls back to TR, which keeps the last (here: the only) message, so it cannot shorten it.
    # At D = 1 (target 0) the summary's budget is the minimum allowance, not zero.
    fallback = "TR" if stage == "S" and tokens > (target or MIN_ALLOWANCE_TOKENS) else None
    return Rewrite([message], removed=len(window), summary_tokens=tokens, fallback=fallback, summary_calls=[call])


def turn_starts(window: Sequence[Message]) -> list[int]:
    """Where each agent turn of the window begins: its assistant messages (a summary is a user
    message and never a turn; a tool-call unit begins at its assistant message)."""
    return [i for i, m in enumerate(window) if m.get("role") == "assistant"]


def summarize_older_turns(stage: str, window: Sequence[Message], keep: int, context: StageContext) -> Rewrite | None:
    """SU-p / S-p with ``kM``: everything before the last ``keep`` agent turns becomes one summary,
    the turns themselves stay verbatim. The summary is asked for within half the tokens it
    replaces (at least the minimum allowance); if the summarizer fails, the head is dropped."""
    starts = turn_starts(window)
    if len(starts) <= keep:
        return None
    tail_start = starts[-keep]
    head, tail = window[:tail_start], list(window[tail_start:])
    allowance = max(MIN_ALLOWANCE_TOKENS, sum(token_list(head)) // 2)
    call = _request_summary(stage, head, allowance, context)
    if call.error:
        return Rewrite(tail, removed=len(head), fallback=SUMMARY_ERROR_FALLBACK, summary_calls=[call])
    message = summary_message(_summary_text(stage.removesuffix("-p"), call), context.dump_path)
    return Rewrite([message, *tail], removed=len(head), summary_tokens=count_message(message), summary_calls=[call])


def verbatim_tail_start(window: Sequence[Message], budget: int) -> int:
    """Start of the longest run of whole most-recent units that fits ``budget`` tokens."""
    tokens = token_list(window)
    start, used = len(window), 0
    for unit_start, unit_end in reversed(units(window)):
        size = sum(tokens[unit_start:unit_end])
        if used + size > budget:
            break
        start, used = unit_start, used + size
    return start


def summarize_head(stage: str, window: Sequence[Message], target: int, context: StageContext) -> Rewrite | None:
    """SU-p / S-p: half the allowance keeps a verbatim tail, half summarizes the older head."""
    tail_budget = target // 2
    tail_start = verbatim_tail_start(window, tail_budget)
    head, tail = window[:tail_start], list(window[tail_start:])
    if not head:
        return None
    base = stage.removesuffix("-p")
    call = _request_summary(stage, head, max(MIN_ALLOWANCE_TOKENS, target - tail_budget), context)
    if call.error:
        return _on_error(window, target, call)
    message = summary_message(_summary_text(base, call), context.dump_path)
    rebuilt = [message, *tail]
    truncated = truncate(rebuilt, target)
    final = truncated.window if truncated else rebuilt
    originals_kept = len(final) - (1 if final and final[0] is message else 0)
    return Rewrite(
        final,
        removed=len(window) - originals_kept,
        summary_tokens=count_message(message),
        fallback="TR" if truncated else None,
        summary_calls=[call],
    )
