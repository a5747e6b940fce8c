"""One row per compression step of a run: anchors, constraints and reacquisition.

A *compression step* is an agent call whose ``events`` list is not empty; a stacked policy's
stages (e.g. ``OTRC`` then ``S-p``) fire in one step and are audited together, because the
records hold the history before the first stage and after the last one only.

At risk: what the messages held that the step changed or removed (a message of the history
before that is not, byte for byte, in the history after). An at-risk anchor is *kept* when
its value still occurs in a message after the step that is not a new summary (carried
messages, cleared placeholders, compacted blocks, the agent's latest turn), *summarised* when
it occurs only in a summary this step wrote (``[ctxpolicy:summary]``), and *lost* otherwise.
Constraints are kept, or judged against the step's new summaries (preserved / lost /
contradicted), or lost when the step wrote no summary.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ctxpolicy import rundir
from ctxpolicy.analysis import anchors as anchors_
from ctxpolicy.analysis.constraints import constraints_of, restated
from ctxpolicy.analysis.judge import LexicalJudge
from ctxpolicy.analysis.reacquisition import count_after, removed_outputs
from ctxpolicy.analysis.table import IDENTITY, check_rows
from ctxpolicy.metrics.commands import commands_of
from ctxpolicy.analysis.windows import RecordError, Step, Transcript, read_transcript
from ctxpolicy.policies import actions
from ctxpolicy.policies.history import SUMMARY_MARKER, marker_of


def read_identity(run_dir: Path) -> tuple[dict, str | None]:
    identity, outcome, _ = read_run_facts(run_dir)
    return identity, outcome


def read_run_facts(run_dir: Path) -> tuple[dict, str | None, dict]:
    """(identity, outcome, settings) of a run's ``run.json``; settings carry the recorded
    ``action_format`` (checked, ``mswea_bash_command`` when absent) and ``protected_prefix``."""
    path = Path(run_dir) / rundir.RUN_JSON
    try:
        record = rundir.read_run_json(run_dir)
    except rundir.RunRecordError as exc:
        raise RecordError(str(exc)) from None
    identity = record.get("identity")
    if not isinstance(identity, dict):
        raise RecordError(f"{path}: field 'identity' is missing or not an object")
    try:
        action_format = actions.of_record(record)
    except actions.ActionFormatError as exc:
        raise RecordError(f"{path}: {exc}") from None
    prefix = (record.get("settings") or {}).get("protected_prefix")
    if prefix is not None and (isinstance(prefix, bool) or not isinstance(prefix, int) or prefix < 0):
        raise RecordError(f"{path}: field settings.protected_prefix is {prefix!r}; expected a non-negative integer")
    return identity, record.get("outcome"), {"action_format": action_format, "protected_prefix": prefix}


def audit_run(run_dir: str | Path, judge=None, transcript: Transcript | None = None) -> list[dict[str, Any]]:
    """The audit rows of one run directory (``judge``: a judge of ``ctxpolicy.analysis.judge``;
    ``transcript``: the run's, when the caller has read it already)."""
    run_dir = Path(run_dir)
    identity, outcome, settings = read_run_facts(run_dir)
    transcript = read_transcript(run_dir) if transcript is None else transcript
    judge = judge or LexicalJudge()
    base = {"run_dir": str(run_dir), **{k: identity.get(k) for k in IDENTITY}, "outcome": outcome}
    rows = []
    for number, step in enumerate(transcript.steps):
        until = transcript.steps[number + 1].step if number + 1 < len(transcript.steps) else None
        rows.append({**base, "event": number, **audit_step(transcript, step, until, judge, **settings)})
    return rows


def audit_checked(run_dir: str | Path, judge=None, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """``audit_run`` for a run the tables can read, with rows the events table can hold.

    The run is first read as ``ctxpolicy aggregate`` reads it (``metrics.records.read_run``: every
    field typed and bounded, calls and messages agreeing), so the audit leaves out the runs the
    tables leave out. Any way the run cannot be audited, an unforeseen one included, raises
    ``RecordError`` with one line "PATH: reason"; a judge's failure (``JudgeError``) is no run's
    fault and passes through. With ``warnings``, the run's no-action warning (``silent_run``),
    if any, is appended to it, from the transcript the audit read.
    """
    from ctxpolicy.analysis.judge import JudgeError
    from ctxpolicy.metrics.records import RecordError as TableError
    from ctxpolicy.metrics.records import read_run

    run_dir = Path(run_dir)
    try:
        read_run(run_dir)
        transcript = read_transcript(run_dir)
        rows = audit_run(run_dir, judge, transcript)
        check_rows(rows)  # every value fits its column
    except TableError as exc:
        raise RecordError(str(exc)) from None
    except (RecordError, JudgeError):
        raise
    except Exception as exc:  # a shape no check foresaw
        raise RecordError(f"{run_dir}: cannot be audited ({type(exc).__name__}: {exc})") from exc
    if warnings is not None:
        try:
            warning = silent_run(run_dir, transcript)
        except (RecordError, OSError, ValueError, KeyError, TypeError):
            warning = None
        if warning:
            warnings.append(warning)
    return rows


def silent_run(run_dir: str | Path, transcript: Transcript | None = None) -> str | None:
    """The no-action warning of a run whose agent answers hold no command in its recorded action
    format (None when some do, or it made no call); ``transcript``: the run's, if read already."""
    _, _, settings = read_run_facts(Path(run_dir))
    transcript = read_transcript(Path(run_dir)) if transcript is None else transcript
    fmt = settings["action_format"]
    if not transcript.replies or any(commands_of(dict(m), fmt) for _, m in transcript.replies):
        return None
    return actions.no_action_warning(run_dir, len(transcript.replies), fmt)


def audit_step(
    transcript: Transcript,
    step: Step,
    until: int | None,
    judge,
    action_format: str | None = None,
    protected_prefix: int | None = None,
) -> dict[str, Any]:
    before, after = transcript.messages(step.before_ids), transcript.messages(step.after_ids)
    after_ids, before_ids = set(step.after_ids), set(step.before_ids)
    removed = [m for mid, m in zip(step.before_ids, before) if mid not in after_ids]
    summary_ids = {
        mid for mid, m in zip(step.after_ids, after) if mid not in before_ids and marker_of(m) == SUMMARY_MARKER
    }
    carried = [m for mid, m in zip(step.after_ids, after) if mid not in summary_ids]
    summaries = [m for mid, m in zip(step.after_ids, after) if mid in summary_ids]
    kept_text, summary_text = anchors_.joined_text(carried), anchors_.joined_text(summaries)

    at_risk = anchors_.anchors_of(removed, action_format)
    kept = anchors_.mentioned(at_risk, kept_text, anchors_.joined_characters(carried))
    summarised = anchors_.mentioned(at_risk - kept, summary_text, anchors_.joined_characters(summaries))
    lost = at_risk - kept - summarised

    verdicts = _constraint_verdicts(constraints_of(removed), kept_text, summary_text, judge)
    gone = removed_outputs(
        before, [i for i, mid in enumerate(step.before_ids) if mid in after_ids], action_format, protected_prefix
    )
    reacq = count_after(
        transcript.replies,
        step.step,
        until,
        gone,
        {v for k, v in lost if k == "command"},
        {v for k, v in lost if k == "path"},
        action_format,
    )
    steps_after = sum(1 for s in transcript.agent_steps if s >= step.step and (until is None or s < until))
    first, last = step.events[0], step.events[-1]
    return {
        "call_index": step.call_index,
        "step": step.step,
        "primitives": "+".join(str(e.get("primitive")) for e in step.events),
        "event_depth": next((e["depth"] for e in step.events if e.get("depth") is not None), None),
        "n_stages": len(step.events),
        "summary_calls": step.summary_calls,
        "window_tokens_before": first.get("window_tokens_before"),
        "total_tokens_before": first.get("total_tokens_before"),
        "total_tokens_after": last.get("total_tokens_after"),
        "anchors_before": len(anchors_.anchors_of(before, action_format)),
        "anchors_at_risk": len(at_risk),
        "anchors_kept": len(kept),
        "anchors_summarised": len(summarised),
        "anchors_lost": len(lost),
        **{f"lost_{k}": n for k, n in anchors_.count_by_kind(lost).items()},
        "constraints_at_risk": len(verdicts),
        **{f"constraints_{v}": list(verdicts.values()).count(v) for v in ("kept", "preserved", "lost", "contradicted")},
        "removed_outputs": len(gone.commands) + len(gone.paths),
        "reacq_commands": reacq.commands,
        "reacq_of_lost": reacq.of_lost,
        "retrieval_after": reacq.retrieval,
        "commands_after": reacq.total,
        "steps_after": steps_after,
        "steps_to_reacq": reacq.first_step,
        "judge_model": judge.identity.model,
        "judge_endpoint": judge.identity.endpoint,
        "judge_template_sha256": judge.identity.template_sha256,
        "lost_anchors": json.dumps(sorted(lost), ensure_ascii=False),
    }


def _constraint_verdicts(constraints: list[str], kept_text: str, summary_text: str, judge) -> dict[str, str]:
    verdicts = {}
    for constraint in constraints:
        if restated(constraint, kept_text):
            verdicts[constraint] = "kept"
        elif summary_text.strip():
            verdicts[constraint] = judge.judge(constraint, summary_text).verdict
        else:
            verdicts[constraint] = "lost"
    return verdicts
