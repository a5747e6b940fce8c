"""Price one run's LLM calls under a prefix cache: C = N_fresh + discount * N_cached + N_summary.

Input (-i FILE or stdin): JSON lines in call order, each
  {"kind": "agent"|"summary", "prompt_tokens": int,
   "message_ids": [str, ...], "message_tokens": [int, ...], "events": [...], "cached_tokens": int}
(all but kind and prompt_tokens optional; a schema-version-2 line's "prompt" stands for its
message_ids). A run directory, or a run's own calls.jsonl, works as it is: the message tokens come
from the run's message store beside it (harness, proxy and replay runs alike, a replay's source
store included). prompt_tokens are the server's counts; message_tokens local counts
(cl100k_base in run records), used by the exact method only for the shared prefix's share of the
call. events are the call's compression events (the estimate places OTRC events by position).
Output: one JSON object {"estimated": {fresh, cached, summary, billed_input}, "exact": {...} or
null (without message ids on every agent call), "measured": {...} or null (without
cached_tokens on every agent call), "block": B, "discount": D}, all counts in server tokens.
Definitions: docs/metrics.md, section 3.

With --runs (run folders, any depth) it prices every complete run instead and prints the
estimated, exact and measured billed input side by side, per run and summed per policy (``--json``:
one JSON object). Wherever a method is more than ``metrics.cost.DISAGREEMENT_MARGIN`` from the
reference (measured where reported, else exact) a warning goes to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path


def add_arguments(parser) -> None:
    from ctxpolicy.metrics.cost import DEFAULT_BLOCK, DEFAULT_DISCOUNT

    parser.add_argument(
        "--block", type=int, default=DEFAULT_BLOCK, help=f"cache block size in tokens (default {DEFAULT_BLOCK})"
    )
    parser.add_argument(
        "--discount",
        type=float,
        default=DEFAULT_DISCOUNT,
        help=f"price of a cached token relative to a fresh one (default {DEFAULT_DISCOUNT:g})",
    )
    from ctxpolicy.cli_args import add_input, add_runs

    add_input(parser, "calls JSONL, or a run directory (default: stdin)")
    add_runs(parser, "run folders: price every complete run side by side", required=False)
    parser.add_argument("--json", action="store_true", help="one JSON object, full precision, instead of a table")


class CallsError(ValueError):
    pass


def read_calls(lines, source: str, need_tokens: bool = True) -> list[dict]:
    import json

    from ctxpolicy.rundir import CALL_KINDS, RunRecordError, with_prompts

    parsed = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}: line {number}"
        try:
            call = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CallsError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(call, dict):
            raise CallsError(f"{where}: not a JSON object")
        parsed.append((where, call))
    try:  # version-2 prompts -> message_ids (ctxpolicy.rundir, the one reader)
        resolved = with_prompts([call for _, call in parsed], source)
    except RunRecordError as exc:
        raise CallsError(str(exc)) from None
    calls = []
    for (where, _), call in zip(parsed, resolved):
        if call.get("kind") not in CALL_KINDS:
            raise CallsError(f"{where}: field kind is {call.get('kind')!r}, not 'agent' or 'summary'")
        if not isinstance(call.get("prompt_tokens"), int) or call["prompt_tokens"] < 0:
            raise CallsError(f"{where}: field prompt_tokens is {call.get('prompt_tokens')!r}, not an int >= 0")
        ids, tokens = call.get("message_ids"), call.get("message_tokens")
        if not need_tokens and tokens is None:
            pass
        elif (ids is None) != (tokens is None) or (ids is not None and len(ids) != len(tokens)):
            raise CallsError(f"{where}: fields message_ids and message_tokens must come together, same length")
        if call.get("events") is not None and not isinstance(call["events"], list):
            raise CallsError(f"{where}: field events is {call['events']!r}, not a list")
        cached = call.get("cached_tokens")
        if cached is not None and (not isinstance(cached, int) or cached < 0):
            raise CallsError(f"{where}: field cached_tokens is {cached!r}, not an int >= 0")
        calls.append(call)
    return calls


def with_message_tokens(calls: list[dict], run: Path) -> list[dict]:
    """Fill each call's missing ``message_tokens`` from a run directory's message store
    (``messages.jsonl``: one ``{"id", "tokens", "message"}`` line per distinct message; a replay's
    source store too)."""
    import itertools
    import json

    from ctxpolicy.rundir import RunRecordError, message_store_files, read_jsonl

    tokens: dict[str, int] = {}
    try:
        files = message_store_files(run)
    except RunRecordError as exc:
        raise CallsError(str(exc)) from None
    store = files[0]
    for path in files:
        entries = read_jsonl(path)
        for number in itertools.count(1):  # the n-th entry (blank lines skipped)
            try:
                entry = next(entries)
                tokens[entry["id"]] = int(entry["tokens"])
            except StopIteration:
                break
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise CallsError(f"{path}: line {number}: not a message entry with id and tokens") from None
    for call in calls:
        ids = call.get("message_ids")
        if ids is not None and call.get("message_tokens") is None:
            missing = [i for i in ids if i not in tokens]
            if missing:
                raise CallsError(f"{store}: message {missing[0]!r} of call {call.get('index')} is not in the store")
            call["message_tokens"] = [tokens[i] for i in ids]
    return calls


def price(calls: list[dict], block: int, discount: float, source=None) -> dict:
    """One run's bill under every cost method (``cost_methods.TABLE``; None where a method needs
    what the calls lack), with the block and discount."""
    import numpy as np

    from ctxpolicy.metrics import cost_methods
    from ctxpolicy.metrics.cost import billed
    from ctxpolicy.metrics.cost_methods.base import Sequences, run_calls_of

    agent = [c for c in calls if c["kind"] == "agent"]
    summary = sum(c["prompt_tokens"] for c in calls if c["kind"] == "summary")
    sequences = None
    if all(c.get("message_ids") is not None for c in agent):
        codes: dict[str, int] = {}
        sequences = Sequences.of(
            [np.array([codes.setdefault(i, len(codes)) for i in c["message_ids"]], dtype=np.int64) for c in agent],
            [np.array(c["message_tokens"], dtype=np.int64) for c in agent],
        )
    run_calls = run_calls_of(agent, sequences, source)
    result: dict = {}
    for method in cost_methods.methods():
        counts = method.counts(run_calls, block) if agent or not (method.needs or method.call_column) else None
        result[method.name] = (
            None
            if counts is None
            else billed(
                run_calls.prompts,
                counts.cached,
                summary,
                discount,
                written=counts.written,
                write_premium=method.write_premium,
            ).as_dict()
        )
    return {**result, "block": block, "discount": discount}


def _source(run_dir: Path):
    """A replay's source calls for the measured profile (None: the run is its own source)."""
    from ctxpolicy.metrics.records import RecordError, source_calls
    from ctxpolicy.rundir import message_base

    if message_base(run_dir) is None:
        return None
    try:
        return source_calls(run_dir)
    except RecordError as exc:
        raise CallsError(str(exc)) from None


def _run_calls(source: Path) -> list[dict]:
    """The calls of one ``calls.jsonl`` (either schema version), with message tokens from its run's
    store where it has one."""
    from ctxpolicy.rundir import MESSAGES_JSONL, read_bytes

    lines = read_bytes(source).decode("utf-8").splitlines()
    if (source.parent / MESSAGES_JSONL).is_file():
        return with_message_tokens(read_calls(lines, str(source), need_tokens=False), source.parent)
    return read_calls(lines, str(source))


def side_by_side(run_dirs: list[Path], block: int, discount: float) -> tuple[list[dict], list[dict], list[str]]:
    """(one row per run, one row per policy, warnings): billed input by each method."""
    from ctxpolicy.metrics.cost import disagreements
    from ctxpolicy.metrics.cost_methods import names
    from ctxpolicy.rundir import CALLS_JSONL, read_run_json

    METHODS = names()

    rows, warnings = [], []
    for run_dir in run_dirs:
        identity = read_run_json(run_dir).get("identity") or {}
        try:
            result = price(_run_calls(run_dir / CALLS_JSONL), block, discount, _source(run_dir))
        except ValueError as exc:
            raise CallsError(f"{run_dir}: {exc}") from None
        billed = {m: (result[m] or {}).get("billed_input") for m in METHODS}
        rows.append({"run": str(run_dir), "policy": identity.get("policy"), "track": identity.get("track"), **billed})
        warnings += [f"{run_dir}: {line}" for line in disagreements(compared(billed))]
    policies: dict = {}
    for row in rows:
        entry = policies.setdefault(row["policy"], {"policy": row["policy"], "runs": 0, **dict.fromkeys(METHODS, 0.0)})
        entry["runs"] += 1
        for method in METHODS:
            entry[method] = None if entry[method] is None or row[method] is None else entry[method] + row[method]
    for entry in policies.values():
        warnings += [
            f"policy {entry['policy']} (sum of {entry['runs']} runs): {line}" for line in disagreements(compared(entry))
        ]
    return rows, list(policies.values()), warnings


def _main_runs(args) -> int:
    import json

    from ctxpolicy.rundir import find_run_dirs, is_complete_run

    try:
        run_dirs = [d for d in find_run_dirs(args.runs) if is_complete_run(d)]
        rows, policies, warnings = side_by_side(run_dirs, args.block, args.discount)
    except (CallsError, OSError, ValueError) as exc:
        print(f"cost: {exc}", file=sys.stderr)
        return 2
    for line in warnings:
        print(f"cost: warning: {line}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps({"runs": rows, "policies": policies, "block": args.block, "discount": args.discount}))
        return 0
    from ctxpolicy.metrics.cost_methods import names

    shown = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
    line = lambda name, values: f"{name:<48} " + " ".join(f"{shown(values[m]):>12}" for m in names())  # noqa: E731
    print(f"{'policy / run':<48} " + " ".join(f"{m:>12}" for m in names()))
    for entry in policies:
        print(line(str(entry["policy"]), entry))
        for row in (r for r in rows if r["policy"] == entry["policy"]):
            print(line("  " + Path(row["run"]).name, row))
    return 0


def main(args) -> int:
    import json

    from ctxpolicy.cli_args import TooManyValuesError, single
    from ctxpolicy.metrics.cost import disagreements
    from ctxpolicy.rundir import CALLS_JSONL

    try:
        args.input = single(args.input, "--input")
    except TooManyValuesError as exc:
        print(f"cost: {exc}", file=sys.stderr)
        return 2

    if args.block < 1 or not 0 <= args.discount <= 1:
        print(
            f"cost: --block must be >= 1 and --discount in [0, 1]: got {args.block}, {args.discount}", file=sys.stderr
        )
        return 2
    if getattr(args, "runs", None):  # callers that build their own namespace may leave it out
        if args.input is not None:
            print("cost: -i and --runs go apart: one run's calls, or run folders", file=sys.stderr)
            return 2
        return _main_runs(args)
    try:
        if args.input is None:
            calls = read_calls(sys.stdin, "<stdin>")
        else:
            calls = _run_calls(args.input / CALLS_JSONL if args.input.is_dir() else args.input)
            source = _source(args.input) if args.input.is_dir() else None
    except (CallsError, OSError) as exc:
        print(f"cost: {exc}", file=sys.stderr)
        return 2
    try:
        result = price(calls, args.block, args.discount, source if args.input is not None else None)
    except ValueError as exc:  # a malformed event field, named by unchanged_prefix
        print(f"cost: {args.input or '<stdin>'}: {exc}", file=sys.stderr)
        return 2
    for line in disagreements(compared(result)):
        print(f"cost: warning: {args.input or '<stdin>'}: {line}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps(result))
    else:
        print(priced_table(result, str(args.input or "<stdin>")))
    return 0


def compared(result: dict) -> dict:
    """The billed input of the methods ``disagreements`` checks (the estimates and the measured
    reference), from one ``price`` result or a sum of them."""
    from ctxpolicy.metrics import cost_methods

    def value(entry):
        return entry.get("billed_input") if isinstance(entry, dict) else entry

    return {m.name: value(result.get(m.name)) for m in cost_methods.methods() if m.compared or m.name == "measured"}


def priced_table(result: dict, source: str) -> str:
    """One run's bill by each method, rounded for people (``--json`` keeps full precision)."""
    from ctxpolicy.metrics.cost_methods import names

    METHODS = names()

    lines = [
        f"{source}: billed input in tokens (cache block {result['block']} tokens, "
        f"a cached token at {result['discount']:g} of a fresh one; '-' = the method needs what the run lacks)",
        f"{'method':<10} {'billed input':>14} {'fresh':>12} {'cached':>12} {'summary input':>14}",
    ]
    for method in METHODS:
        bill = result[method]
        if bill is None:
            lines.append(f"{method:<10} {'-':>14} {'-':>12} {'-':>12} {'-':>14}")
        else:
            lines.append(
                f"{method:<10} {bill['billed_input']:>14,.1f} {bill['fresh']:>12,} {bill['cached']:>12,} "
                f"{bill['summary']:>14,}"
            )
    return "\n".join(lines)
