"""Apply one compression policy to a message history.

Reads ``{"messages": [...]}`` (stdin by default) and writes ``{"messages": [...], "events": [...],
"summary_calls": [...]}``: the history as it would be sent for the next agent call, after one
application of the policy. A threshold policy under its threshold returns the history unchanged
with no event.

examples:
  ctxpolicy compress --policy TR/Th/0.5 --threshold 8000 -i history.json
  ctxpolicy compress --policy OTRC/St < history.json
  ctxpolicy compress --policy S-p/Th/0.5 --threshold primary --thresholds results/thresholds/local/qwen05b.json \\
      --summarizer-url http://127.0.0.1:8080/v1 --summarizer-model qwen2.5-coder-0.5b-instruct
  ctxpolicy compress --policy codex --context-window 32768     # a deployed-system preset
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

SETTINGS = ("tight", "primary", "loose")


class InputError(Exception):
    """Bad input: reported as one line, exit code 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", required=True,
                        help="policy spec P/T/D (e.g. TR/Th/0.5, OTRC/St, FC) or a preset name")
    parser.add_argument("--threshold", help="threshold B in tokens, or a setting name: tight, primary, loose")
    parser.add_argument("--thresholds", type=Path, help="thresholds JSON that resolves a setting name")
    parser.add_argument("--context-window", type=int, help="context window in tokens (sets a preset's threshold)")
    parser.add_argument("--calls", type=int, help="agent calls made so far (default: the assistant messages)")
    parser.add_argument("--summarizer-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--summarizer-model", help="model name the summarizer endpoint serves")
    parser.add_argument("--summarizer-temperature", type=float, default=0.2)
    parser.add_argument("--summarizer-max-tokens", type=int, default=4096)
    parser.add_argument("--dump-dir", type=Path, help="directory for the DUMP stage's history file")
    parser.add_argument("-i", "--input", type=Path, help="input JSON file (default: stdin)")
    parser.add_argument("-o", "--output", type=Path, help="output JSON file (default: stdout)")


def _read_history(path: Path | None) -> list:
    source = str(path) if path else "stdin"
    try:
        text = path.read_text(encoding="utf-8") if path else sys.stdin.read()
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InputError(f"{source}: field 'messages': expected a list of chat messages")
    return data["messages"]


def _resolve_threshold(args: argparse.Namespace, preset) -> int | None:
    raw = args.threshold
    if raw is None:
        if preset is not None and args.context_window:
            return preset.threshold(args.context_window)
        return None
    if raw in SETTINGS:
        if args.thresholds is None:
            raise InputError(f"--threshold {raw}: a setting name needs --thresholds FILE")
        try:
            value = json.loads(args.thresholds.read_text(encoding="utf-8")).get(raw)
        except (OSError, json.JSONDecodeError, AttributeError) as exc:
            raise InputError(f"{args.thresholds}: cannot read thresholds: {exc}") from None
        if not isinstance(value, int) or value <= 0:
            raise InputError(f"{args.thresholds}: field '{raw}': expected a positive integer, got {value!r}")
        return value
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"--threshold {raw!r}: expected tokens or one of {', '.join(SETTINGS)}") from None
    if value <= 0:
        raise InputError(f"--threshold {value}: must be positive")
    return value


def _write(payload: dict, path: Path | None) -> None:
    text = json.dumps(payload, ensure_ascii=False, indent=1) + "\n"
    if path is None:
        sys.stdout.write(text)
        return
    from ctxpolicy.atomic import atomic_write_text

    atomic_write_text(path, text)


def _run(args: argparse.Namespace) -> dict:
    from ctxpolicy.policies import (
        PRESETS,
        EndpointSummarizer,
        HistoryDump,
        PolicyError,
        PolicySpecError,
        apply_policy,
        parse_spec,
    )

    preset = PRESETS.get(args.policy)
    try:
        spec = preset.policy if preset else parse_spec(args.policy)
    except PolicySpecError as exc:
        raise InputError(f"--policy: {exc}") from None
    threshold = _resolve_threshold(args, preset)
    if spec.needs_threshold and threshold is None:
        raise InputError(f"--policy {spec}: a threshold policy needs --threshold TOKENS or a setting name")
    if bool(args.summarizer_url) != bool(args.summarizer_model):
        raise InputError("--summarizer-url and --summarizer-model go together")
    summarizer = (EndpointSummarizer(args.summarizer_url, args.summarizer_model, args.summarizer_temperature,
                                     args.summarizer_max_tokens) if args.summarizer_url else None)
    messages = _read_history(args.input)
    try:
        result = apply_policy(spec, messages, threshold=threshold, calls=args.calls, summarizer=summarizer,
                              dump=HistoryDump(args.dump_dir) if args.dump_dir else None)
    except PolicyError as exc:
        raise InputError(f"{args.input or 'stdin'}: {exc}") from None
    return {"messages": result.messages, "events": result.events,
            "summary_calls": [asdict(call) for call in result.summary_calls]}


def main(args: argparse.Namespace) -> int:
    try:
        payload = _run(args)
    except InputError as exc:
        print(f"ctxpolicy compress: error: {exc}", file=sys.stderr)
        return 2
    _write(payload, args.output)
    failed = [call["error"] for call in payload["summary_calls"] if call["error"]]
    for error in failed:
        print(f"ctxpolicy compress: summary call failed (fell back to TR): {error}", file=sys.stderr)
    return 1 if failed else 0
