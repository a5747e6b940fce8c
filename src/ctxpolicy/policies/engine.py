"""apply_policy: one application of a policy before an agent call.

The step part of a policy (``St``, or the OTRC part of ``St+Th`` and ``St+TnN``) runs on every
call; the threshold part runs when the history's token count exceeds the threshold, the
turn-count part (``TnN``) when the compressible window holds N agent turns. A keep-last-M
policy (``kM``) has no depth target: OTRC keeps the last M tool results, the summary the last
M turns. The depth target of
a part is computed once, from the compressible window when that part begins, and shared by its
stages (so ``TRC+SU`` clears towards the same target the summary is written for). Each stage
that changes the history, or calls the summarizer, records one compression event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ctxpolicy.policies import actions
from ctxpolicy.policies import stages
from ctxpolicy.policies.dump import HistoryDump
from ctxpolicy.policies.history import first_difference, protected_prefix_length
from ctxpolicy.policies.messages import check_messages
from ctxpolicy.policies.rewrite import PolicyError, Rewrite, StageContext
from ctxpolicy.policies.spec import PolicySpec, parse_spec
from ctxpolicy.policies.summarizer import Summarizer, SummaryCall
from ctxpolicy.policies.summarizing import turn_starts
from ctxpolicy.tokens import count_message


@dataclass(frozen=True)
class PolicyResult:
    messages: list[dict]
    events: list[dict] = field(default_factory=list)
    summary_calls: list[SummaryCall] = field(default_factory=list)
    message_tokens: list[int] | None = None
    """``count_message`` of each of ``messages`` where the engine counted them (a threshold or a
    depth needed the counts); None otherwise."""


def _recounted(after: list[dict], before: list[dict], before_tokens: list[int]) -> list[int]:
    """The token counts of ``after``: a message kept from ``before`` (the same object: stages
    never mutate one) keeps its count, a new one is counted."""
    known = {id(m): n for m, n in zip(before, before_tokens)}
    return [known[id(m)] if id(m) in known else count_message(m) for m in after]


def _run_stage(
    stage: str, window: list[dict], target: int | None, context: StageContext, is_last: bool, keep: int | None = None
) -> Rewrite | None:
    row = stages.lookup(stage)
    if keep is not None and row.keep_run is not None:
        return row.keep_run(window, keep, context)
    assert target is not None or not row.target, f"stage {stage} needs a depth target"
    return row.run(window, target, context, is_last)


def _event(
    stage: str,
    trigger: str,
    depth: float | None,
    target: int | None,
    prefix_length: int,
    before: list[dict],
    after: list[dict],
    rewrite: Rewrite,
    before_tokens: list[int],
    after_tokens: list[int],
) -> dict:
    prefix_tokens = sum(before_tokens[:prefix_length])
    window_before = sum(before_tokens[prefix_length:])
    window_after = sum(after_tokens[prefix_length:])
    first_changed = first_difference(before, after)
    unchanged_tokens = before_tokens if first_changed is None else before_tokens[:first_changed]
    return {
        "primitive": stage,
        "trigger": trigger,
        "depth": depth if target is not None else None,
        "window_tokens_before": window_before,
        "window_tokens_after": window_after,
        "total_tokens_before": prefix_tokens + window_before,
        "total_tokens_after": prefix_tokens + window_after,
        "target_tokens": target,
        "messages_removed": rewrite.removed,
        "messages_cleared": rewrite.cleared,
        "summary_tokens": rewrite.summary_tokens,
        "first_changed_index": first_changed,
        "unchanged_prefix_tokens": sum(unchanged_tokens),
        "fallback": rewrite.fallback,
    }


def apply_policy(
    spec: PolicySpec | str,
    messages: Sequence[Mapping],
    *,
    threshold: int | None = None,
    calls: int | None = None,
    summarizer: Summarizer | None = None,
    dump: HistoryDump | None = None,
    action_format: str | None = None,
    prefix_length: int | None = None,
    checked: bool = False,
    message_tokens: Sequence[int] | None = None,
) -> PolicyResult:
    """Apply ``spec`` once to ``messages`` (never mutated) as it would run before the next call.

    ``calls`` is the number of agent calls made so far (default: the assistant messages).
    ``action_format`` is how the agent writes its commands (``policies.actions``; None: detected
    from the messages, ``mswea_bash_command`` when none is recognised); ``prefix_length`` the run's
    recorded protected prefix (None: system and task message, ``history.protected_prefix_length``).
    Unchanged messages are returned as the same objects; changed ones are new dicts. ``checked``:
    the caller has checked every message already (``PolicySession`` checks each once, as it is
    appended, instead of the whole history before every call). ``message_tokens``: the caller's
    ``count_message`` of each message, so that the history is not counted again here.
    """
    spec = parse_spec(spec) if isinstance(spec, str) else spec
    if not checked:
        check_messages(messages)  # the shape every stage relies on (policies.messages); MessageError otherwise
    if spec.needs_threshold and threshold is None:
        raise PolicyError(f"policy {spec} is threshold-triggered and needs a threshold")
    history = list(messages)
    tokens = list(message_tokens) if message_tokens is not None else None
    if tokens is not None and len(tokens) != len(history):
        raise PolicyError(f"{len(tokens)} message token counts for {len(history)} messages")
    if calls is None:
        calls = sum(1 for m in history if m.get("role") == "assistant")
    prefix_length = protected_prefix_length(history, prefix_length)
    if action_format is None:
        action_format = actions.detect(history) or actions.DEFAULT
    actions.check_format(action_format)
    events: list[dict] = []
    summary_calls: list[SummaryCall] = []
    parts = (("St", spec.step_stages), ("Th", spec.threshold_stages), ("Tn", spec.turn_stages))
    for trigger, chain in parts:
        if not chain or len(history) == prefix_length:
            continue  # no stage here, or nothing compressible
        if tokens is None and (trigger == "Th" or spec.depth is not None):
            tokens = [count_message(m) for m in history]
        if trigger == "Th" and sum(tokens) <= threshold:
            continue
        if trigger == "Tn" and len(turn_starts(history[prefix_length:])) < spec.turns:
            continue
        target = int((1 - spec.depth) * sum(tokens[prefix_length:])) if spec.depth is not None else None
        dump_path = None
        for position, stage in enumerate(chain):
            if stages.lookup(stage).run is None:  # DUMP: the history written to a file, no rewrite
                if dump is None:
                    raise PolicyError(f"policy {spec} has a DUMP stage and needs a dump directory")
                dump_path = dump.write(history, calls)
                continue
            context = StageContext(len(history), calls, summarizer, dump_path, action_format)
            stage_target = target if stages.lookup(stage).target else None
            rewrite = _run_stage(
                stage, history[prefix_length:], stage_target, context, position == len(chain) - 1, spec.keep
            )
            if rewrite is None:
                continue
            after = history[:prefix_length] + rewrite.window
            if after != history or rewrite.summary_calls:
                if tokens is None:
                    tokens = [count_message(m) for m in history]
                after_tokens = _recounted(after, history, tokens)
                events.append(
                    _event(
                        stage,
                        trigger,
                        spec.depth,
                        stage_target,
                        prefix_length,
                        history,
                        after,
                        rewrite,
                        tokens,
                        after_tokens,
                    )
                )
                summary_calls.extend(rewrite.summary_calls)
                tokens = after_tokens
            # else: after == history message for message, so the counts still hold
            history = after
    return PolicyResult(history, events, summary_calls, tokens)
