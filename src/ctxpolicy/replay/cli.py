"""Replay recorded full-context runs through compression policies, holding the agent's actions fixed.

Every complete run of the FC cells given (time-limited ones included: they are real traces) is
replayed step by step through each policy, as the harness would have applied it, and written
in the run-record format with identity track `replay` and the source run named, under
OUT/{benchmark}/{model}/{cell}/. No model server: prompt sizes are local token counts. Without
--summarizer-url a summary is a stand-in of the requested length (run.json:
replay.replay_summaries = placeholder); with it, summaries are real calls, recorded as such. A
policy written SPEC@SETTING is replayed at that threshold setting of --thresholds (several
settings in one call); --shard K/N replays only the K-th of N parts of the runs, balanced by
their agent calls (replay.shards).

examples:
  ctxpolicy replay --runs results/runs/local/qwen05b/FC --policies FC TR/Th/0.5 \\
      --setting primary --thresholds results/thresholds/local/qwen05b.json --out results/replay
  ctxpolicy replay --runs CELL --policies OTRC/St --out /tmp/replay
  ctxpolicy replay --runs CELL --policies FC TR/Th/0.5@tight TR/Th/0.5@loose \\
      --thresholds thresholds.json --shard 2/8 --out /tmp/replay
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from ctxpolicy.errors import CtxpolicyError, UsageError
from ctxpolicy.policies import PolicySpec, actions
from ctxpolicy.policies.history import text_of as history_text
from ctxpolicy.threshold_settings import FIXED, SETTINGS


class ReplayArgumentError(UsageError, ValueError):
    pass


class ReplayPolicyError(CtxpolicyError):
    """A policy that fails on a source run (a bad recorded history): exit code 2."""

    exit_code = 2


def add_arguments(parser) -> None:
    from ctxpolicy.cli_args import add_out, add_runs, add_summarizer, deprecated_alias

    add_runs(parser, "FC cell directories (or run directories); repeatable")
    policies = parser.add_argument(
        "--policies",
        dest="policy",
        nargs="+",
        action="extend",
        required=True,
        metavar="SPEC",
        help="policy specs to replay (e.g. TR/Th/0.5, or TR/Th/0.5@tight: at that setting of --thresholds); repeatable",
    )
    deprecated_alias(parser, "--policy", replacement=policies)
    threshold = parser.add_mutually_exclusive_group()
    threshold.add_argument("--threshold", type=int, help="the threshold in tokens, for every Th policy")
    threshold.add_argument("--setting", choices=SETTINGS, help="a threshold setting read from --thresholds")
    parser.add_argument("--thresholds", type=Path, help="the thresholds file (ctxpolicy calibrate's output)")
    parser.add_argument(
        "--shard", metavar="K/N", help="replay only the K-th of N parts of the runs, balanced by their agent calls"
    )
    add_summarizer(
        parser, "an OpenAI-compatible endpoint for real summaries", "the model name the summarizer endpoint serves"
    )
    add_out(parser, "the replay root (e.g. results/replay)", required=True)

    def one_line_error(message: str):
        print(f"replay: {message}", file=sys.stderr)
        raise SystemExit(2)

    parser.error = one_line_error


def _setting_threshold(path: Path | None, setting: str, asked_by: str) -> int:
    """The token count of ``setting`` in the thresholds file ``path``."""
    from ctxpolicy.threshold_settings import ThresholdsFileError, is_token_count, read_thresholds

    if path is None:
        raise ReplayArgumentError(f"{asked_by} needs --thresholds FILE")
    try:
        values = read_thresholds(path)
    except OSError:
        raise ReplayArgumentError(f"{path}: no such thresholds file") from None
    except ThresholdsFileError as exc:
        raise ReplayArgumentError(str(exc)) from None
    value = values.get(setting)
    if not is_token_count(value):
        raise ReplayArgumentError(f"{path}: field {setting} is {value!r}, not a token count")
    return value


def _threshold(args) -> int | None:
    """The threshold of the policies given without @SETTING: --threshold, or --setting's."""
    if args.threshold is not None:
        if args.threshold < 1:
            raise ReplayArgumentError(f"--threshold is {args.threshold}; it must be a token count >= 1")
        return args.threshold
    if args.setting is None:
        return None
    return _setting_threshold(args.thresholds, args.setting, "--setting")


@dataclass(frozen=True)
class Configuration:
    """One policy as replayed: its threshold setting (``fixed`` for --threshold, None without one)
    and threshold in tokens."""

    policy: PolicySpec
    setting: str | None
    threshold: int | None


def _configurations(args) -> list[Configuration]:
    """Every --policies entry with the setting and threshold it is replayed at."""
    from ctxpolicy.policies import PolicySpecError, parse_spec

    threshold = _threshold(args)
    setting = args.setting or (FIXED if args.threshold is not None else None)
    out = []
    for text in args.policy:
        spec_text, at, named = text.partition("@")
        try:
            policy = parse_spec(spec_text)
        except PolicySpecError as exc:
            raise ReplayArgumentError(f"--policies {text!r}: {exc}") from None
        if not at:
            if policy.needs_threshold and threshold is None:
                raise ReplayArgumentError(
                    f"policy {policy} needs --threshold N, --setting NAME --thresholds FILE or {policy}@NAME"
                )
            out.append(Configuration(policy, setting, threshold))
            continue
        if named not in SETTINGS:
            raise ReplayArgumentError(f"--policies {text!r}: setting {named!r} is not one of {', '.join(SETTINGS)}")
        if not policy.needs_threshold:
            raise ReplayArgumentError(f"--policies {text!r}: policy {policy} has no threshold to set")
        out.append(Configuration(policy, named, _setting_threshold(args.thresholds, named, f"--policies {text!r}")))
    return out


def no_action(source) -> bool:
    """True when no agent answer of the source holds an action in its recorded format."""
    fmt = actions.of_record(source.record)
    answers = [m for m in source.store.values() if m.get("role") == "assistant"]
    if fmt == actions.TOOL_CALLS:
        return bool(answers) and not any(m.get("tool_calls") for m in answers)
    return bool(answers) and not any(actions.fenced_commands(history_text(m), fmt) for m in answers)


def main(args) -> int:
    from ctxpolicy.policies import EndpointSummarizer
    from ctxpolicy.replay.output import ReplayBatch
    from ctxpolicy.replay.placeholder import PlaceholderSummarizer
    from ctxpolicy.replay.shards import parse_shard, shard_of
    from ctxpolicy.replay.source import find_source_runs, read_source_run

    configurations = _configurations(args)
    if bool(args.summarizer_url) != bool(args.summarizer_model):
        raise ReplayArgumentError("--summarizer-url and --summarizer-model go together")
    shard = parse_shard(args.shard) if args.shard is not None else None  # ShardError: exit code 2
    sources = find_source_runs(args.runs)  # SourceError: exit code 2, through cli.main
    if shard is not None:
        sources = shard_of(sources, *shard)
    real = args.summarizer_url is not None
    summarizer = EndpointSummarizer(args.summarizer_url, args.summarizer_model) if real else PlaceholderSummarizer()
    written = 0
    with ReplayBatch() as batch:  # one sync per source, not eight fsyncs per replay
        for run_dir in sources:
            source = read_source_run(run_dir)
            _replay_source(args, source, run_dir, configurations, summarizer, real, batch)
            written += len(configurations)
            batch.commit()
    print(
        f"replayed {len(sources)} run(s) under {len(configurations)} policies: {written} run directories under {args.out}"
    )
    return 0


def _replay_source(args, source, run_dir, configurations, summarizer, real, batch) -> None:
    """Every configuration over one source run, written into ``batch``; ``ReplayPolicyError`` when a policy fails."""
    from ctxpolicy.policies import HistoryDump, PolicyError
    from ctxpolicy.replay.engine import replay_source
    from ctxpolicy.replay.output import identity_summarizer, replay_cell, run_dir_for

    if no_action(source):
        print(
            f"replay: {actions.no_action_warning(run_dir, source.steps, actions.of_record(source.record))}",
            file=sys.stderr,
        )
    for policy, setting, threshold in ((c.policy, c.setting, c.threshold) for c in configurations):
        dump = None
        if "DUMP" in policy.stages:
            cell = replay_cell(
                source.identity,
                str(policy),
                setting if policy.needs_threshold else None,
                identity_summarizer(policy, args.summarizer_model),
            )
            dump = HistoryDump(run_dir_for(args.out, source.identity, cell) / "dump")
        try:
            replayed = replay_source(source, policy, threshold=threshold, summarizer=summarizer, dump=dump)
        except PolicyError as exc:
            raise ReplayPolicyError(f"{run_dir}: policy {policy}: {exc}") from None
        batch.write(replayed, args.out, setting=setting, summarizer=args.summarizer_model, real_summaries=real)
