"""The registry of policy stages: one row per primitive of the P/T/D notation.

A row says where the stage may stand in a chain (``kind``: the step stage first, then the
preparing stages, then at most one final stage), what it needs (a depth target, a summary after
it, a summarizer), the function that applies it to the compressible window, its plot style (a key
of ``figures.style.ENCODINGS``) and its line of docs. ``policies.spec`` parses and validates specs
from these rows (and writes its list of valid forms from them), ``policies.engine`` runs each stage
by looking its row up. A new primitive is its module, its row here (``register``) and its docs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ctxpolicy.policies.clearing import (
    clear_all_but_last_results,
    clear_ninth_from_end,
    clear_thinking,
    clear_tool_results,
)
from ctxpolicy.policies.compaction import compact
from ctxpolicy.policies.digest import digest_window
from ctxpolicy.policies.history import Message
from ctxpolicy.policies.rewrite import PolicyError, Rewrite, StageContext
from ctxpolicy.policies.summarizing import summarize_head, summarize_older_turns, summarize_window
from ctxpolicy.policies.truncation import truncate

KINDS = ("step", "preparing", "final")

# run(window, target, context, is_last): the window rewritten, or None when nothing changes
Run = Callable[[Sequence[Message], "int | None", StageContext, bool], "Rewrite | None"]
# keep_run(window, keep, context): the keep-last-M variant (``kM``)
KeepRun = Callable[[Sequence[Message], int, StageContext], "Rewrite | None"]


@dataclass(frozen=True)
class Stage:
    name: str  # as written in a spec: ``TR``, ``SU-p``
    kind: str  # one of KINDS
    run: Run | None  # None: the engine's own step (DUMP writes the history to a file)
    doc: str  # one line for docs/policies.md and --help texts
    style: str | None = None  # the figures' encoding of the primitive alone; None: never alone
    target: bool = True  # compresses towards the depth target
    summary: bool = False  # writes a summary of the window
    llm: bool = False  # the summary is an LLM call (a summarizer; D = 1 allowed)
    needs_summary: bool = False  # prepares a summary: a summary stage must follow
    alone: str | None = None  # stands alone, with this trigger only (``CC/Th``)
    keep_run: KeepRun | None = None  # the kM form


def _otrc(window, target, context, is_last):
    return clear_ninth_from_end(window, context)


def _trc(window, target, context, is_last):
    return clear_tool_results(window, target, fall_back_to_tr=is_last)


def _ct(window, target, context, is_last):
    return clear_thinking(window, context.action_format)


def _tr(window, target, context, is_last):
    return truncate(window, target)


def _summary(name: str) -> Run:
    return lambda window, target, context, is_last: summarize_window(name, window, target, context)


def _partial_summary(name: str) -> Run:
    return lambda window, target, context, is_last: summarize_head(name, window, target, context)


def _older_turns(name: str) -> KeepRun:
    return lambda window, keep, context: summarize_older_turns(name, window, keep, context)


def _digest(window, target, context, is_last):
    return digest_window(window, target, context)


def _cc(window, target, context, is_last):
    return compact(window, context.action_format)


STAGES: dict[str, Stage] = {}


def register(stage: Stage) -> Stage:
    """Add ``stage`` to the registry, after the stages of its kind's place in the chain order."""
    if stage.name in STAGES:
        raise ValueError(f"stage {stage.name!r} is registered already")
    if stage.kind not in KINDS:
        raise ValueError(f"stage {stage.name!r}: kind {stage.kind!r} is not one of {', '.join(KINDS)}")
    rows = [*STAGES.values(), stage]
    rows.sort(key=lambda row: KINDS.index(row.kind))  # stable: registration order within a kind
    STAGES.clear()
    STAGES.update((row.name, row) for row in rows)
    return stage


def lookup(name: str) -> Stage:
    try:
        return STAGES[name]
    except KeyError:
        raise PolicyError(f"unknown stage {name!r}") from None


def names(kind: str | None = None, **flags: bool) -> tuple[str, ...]:
    """The registered stages in chain order, of ``kind`` and with the given flags."""
    return tuple(
        row.name
        for row in STAGES.values()
        if (kind is None or row.kind == kind) and all(getattr(row, k) == v for k, v in flags.items())
    )


for _row in (
    Stage(
        "OTRC",
        "step",
        _otrc,
        "every step: clear one old tool result (kM: every tool result but the last M)",
        "OTRC",
        target=False,
        keep_run=lambda window, keep, context: clear_all_but_last_results(window, keep),
    ),
    Stage(
        "TRC",
        "preparing",
        _trc,
        "clear old tool results towards the target (as the last stage, falls back to TR)",
        "TRC",
    ),
    Stage(
        "CT", "preparing", _ct, "clear the reasoning text of older assistant turns before a summary", needs_summary=True
    ),
    Stage(
        "DUMP",
        "preparing",
        None,
        "write the full history into the workspace and name that file in the summary",
        needs_summary=True,
    ),
    Stage("TR", "final", _tr, "drop the oldest whole messages of the window down to the target", "TR"),
    Stage("SU", "final", _summary("SU"), "replace the window by one free summary", "SU", summary=True, llm=True),
    Stage("S", "final", _summary("S"), "replace the window by one structured summary", "S", summary=True, llm=True),
    Stage(
        "SU-p",
        "final",
        _partial_summary("SU-p"),
        "a free summary of the head, a verbatim tail (kM: all turns but the last M summarized)",
        "SU-p",
        summary=True,
        llm=True,
        keep_run=_older_turns("SU-p"),
    ),
    Stage(
        "S-p",
        "final",
        _partial_summary("S-p"),
        "a structured summary of the head, a verbatim tail (kM: all turns but the last M summarized)",
        "S-p",
        summary=True,
        llm=True,
        keep_run=_older_turns("S-p"),
    ),
    Stage(
        "DIGEST", "final", _digest, "an extractive digest in the summary slot, no summary call", "DIGEST", summary=True
    ),
    Stage(
        "CC",
        "final",
        _cc,
        "compact all turns but the most recent 4 into one block (CliffCompaction)",
        "CC",
        target=False,
        alone="Th",
    ),
):
    register(_row)
