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

With --runs (run folders, any depth) it prices every complete run instead and prints the billed
input under every cost method side by side, grouped by configuration (policy and threshold
setting; imported, replay and proxy runs tagged), each run named by its path below the folders'
common one (``--json``: one JSON object). ``--price MODEL`` adds dollars from litellm's price map;
where the calls carry the provider's own price, our dollars are printed against it, per run and
summed. Runs that do not count or cannot be priced (incomplete, unreadable, nested too deeply, an
open proxy conversation, calls or a store that cannot be read) are listed on stderr as "left out:
PATH: reason" (``--json``: ``left_out``) and the others priced. Where a method is more than 10 %
from the reference (measured where reported, else exact), or our dollars more than 0.5 % from the
provider's, one warning line per configuration goes to stderr (``--warnings``: every line).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ctxpolicy.errors import UsageError


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
    parser.add_argument(
        "--price",
        metavar="MODEL",
        default=None,
        help="a model of litellm's price map (e.g. gpt-4o): dollars beside the fresh-token units",
    )
    parser.add_argument(
        "--warnings",
        action="store_true",
        help="with --runs: every run's warning line, not one summary line per configuration",
    )


class CallsError(UsageError, ValueError):
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


def price(calls: list[dict], block: int, discount: float, source=None, card=None) -> dict:
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
    output = sum(c.get("completion_tokens") or 0 for c in calls)
    result: dict = {}
    for method in cost_methods.methods():
        counts = method.counts(run_calls, block) if agent or not (method.needs or method.call_column) else None
        if counts is None:
            result[method.name] = None
            continue
        bill = billed(
            run_calls.prompts,
            counts.cached,
            summary,
            discount,
            written=counts.written,
            write_premium=method.write_premium,
        )
        result[method.name] = bill.as_dict()
        if card is not None:  # summary input is fresh input; every call's output is output
            result[method.name]["dollars"] = card.breakdown(bill.fresh + summary, bill.cached, bill.written, output)
    result.update(block=block, discount=discount, output_tokens=output)
    if card is not None:
        result["price"] = card.model
    result.update(provider_bill(calls, card))
    return result


def provider_bill(calls: list[dict], card=None) -> dict:
    """The source's own price of the run (the calls' ``provider_cost_usd``, where every call has
    one), who set it (``price_source``: ``provider``, ``agent``, ``mixed``, or None where the
    lines do not say), and ours for the same calls: the reported prompt, cached and completion
    tokens priced by ``card`` (or each call's own ``model`` in litellm's map); None where unknown."""
    from ctxpolicy.metrics.prices import PriceError, price_card

    costs = [c.get("provider_cost_usd") for c in calls]
    if not calls or any(v is None for v in costs):
        return {"provider_usd": None, "our_usd": None, "price_source": None}
    sources = {c.get("price_source") for c in calls}
    source = None if None in sources else sources.pop() if len(sources) == 1 else "mixed"
    bill = {"provider_usd": sum(costs), "our_usd": None, "price_source": source}
    ours = 0.0
    for call in calls:
        try:
            own = card or price_card(str(call.get("model")))
        except PriceError:
            return bill
        prompt, cached = call.get("prompt_tokens") or 0, call.get("cached_tokens")
        if cached is None:
            return bill
        ours += own.dollars(prompt - cached, cached, 0, call.get("completion_tokens") or 0)
    return {**bill, "our_usd": ours}


PRICED_BY = {  # how a warning names the price a run is reconciled with (its calls' price_source)
    "provider": "the provider's bill",
    "agent": "the agent's own price (priced by the harness, not a bill)",
    "mixed": "the source's prices (the provider's bill and the agent's own)",
    None: "the source's price",
}


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


RECONCILE_MARGIN = 0.005
"""How far (relative) our dollars may be from the provider's own before ``cost --runs`` warns."""


def configuration(identity: dict) -> str:
    """A run's configuration as ``cost --runs`` groups it: the policy at its threshold setting,
    and the track where the run is not one of the study's own (imported, replay, proxy)."""
    label = str(identity.get("policy"))
    if identity.get("threshold_setting"):
        label += f" @ {identity['threshold_setting']}"
    elif identity.get("threshold_tokens") is not None:
        label += f" @ {identity['threshold_tokens']} tokens"
    track = identity.get("track")
    return f"{label} [{track}]" if track in ("imported", "replay", "proxy") else label


def _run_names(run_dirs: list[Path]) -> list[str]:
    """Each run's path below the folder all of them share: unambiguous, and short."""
    import os

    if not run_dirs:
        return []
    absolute = [os.path.abspath(d) for d in run_dirs]
    common = os.path.commonpath([os.path.dirname(d) for d in absolute]) if len(absolute) > 1 else None
    if common is None:
        return [
            Path(run_dirs[0]).name if len(Path(run_dirs[0]).parts) < 4 else str(Path(*Path(absolute[0]).parts[-4:]))
        ]
    return [os.path.relpath(d, common) for d in absolute]


def _gap(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None:
        return None
    return abs(ours - theirs) / theirs if theirs else (0.0 if ours == theirs else float("inf"))


def side_by_side(
    run_dirs: list[Path], block: int, discount: float, card=None, left_out: list | None = None
) -> tuple[list[dict], list[dict], dict[str, list[str]]]:
    """(one row per run, one row per configuration, warnings by configuration): billed input by
    each method, dollars where priced, and the provider's own bill where the calls carry it. A run
    that cannot be priced is appended to ``left_out`` (a ``rundir.LeftOut``) and the others priced;
    without ``left_out`` it raises ``CallsError`` naming it."""
    from ctxpolicy.metrics.cost import disagreements
    from ctxpolicy.metrics.cost_methods import names
    from ctxpolicy.rundir import CALLS_JSONL, LeftOut, RunRecordError, read_run_json

    METHODS = names()
    rows, warnings = [], {}
    for run_dir, name in zip(run_dirs, _run_names(run_dirs)):
        try:
            identity = read_run_json(run_dir).get("identity")
            identity = identity if isinstance(identity, dict) else {}
            result = price(_run_calls(run_dir / CALLS_JSONL), block, discount, _source(run_dir), card)
        except (ValueError, OSError, RecursionError) as exc:  # CallsError, RunRecordError, bad UTF-8 among them
            if isinstance(exc, RecursionError):
                reason = "nested too deeply to read"
            else:
                reason = exc.reason if isinstance(exc, RunRecordError) else str(exc)
            if left_out is None:
                raise CallsError(f"{run_dir}: {reason}") from None
            left_out.append(LeftOut(run_dir, reason))
            continue
        billed = {m: (result[m] or {}).get("billed_input") for m in METHODS}
        dollars = {m: ((result[m] or {}).get("dollars") or {}).get("total") for m in METHODS} if card else None
        group = configuration(identity)
        row = {
            "run": str(run_dir),
            "name": name,
            "configuration": group,
            "policy": identity.get("policy"),
            "setting": identity.get("threshold_setting"),
            "track": identity.get("track"),
            **billed,
            "dollars": dollars,
            "provider_usd": result["provider_usd"],
            "our_usd": result["our_usd"],
            "price_source": result["price_source"],
        }
        rows.append(row)
        lines = [f"{name}: {line}" for line in disagreements(compared(billed))]
        gap = _gap(row["our_usd"], row["provider_usd"])
        if gap is not None and gap > RECONCILE_MARGIN:
            lines.append(
                f"{name}: our ${row['our_usd']:,.4f} is {gap:.2%} from {PRICED_BY[row['price_source']]}, "
                f"${row['provider_usd']:,.4f} (more than {RECONCILE_MARGIN:.1%})"
            )
        warnings.setdefault(group, []).extend(lines)
    groups: dict = {}
    for row in rows:
        entry = groups.setdefault(
            row["configuration"],
            {
                "configuration": row["configuration"],
                "policy": row["policy"],
                "setting": row["setting"],
                "track": row["track"],
                "runs": 0,
                **dict.fromkeys(METHODS, 0.0),
                "provider_usd": 0.0,
                "our_usd": 0.0,
            },
        )
        entry["runs"] += 1
        for key in (*METHODS, "provider_usd", "our_usd"):
            entry[key] = None if entry[key] is None or row[key] is None else entry[key] + row[key]
        if card:
            entry.setdefault("dollars", dict.fromkeys(METHODS, 0.0))
            for m in METHODS:
                old, new = entry["dollars"][m], row["dollars"][m]
                entry["dollars"][m] = None if old is None or new is None else old + new
    for entry in groups.values():
        sums = f"the sum of its {entry['runs']} runs"
        lines = [f"{sums}: {line}" for line in disagreements(compared(entry))]
        gap = _gap(entry["our_usd"], entry["provider_usd"])
        if gap is not None and gap > RECONCILE_MARGIN:
            lines.append(f"{sums}: our dollars are {gap:.2%} from the source's (more than {RECONCILE_MARGIN:.1%})")
        warnings.setdefault(entry["configuration"], []).extend(lines)
    return rows, list(groups.values()), {k: v for k, v in warnings.items() if v}


def _summary_line(group: str, lines: list[str], runs: int) -> str:
    per_run = [line for line in lines if not line.startswith("the sum of")]
    named = {line.split(":", 1)[0] for line in per_run}
    total = "; its sum too" if len(per_run) < len(lines) else ""
    return (
        f"{group}: {len(named)} of {runs} runs have a bill off its reference{total} "
        f"({len(lines)} warnings; --warnings lists them)"
    )


def _main_runs(args) -> int:
    import json

    from ctxpolicy.metrics.cost_methods import names
    from ctxpolicy.rundir import read_tree

    try:  # the one reader of a run tree: complete runs, and the rest left out by path and reason
        card = _card(args)
        tree = read_tree(args.runs)
        rows, groups, warnings = side_by_side(tree.runs, args.block, args.discount, card, tree.left_out)
    except (OSError, ValueError) as exc:  # CallsError among them
        raise CallsError(str(exc)) from None
    for problem in tree.left_out:
        print(f"cost: left out: {problem}", file=sys.stderr)
    counts = {g["configuration"]: g["runs"] for g in groups}
    for group, lines in warnings.items():
        if getattr(args, "warnings", False):
            for line in lines:
                print(f"cost: warning: {group}: {line}", file=sys.stderr)
        else:
            print(f"cost: warning: {_summary_line(group, lines, counts[group])}", file=sys.stderr)
    if getattr(args, "json", False):
        left = [{"run": str(p.path), "reason": p.reason} for p in tree.left_out]
        out = {"runs": rows, "configurations": groups, "left_out": left, "block": args.block, "discount": args.discount}
        print(json.dumps({**out, "price": card.model if card else None, "warnings": warnings}))
        return 0
    shown = lambda v: "-" if v is None else f"{v:,.1f}"  # noqa: E731
    usd = lambda v: "-" if v is None else f"${v:,.4f}"  # noqa: E731
    billed_by_provider = any(r["provider_usd"] is not None for r in rows)
    width = max(
        [len("configuration / run"), *(len(g["configuration"]) for g in groups), *(len(r["name"]) + 2 for r in rows)]
    )

    def line(name: str, values: dict) -> str:
        text = f"{name:<{width}} " + " ".join(f"{shown(values[m]):>16}" for m in names())
        if card:
            text += " " + " ".join(f"{usd((values.get('dollars') or {}).get(m)):>12}" for m in names())
        if billed_by_provider:
            text += f" {usd(values['our_usd']):>12} {usd(values['provider_usd']):>12}"
        return text

    header = f"{'configuration / run':<{width}} " + " ".join(f"{m:>16}" for m in names())
    if card:
        header += " " + " ".join(f"{'$ ' + m[:10]:>12}" for m in names())
    if billed_by_provider:
        header += f" {'our $':>12} {'provider $':>12}"
    print(
        f"# billed input in fresh-token units (block {args.block}, discount {args.discount:g})"
        + (f"; dollars at {card.model}'s litellm prices" if card else "")
    )
    print(header)
    for entry in groups:
        print(line(entry["configuration"], entry))
        for row in (r for r in rows if r["configuration"] == entry["configuration"]):
            print(line("  " + row["name"], row))
    if billed_by_provider:
        for line in reconciliation(rows):
            print(line)
    return 0


def reconciliation(rows: list[dict]) -> list[str]:
    """The closing lines of ``cost --runs``: our dollars against the source's for all runs, then
    for the runs of each ``price_source`` apart where they differ (a bill reproduced is told
    from an agent's own price of the day)."""
    priced = [r for r in rows if r["our_usd"] is not None and r["provider_usd"] is not None]
    if not priced:
        return []

    def line(label: str, group: list[dict]) -> str:
        ours, theirs = sum(r["our_usd"] for r in group), sum(r["provider_usd"] for r in group)
        gap = _gap(ours, theirs)
        return f"# {label}: our ${ours:,.4f}, theirs ${theirs:,.4f} ({'-' if gap is None else f'{gap:.3%}'} apart)"

    lines = [line(f"all {len(priced)} priced runs", priced)]
    sources = sorted({r["price_source"] for r in priced}, key=str)
    if len(sources) > 1:
        for source in sources:
            group = [r for r in priced if r["price_source"] == source]
            lines.append(line(f"{len(group)} runs priced by {PRICED_BY[source]}", group))
    return lines


def _card(args):
    """The price card of ``--price`` (None without it); ``PriceError`` names close matches."""
    if not getattr(args, "price", None):
        return None
    from ctxpolicy.metrics.prices import price_card

    return price_card(args.price)


def main(args) -> int:
    import json

    from ctxpolicy.cli_args import single
    from ctxpolicy.metrics.cost import disagreements
    from ctxpolicy.rundir import CALLS_JSONL

    args.input = single(args.input, "--input")
    if args.block < 1 or not 0 <= args.discount <= 1:
        raise UsageError(f"--block must be >= 1 and --discount in [0, 1]: got {args.block}, {args.discount}")
    if getattr(args, "runs", None):  # callers that build their own namespace may leave it out
        if args.input is not None:
            raise UsageError("-i and --runs go apart: one run's calls, or run folders")
        return _main_runs(args)
    try:
        if args.input is None:
            calls = read_calls(sys.stdin, "<stdin>")
        else:
            calls = _run_calls(args.input / CALLS_JSONL if args.input.is_dir() else args.input)
            source = _source(args.input) if args.input.is_dir() else None
    except OSError as exc:
        raise CallsError(str(exc)) from None
    try:
        card = _card(args)
        result = price(calls, args.block, args.discount, source if args.input is not None else None, card)
    except ValueError as exc:  # a malformed event field (named by unchanged_prefix), an unknown --price
        raise CallsError(f"{args.input or '<stdin>'}: {exc}") from None
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
        f"{'method':<16} {'billed input':>14} {'fresh':>12} {'cached':>12} {'summary input':>14}",
    ]
    for method in METHODS:
        bill = result[method]
        if bill is None:
            lines.append(f"{method:<16} {'-':>14} {'-':>12} {'-':>12} {'-':>14}")
        else:
            lines.append(
                f"{method:<16} {bill['billed_input']:>14,.1f} {bill['fresh']:>12,} {bill['cached']:>12,} "
                f"{bill['summary']:>14,}"
            )
    if result.get("price"):
        lines.append(f"dollars at {result['price']}'s litellm prices (output: {result['output_tokens']:,} tokens):")
        lines.append(
            f"{'method':<18} {'fresh input':>12} {'cached input':>12} {'cache writes':>12} {'output':>12} {'total':>12}"
        )
        for method in METHODS:
            d = (result[method] or {}).get("dollars")
            if d is None:
                lines.append(f"{method:<18} " + " ".join(f"{'-':>12}" for _ in range(5)))
            else:
                parts = ("fresh_input", "cached_input", "cache_writes", "output", "total")
                lines.append(f"{method:<18} " + " ".join(f"{'$' + format(d[k], ',.4f'):>12}" for k in parts))
    if result.get("provider_usd") is not None:
        ours = "-" if result["our_usd"] is None else f"${result['our_usd']:,.4f}"
        lines.append(
            f"{PRICED_BY[result.get('price_source')]}: ${result['provider_usd']:,.4f}; "
            f"its reported tokens at our prices: {ours}"
        )
    return "\n".join(lines)
