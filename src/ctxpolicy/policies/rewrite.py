"""What one stage did to the compressible window."""

from __future__ import annotations

from dataclasses import dataclass, field

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.policies.summarizer import Summarizer, SummaryCall


class PolicyError(CtxpolicyError, ValueError):
    """The policy cannot be applied to this input (missing threshold, summarizer, bad message)."""


@dataclass(frozen=True)
class Rewrite:
    window: list[dict]
    removed: int = 0
    cleared: int = 0
    summary_tokens: int = 0
    fallback: str | None = None
    summary_calls: list[SummaryCall] = field(default_factory=list)


@dataclass(frozen=True)
class StageContext:
    """What a stage may need beyond the window: the history's shape, the call count, the I/O edges."""

    history_length: int
    calls: int
    summarizer: Summarizer | None = None
    dump_path: str | None = None  # set by a DUMP stage for the summary that follows
    action_format: str | None = None  # how the agent writes its commands (policies.actions)
