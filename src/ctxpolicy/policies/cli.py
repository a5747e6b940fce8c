"""Apply one compression policy to a message history.

Reads ``{"messages": [...]}`` (stdin by default) and writes ``{"messages": [...], "events": [...],
"summary_calls": [...]}``: the history as it would be sent for the next agent call, after one
application of the policy. A threshold policy under its threshold returns the history unchanged
with no event.

The history is checked as every policy needs it (the same check the proxy, the importer and the
replay make): each message a ``role`` (system, developer, user, assistant or tool;
mini-swe-agent's ``exit`` last); ``content`` a string, null or a list of content parts (objects);
``tool_calls`` a list of tool calls whose ``function`` is an object with a string ``name`` and
string ``arguments``; every ``tool`` message answering a tool call before it; text UTF-8 without
unpaired surrogates. Anything else is refused with one line naming the message and field (exit
code 2).

examples:
  ctxpolicy compress --policy TR/Th/0.5 --threshold 8000 -i history.json
  ctxpolicy compress --policy OTRC/St < history.json
  ctxpolicy compress --policy S-p/Th/0.5 --setting primary \\
      --thresholds results/thresholds/local/qwen05b.json \\
      --summarizer-url http://127.0.0.1:8080/v1 --summarizer-model qwen2.5-coder-0.5b-instruct
  ctxpolicy compress --policy codex --context-window 32768     # a deployed-system preset
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from ctxpolicy.errors import UsageError
from ctxpolicy.threshold_settings import SETTINGS, ThresholdsFileError, is_token_count, read_thresholds


class InputError(UsageError):
    """Bad input: reported as one line by ``cli.main``, exit code 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctxpolicy.cli_args import add_input, add_out, add_summarizer, deprecated_alias, deprecated_value

    parser.add_argument(
        "--policy", required=True, help="policy spec P/T/D (e.g. TR/Th/0.5, OTRC/St, FC) or a preset name"
    )
    threshold = parser.add_mutually_exclusive_group()
    threshold.add_argument("--threshold", type=int, help="threshold B in tokens")
    threshold.add_argument("--setting", choices=SETTINGS, help="a threshold setting read from --thresholds")
    deprecated_value(parser, "--threshold", SETTINGS, replacement="--setting")
    parser.add_argument("--thresholds", type=Path, help="thresholds JSON that resolves --setting")
    parser.add_argument("--context-window", type=int, help="context window in tokens (sets a preset's threshold)")
    parser.add_argument("--calls", type=int, help="agent calls made so far (default: the assistant messages)")
    add_summarizer(
        parser, "OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1", "model name the summarizer endpoint serves"
    )
    parser.add_argument("--summarizer-temperature", type=float, default=0.2)
    parser.add_argument("--summarizer-max-tokens", type=int, default=4096)
    parser.add_argument("--dump-dir", type=Path, help="directory for the DUMP stage's history file")
    parser.add_argument(
        "--action-format",
        default="auto",
        help="how the agent writes its commands: auto (default: detect) | mswea_bash_command | bash | tool_calls",
    )
    parser.add_argument(
        "--protected-prefix",
        type=int,
        help="messages kept verbatim at the start (default: system and first user message; more where "
        "demonstrations come before the task)",
    )
    add_input(parser, "input JSON file (default: stdin)")
    out = add_out(parser, "output JSON file (default: stdout)", dest="output")
    deprecated_alias(parser, "-o", "--output", replacement=out)

    def one_line_error(message: str):  # a bad flag is one line too, as every refused input is
        print(f"ctxpolicy compress: error: {message}", file=sys.stderr)
        raise SystemExit(2)

    parser.error = one_line_error


def _read_history(path: Path | None) -> list:
    source = str(path) if path else "stdin"
    try:
        if path:
            raw = path.read_bytes()
        else:  # the bytes, so that invalid UTF-8 is reported, not raised (a text stream in tests)
            stream = getattr(sys.stdin, "buffer", None)
            raw = stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogatepass")
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: not JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise InputError(f"{source}: not JSON we read: nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InputError(f"{source}: field 'messages': expected a list of chat messages")
    messages = data["messages"]
    from ctxpolicy.policies.messages import messages_problem

    problem = messages_problem(messages, text=True, pairing=True, allow_exit=True)
    if problem:
        raise InputError(f"{source}: {problem[0]}: {problem[1]}")
    return messages


def _check_counts(args: argparse.Namespace) -> None:
    for option, value, least in (
        ("--context-window", args.context_window, 1),
        ("--calls", args.calls, 0),
        ("--summarizer-max-tokens", args.summarizer_max_tokens, 1),
    ):
        if value is not None and value < least:
            raise InputError(f"{option} {value}: must be {least} or more")
    url = args.summarizer_url
    if url is not None and not url.startswith(("http://", "https://")):
        raise InputError(f"--summarizer-url {url!r}: expected an http(s) URL such as http://127.0.0.1:8080/v1")


def _resolve_threshold(args: argparse.Namespace, preset) -> int | None:
    raw = args.setting
    if args.threshold is None and raw is None:
        if preset is not None and args.context_window is not None:
            return preset.threshold(args.context_window)
        return None
    if raw is not None:
        if args.thresholds is None:
            raise InputError(f"--setting {raw}: a setting name needs --thresholds FILE")
        try:
            value = read_thresholds(args.thresholds).get(raw)
        except OSError as exc:
            raise InputError(f"{args.thresholds}: cannot read thresholds: {exc}") from None
        except ThresholdsFileError as exc:
            raise InputError(str(exc)) from None
        if not is_token_count(value):
            raise InputError(f"{args.thresholds}: field '{raw}': expected a positive integer, got {value!r}")
        return value
    value = args.threshold
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
    from ctxpolicy.policies import actions
    from ctxpolicy.policies import (
        NEIGHBOUR_PRESETS,
        PRESETS,
        EndpointSummarizer,
        HistoryDump,
        PolicyError,
        PolicySpecError,
        apply_policy,
        parse_spec,
    )

    _check_counts(args)
    preset = PRESETS.get(args.policy)
    neighbour = NEIGHBOUR_PRESETS.get(args.policy)
    try:
        spec = preset.policy if preset else neighbour.policy if neighbour else parse_spec(args.policy)
    except PolicySpecError as exc:
        raise InputError(f"--policy: {exc}") from None
    threshold = _resolve_threshold(args, preset)
    if spec.needs_threshold and threshold is None:
        raise InputError(f"--policy {spec}: a threshold policy needs --threshold TOKENS or --setting NAME")
    if bool(args.summarizer_url) != bool(args.summarizer_model):
        raise InputError("--summarizer-url and --summarizer-model go together")
    summarizer = (
        EndpointSummarizer(
            args.summarizer_url, args.summarizer_model, args.summarizer_temperature, args.summarizer_max_tokens
        )
        if args.summarizer_url
        else None
    )
    from ctxpolicy.cli_args import TooManyValuesError, single

    try:
        args.input = single(args.input, "--input")
    except TooManyValuesError as exc:
        raise InputError(str(exc)) from None
    messages = _read_history(args.input)
    exit_message = messages[-1:] if messages and messages[-1].get("role") == "exit" else []
    messages = messages[: len(messages) - len(exit_message)]  # mini-swe-agent's exit: no call, left as it is
    action_format = None if args.action_format == "auto" else args.action_format
    try:
        actions.check_format(action_format, "--action-format")
    except actions.ActionFormatError as exc:
        raise InputError(f"{exc} (or auto)") from None
    if args.protected_prefix is not None and args.protected_prefix < 0:
        raise InputError(f"--protected-prefix: {args.protected_prefix} must be >= 0")
    try:
        result = apply_policy(
            spec,
            messages,
            threshold=threshold,
            calls=args.calls,
            summarizer=summarizer,
            dump=HistoryDump(args.dump_dir) if args.dump_dir else None,
            action_format=action_format,
            prefix_length=args.protected_prefix,
        )
    except PolicyError as exc:
        raise InputError(f"{args.input or 'stdin'}: {exc}") from None
    return {
        "messages": result.messages + exit_message,
        "events": result.events,
        "summary_calls": [asdict(call) for call in result.summary_calls],
    }


def main(args: argparse.Namespace) -> int:
    payload = _run(args)
    try:
        _write(payload, args.output)
    except (OSError, UnicodeEncodeError) as exc:
        where = f"--out {args.output}" if args.output else "stdout"
        raise InputError(f"{where}: cannot write: {getattr(exc, 'strerror', None) or exc}") from None
    failed = [call["error"] for call in payload["summary_calls"] if call["error"]]
    for error in failed:
        print(f"ctxpolicy compress: summary call failed (fell back to TR): {error}", file=sys.stderr)
    return 1 if failed else 0
