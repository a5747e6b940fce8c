"""Synthetic run directories that follow the run-record contract (docs/architecture.md).

They feed tests, the figure fixture, the metrics benchmark and the paper-shaped data set
(``ctxpolicy.testing.paper``), so the policies have effects every comparison can see:
compression keeps prompts under the threshold (with clearing, truncation and summary events,
the latter with their own summary calls), it adds reacquisition steps and retrieval commands,
long full-context runs run into the time limit more often, and each policy shifts the success
probability a little.

Token counts are declared, not counted: a message's text is a short stand-in (a command, the
paths and test names it touches, an error line) that the compression audit can read, while its
``tokens`` say how large it would be. Numbers come from one seeded generator per run and the
text from a second one, so a run's files depend only on ``seed`` and the run's identity, not on
the order or number of processes. Cell directories are named by ``ctxpolicy.study.grid.Cell.slug``
and policies read by ``ctxpolicy.policies.parse_spec``, as the real runs are.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from json.encoder import encode_basestring
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from ctxpolicy.atomic import atomic_write_text
from ctxpolicy.study.grid import Cell
from ctxpolicy.policies import PolicySpec, parse_spec
from ctxpolicy.policies.history import PLACEHOLDER, SUMMARY_MARKER
from ctxpolicy.rundir import CALLS_JSONL, MESSAGES_JSONL, RUN_JSON, VERDICT_JSON, PromptEncoder

DEFAULT_POLICIES = ("FC", "TR/Th/0.5", "TRC/Th", "SU/Th/0.5", "OTRC+TR/St+Th/0.5")
SETTING_SCALE = {"tight": 0.6, "primary": 0.8, "loose": 1.0}
HEAD = 2  # system prompt and task: no policy touches them

RETRIEVAL = [
    "cat {path}",
    "head -n 40 {path}",
    "grep -rn {symbol} {dir}",
    "ls -la {dir}",
    "sed -n 1,80p {path}",
    "git diff",
    "find . -name '{stem}*'",
    "tail -n 20 {log}",
]
EXECUTION = [
    "python -m pytest -q {test}",
    "python {script}",
    "sed -i 's/old/new/' {path}",
    "pip install {package}",
    "cat > {path} <<'EOF'\nprint(1)\nEOF",
    "make {stem}",
]
SUCCESS_SHIFT = {"FC": 0.0, "TR": -0.06, "TRC": -0.02, "OTRC": -0.03, "SU": -0.08, "S-p": -0.05}


@dataclass(frozen=True)
class Profile:
    """How the runs of one (benchmark, model) look; the defaults are the generic small runs."""

    system_tokens: int = 380
    task_tokens: tuple[float, float] = (300.0, 400.0)  # base + scale x task length
    observation_tokens: tuple[float, float] = (5.0, 0.7)  # lognormal mean and sigma (log tokens)
    completion_tokens: tuple[int, int] = (40, 220)
    latency: tuple[float, float, float, float] = (0.3, 0.00012, 0.0003, 0.01)  # s, per fresh/cached/out token
    summary_latency: tuple[float, float] = (0.4, 0.00012)  # s, per summarizer input token
    command_s: float = 0.8  # mean command execution time
    prefix_caching: bool = True  # False: the server reports no cached tokens
    length_factor: Mapping[str, float] = field(default_factory=dict)  # primitive (or first stage) -> steps
    compressed_length: float = 1.12  # steps factor of other compressing policies
    length_spread: float = 1.0  # steps grow with task length ** spread
    loop_share: Mapping[str, float] = field(default_factory=dict)  # primitive -> runs looping to the step limit
    retrieval_share: tuple[float, float] = (0.38, 0.12)  # FC share, extra under compression
    success_shift: float = 0.0  # the model's ability, added to every task's
    policy_shift: Mapping[str, float] = field(default_factory=lambda: dict(SUCCESS_SHIFT))
    step_every: int = 8  # a St trigger fires every N steps ...
    otrc_one_per_step: bool = False  # ... or, as OTRC does, one result per step


GENERIC = Profile()


@dataclass(frozen=True)
class RunSpec:
    run_dir: Path
    benchmark: str
    model: str
    policy: str
    setting: str | None
    threshold: int | None
    task_id: str
    task_index: int
    attempt: int
    calls_per_run: float
    seed: int
    step_limit: int
    wall_limit_s: float | None
    cohort: str = "main"
    track: str = "full"
    stratum: str | None = None
    summarizer: str | None = None
    model_name: str | None = None
    profile: Profile = GENERIC
    versions: Mapping | None = None
    # edge shapes of a real study (the paper-shaped data set sets them; docs/synthetic.md)
    harness_timeouts: float = 0.0  # share of submitted runs a harness stops for time (report.failure_mode)
    unsolvable: bool = False  # a task no policy solves
    calls_version: int = 1  # calls.jsonl's schema version: 1 (whole prompts) or 2 (encoded, as every writer writes)


def canonical(role: str, content: str) -> str:
    """The message ``{"role", "content"}`` as canonical JSON (``json.dumps(message,
    sort_keys=True, ensure_ascii=False, separators=(",", ":"))``), its two strings encoded as
    json.dumps does without setting up an encoder for each message."""
    return f'{{"content":{encode_basestring(content)},"role":{encode_basestring(role)}}}'


def message_id(canonical_json: str) -> str:
    return hashlib.sha256(canonical_json.encode()).hexdigest()[:16]


def cell_slug(
    benchmark: str,
    model: str,
    policy: str,
    setting: str | None,
    *,
    track: str = "full",
    cohort: str = "main",
    summarizer: str | None = None,
) -> tuple[str, str | None]:
    """The grid's cell slug of a policy and setting, and the setting the cell keeps (None for
    policies without a threshold, as ``ctxpolicy.study.grid.expand_grid`` does)."""
    spec = parse_spec(policy)
    kept = setting if spec.needs_threshold else None
    return Cell(track, benchmark, model, str(spec), kept, cohort, summarizer).slug, kept


def make_runs(
    root: Path,
    *,
    models: Sequence[str] = ("qwen05b",),
    benchmarks: Sequence[str] = ("local",),
    policies: Sequence[str] = DEFAULT_POLICIES,
    settings: Sequence[str | None] = ("primary",),
    tasks: int | Sequence[str] = 20,
    attempts: int = 3,
    calls_per_run: int = 20,
    seed: int = 0,
    processes: int = 1,
    progress: bool = False,
    calls_version: int = 1,
) -> list[Path]:
    """Write synthetic run directories under ``root`` and return them.

    Layout: ``root/{benchmark}/{model}/{cell slug}/{task_id}__a{attempt}/``. A policy with a
    threshold gets one cell per setting, any other policy (FC, ``OTRC/St``) one cell.
    ``tasks`` is a count or a list of task ids; ``processes`` > 1 writes in parallel with
    identical output. ``calls_version`` 2 writes calls.jsonl (and run.json's ``schema_version``)
    as every writer of ours does (``rundir.PromptEncoder``); 1, the default, whole prompts.
    """
    if calls_version not in (1, 2):
        raise ValueError(f"calls_version is {calls_version!r}: 1 or 2")
    root = Path(root)
    task_ids = [f"task-{i:04d}" for i in range(tasks)] if isinstance(tasks, int) else list(tasks)
    specs = list(_run_specs(root, models, benchmarks, policies, settings, task_ids, attempts, calls_per_run, seed))
    if calls_version != 1:
        specs = [replace(spec, calls_version=calls_version) for spec in specs]
    write_runs(specs, processes=processes, progress=progress)
    return [s.run_dir for s in specs]


def write_runs(specs: Sequence[RunSpec], *, processes: int = 1, progress: bool = False) -> None:
    """Write every run of ``specs``; the files do not depend on ``processes``."""
    for cell_dir in {s.run_dir.parent for s in specs}:
        cell_dir.mkdir(parents=True, exist_ok=True)
    if processes > 1:
        with ProcessPoolExecutor(processes) as pool:
            _drain(pool.map(write_run, specs, chunksize=64), len(specs), progress)
    else:
        _drain(map(write_run, specs), len(specs), progress)


def _drain(results: Iterable, total: int, progress: bool) -> None:
    from tqdm import tqdm

    for _ in tqdm(results, total=total, disable=not progress, desc="synthetic runs", unit="run"):
        pass


def _run_specs(root, models, benchmarks, policies, settings, task_ids, attempts, calls_per_run, seed):
    for benchmark in benchmarks:
        for model in models:
            fc_peak = 260 * calls_per_run + 900  # typical full-context peak in this generator
            seen = set()
            for policy in policies:
                for setting in settings:
                    slug, kept = cell_slug(benchmark, model, policy, setting)
                    if slug in seen:
                        continue
                    seen.add(slug)
                    threshold = None if kept is None else int(round(fc_peak * SETTING_SCALE.get(kept, 0.8) * 0.5, -2))
                    for t, task_id in enumerate(task_ids):
                        for attempt in range(1, attempts + 1):
                            yield RunSpec(
                                root / benchmark / model / slug / f"{task_id}__a{attempt}",
                                benchmark,
                                model,
                                policy,
                                kept,
                                threshold,
                                task_id,
                                t,
                                attempt,
                                calls_per_run,
                                seed,
                                step_limit=int(calls_per_run * 1.6) + 2,
                                wall_limit_s=_wall_limit(calls_per_run),
                            )


def _wall_limit(calls_per_run: float) -> float:
    """About 1.5 times the expected wall time of a full-context run of average length."""
    n = calls_per_run
    return round(1.5 * (2.45 * n + 0.0003 * (1000 * n + 160 * n * n)), 1)


def _key(spec: RunSpec, *parts) -> bytes:
    return "|".join(
        str(p)
        for p in (spec.seed, spec.benchmark, spec.model, spec.policy, spec.setting, spec.task_id, spec.attempt, *parts)
    ).encode()


def _fraction(spec: RunSpec, what: str) -> float:
    """A draw in [0, 1) of its own (it leaves the run's random stream as it is)."""
    return zlib.crc32(_key(spec, spec.summarizer, what)) / 2**32


def _rng(spec: RunSpec) -> np.random.Generator:
    key = _key(spec) if spec.summarizer is None else _key(spec, spec.summarizer)
    return np.random.default_rng(zlib.crc32(key) + (spec.seed << 32))


def _task_params(spec: RunSpec) -> tuple[float, float]:
    """Per-task difficulty and length, shared by every policy (that is what makes pairing work)."""
    r = np.random.default_rng([spec.seed, zlib.crc32(f"{spec.benchmark}|{spec.task_id}".encode())])
    return float(r.beta(2.0, 1.6)), float(r.lognormal(0.0, 0.25))


class _Store:
    """Content-addressed message store of one run, written as messages.jsonl."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.tokens: dict[str, int] = {}
        self.facts: dict[str, list[str]] = {}  # anchors a summary of the message may repeat

    def add(self, role: str, content: str, tokens: int, facts: Sequence[str] = ()) -> str:
        text = canonical(role, content)
        mid = message_id(text)
        if mid not in self.tokens:
            self.tokens[mid] = tokens
            self.facts[mid] = list(facts)
            self.lines.append(f'{{"id":"{mid}","tokens":{tokens},"message":{text}}}\n')
        return mid


class _Text:
    """The words of one run: a small repository of files, tests and errors the agent works on."""

    PACKAGES = ("core", "utils", "io", "models", "parsers", "cli")
    ERRORS = (
        "AttributeError: 'NoneType' object has no attribute '{sym}'",
        "TypeError: {sym}() got an unexpected keyword argument 'strict'",
        "ValueError: invalid literal for int() with base 10: '{sym}'",
        "KeyError: '{sym}'",
        "AssertionError: expected 3, got 4",
    )
    RULES = (
        "You must not modify the existing tests.",
        "Only change files under the package directory.",
        "Never commit generated files.",
        "Do not add new dependencies.",
    )

    def __init__(self, spec: RunSpec) -> None:
        self.rng = np.random.default_rng(zlib.crc32(_key(spec, "text")))
        task = np.random.default_rng(zlib.crc32(f"{spec.benchmark}|{spec.task_id}|files".encode()))
        root = f"pkg{int(task.integers(1, 9))}"
        self.root = root
        self.files = [f"{root}/{self.PACKAGES[int(task.integers(len(self.PACKAGES)))]}/mod{k}.py" for k in range(5)]
        self.symbols = [f"handle_{w}" for w in ("request", "value", "path", "token", "cache")]

    def _pick(self, items: Sequence[str]) -> str:
        return items[int(self.rng.integers(len(items)))]

    def task(self, task_id: str) -> str:
        return (
            f"Task {task_id}: the function {self.symbols[0]} in {self.files[0]} returns the wrong value "
            f"when called twice. Fix it. {self._pick(self.RULES)}"
        )

    def command(self, template: str) -> tuple[str, list[str]]:
        path = self._pick(self.files)
        stem = path.rsplit("/", 1)[1][:-3]
        test = f"tests/test_{stem}.py::test_{self._pick(self.symbols)}"
        values = {
            "path": path,
            "dir": path.rsplit("/", 1)[0],
            "stem": stem,
            "symbol": self._pick(self.symbols),
            "log": "build.log",
            "test": test,
            "script": f"scripts/run_{stem}.py",
            "package": "six",
        }
        command = template.format(**values)
        return command, [path] if "{path}" in template else [test] if "{test}" in template else []

    def output(self, command: str, step: int) -> tuple[str, list[str]]:
        sym = self._pick(self.symbols)
        path = self._pick(self.files)
        lines = [f"<returncode>{int(self.rng.integers(0, 2))}</returncode>", f'<output step="{step}">']
        facts = [path]
        if "pytest" in command:
            test = command.split()[-1]
            error = self._pick(self.ERRORS).format(sym=sym)
            lines += [
                f"{test} FAILED",
                f"E   {error}",
                f"{path}:{int(self.rng.integers(10, 400))}: in {sym}",
                f"1 failed, {int(self.rng.integers(1, 30))} passed",
            ]
            facts += [test, error]
        elif command.startswith(("cat", "head", "sed -n")):
            lines += [
                f"def {sym}(self, value):",
                f"    return self._{sym}(value)  # line {int(self.rng.integers(5, 300))}",
            ]
            facts.append(sym)
        elif command.startswith("grep"):
            lines += [f"{p}:{int(self.rng.integers(1, 300))}: {sym}(" for p in self.files[:3]]
        else:
            lines.append(f"{path} updated")
        if self.rng.random() < 0.08:
            lines.append(self._pick(self.RULES))
        lines.append("</output>")
        return "\n".join(lines), facts

    def summary(self, facts: Sequence[str], step: int) -> str:
        draws = self.rng.random(len(facts))  # one draw per fact, in order, as many single draws give
        chosen = sorted({f for f, u in zip(facts, draws) if u < 0.5})
        body = "; ".join(chosen) if chosen else "no details kept"
        return f"{SUMMARY_MARKER} Progress before step {step}: worked on {body}."


def _first_stage(spec: PolicySpec) -> str:
    return spec.stages[0]


def write_run(spec: RunSpec) -> Path:
    rng = _rng(spec)
    pol = parse_spec(spec.policy)
    prof = spec.profile
    text = _Text(spec)
    p_task, length = _task_params(spec)
    store = _Store()
    history = [
        store.add("system", "You are a careful software agent. Reply with one bash block.", prof.system_tokens),
        store.add("user", text.task(spec.task_id), int(prof.task_tokens[0] + prof.task_tokens[1] * length)),
    ]

    compresses = not pol.is_fc
    factor = (
        prof.length_factor.get(pol.primitive, prof.length_factor.get(_first_stage(pol), prof.compressed_length))
        if compresses
        else 1.0
    )
    base_steps = spec.calls_per_run * length**prof.length_spread * factor
    step_limit = spec.step_limit
    planned = int(np.clip(rng.poisson(base_steps), 2, step_limit))
    looping = prof.loop_share.get(pol.primitive, 0.0) > np.random.default_rng(zlib.crc32(_key(spec, "loop"))).random()
    if looping:  # an agent repeating quick commands: it meets the step limit before the clock
        planned = step_limit
    p_retrieval = prof.retrieval_share[0] + (prof.retrieval_share[1] if compresses else 0.0)
    t = 1_764_430_000.0 + 1000.0 * spec.task_index + 100_000.0 * spec.attempt
    start, calls, n_events_total, peak, fmt_errors = t, [], 0, 0, 0
    summary_calls = 0
    time_limited = False
    summarizer_name = f"synthetic-{spec.summarizer}" if spec.summarizer else None

    size = _history_tokens(history, store)
    sums = {"prompt": 0, "completion": 0, "cached": 0}
    for step in range(1, planned + 1):
        events: list[dict] = []
        est_before = size
        if compresses and _should_fire(pol, prof, spec.threshold, size, step):
            history, events, summary = _compress(pol, prof, spec.threshold, history, store, rng, text, step)
            size = _history_tokens(history, store)
            if summary is not None:
                summary_ids, summary_prompt = summary
                lat = prof.summary_latency[0] + summary_prompt * prof.summary_latency[1]
                completion = int(rng.integers(120, 400))
                calls.append(
                    _call_line(
                        len(calls),
                        "summary",
                        step,
                        t,
                        lat,
                        summary_prompt,
                        completion,
                        None,
                        est_before,
                        est_before,
                        summary_ids,
                        [],
                        summarizer_name,
                    )
                )
                sums["prompt"] += summary_prompt
                sums["completion"] += completion
                t += lat
                summary_calls += 1
        prompt = int(size * 1.03) + 4 * len(history) + 3
        if not prof.prefix_caching:
            cached = None
        else:
            cached = 0 if not calls else _server_cached(size - sum(store.tokens[m] for m in history[-2:]), rng)
        peak = max(peak, prompt)
        completion = int(rng.integers(*prof.completion_tokens))
        a, fresh_s, cached_s, out_s = prof.latency
        lat = a + fresh_s * (prompt - (cached or 0)) + cached_s * (cached or 0) + completion * out_s
        calls.append(
            _call_line(
                len(calls), "agent", step, t, lat, prompt, completion, cached, est_before, size, history, events, None
            )
        )
        sums["prompt"] += prompt
        sums["completion"] += completion
        sums["cached"] += cached or 0
        n_events_total += len(events)
        t += lat + float(rng.exponential(prof.command_s))  # command execution
        if spec.wall_limit_s is not None and t - start > spec.wall_limit_s and not looping:
            time_limited = True
            break
        command, command_facts = _command(rng, text, p_retrieval)
        observation_tokens = int(rng.lognormal(*prof.observation_tokens))
        output, output_facts = text.output(command, step)
        history = history + [
            store.add(
                "assistant",
                f"THOUGHT: step {step}: next I run this.\n\n```mswea_bash_command\n{command}\n```",
                completion,
                [f"`{command}`", *command_facts],
            ),
            store.add("user", output, observation_tokens, output_facts),
        ]
        size += completion + observation_tokens
        if rng.random() < 0.01:
            fmt_errors += 1

    outcome = "time_limit" if time_limited else "step_limit" if planned >= step_limit else "submitted"
    if outcome == "submitted" and rng.random() < 0.02:
        outcome = "error"
    shift = prof.policy_shift.get(pol.primitive, prof.policy_shift.get(_first_stage(pol), -0.04))
    p_success = np.clip(p_task + prof.success_shift + shift, 0, 1)
    resolved = outcome == "submitted" and rng.random() < p_success and not spec.unsolvable
    report = {}
    if outcome == "submitted" and _fraction(spec, "harness-timeout") < spec.harness_timeouts:
        # Terminal-Bench's harness stopped it at the task's timeout after the agent had submitted:
        # time-limited for resource comparisons whatever the verdict (metrics.outcomes)
        report = {"failure_mode": "agent_timeout"}

    run_dir = spec.run_dir
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MESSAGES_JSONL).write_text("".join(store.lines))
    (run_dir / CALLS_JSONL).write_text("".join(calls) if spec.calls_version == 1 else _encoded(calls))
    agent_calls = len(calls) - summary_calls
    totals = {
        "steps": agent_calls,
        "agent_calls": agent_calls,
        "summary_calls": summary_calls,
        "prompt_tokens": sums["prompt"],
        "completion_tokens": sums["completion"],
        "cached_tokens": sums["cached"] if prof.prefix_caching else None,
        "compression_events": n_events_total,
        "format_errors": fmt_errors,
        "peak_prompt_tokens": peak,
    }
    record = _run_record(spec, pol, outcome, start, t, totals)
    if rng.random() > 0.01:  # a few runs stay ungraded, as in real studies
        atomic_write_text(
            run_dir / VERDICT_JSON,
            json.dumps({"resolved": bool(resolved), "harness": "synthetic", "report": report, "log": ""}),
            durable=False,
        )
    atomic_write_text(run_dir / RUN_JSON, json.dumps(record), durable=False)
    return run_dir


def _history_tokens(history: list[str], store: _Store) -> int:
    return sum(map(store.tokens.__getitem__, history))


def _should_fire(pol: PolicySpec, prof: Profile, threshold: int | None, tokens: int, step: int) -> bool:
    over = threshold is not None and tokens > threshold
    if pol.trigger and pol.trigger.startswith("St"):
        if prof.otrc_one_per_step:
            return True
        return step % prof.step_every == 0 and (over or "+" not in pol.trigger)
    return over


def _compress(
    pol: PolicySpec,
    prof: Profile,
    threshold: int | None,
    history: list[str],
    store: _Store,
    rng: np.random.Generator,
    text: _Text,
    step: int,
):
    events, summary = [], None
    over = threshold is not None and _history_tokens(history, store) > threshold
    for primitive in pol.stages:
        if prof.otrc_one_per_step and primitive in pol.threshold_stages and not over:
            continue  # OTRC clears before every call; the rest of an St+Th stack waits for the threshold
        original, before = history, _history_tokens(history, store)
        target_depth = pol.depth if pol.depth is not None else 1.0
        window = history[HEAD:-2] if len(history) > HEAD + 2 else []
        if not window:
            continue
        cut = max(1, int(len(window) * target_depth))
        removed = cleared = summary_tokens = 0
        if primitive in ("TRC", "OTRC"):
            targets = [i for i, m in enumerate(history[:-2]) if i >= HEAD and i % 2 == 1 and store.tokens[m] > 20]
            if primitive == "OTRC" and prof.otrc_one_per_step:
                targets = targets[-1:] if len(history) >= 10 and len(targets) > 3 else []
            if not targets:
                continue
            first = targets[0]
            stub = store.add("user", PLACEHOLDER, 12)
            chosen = set(targets)
            history = [stub if i in chosen else m for i, m in enumerate(history)]
            cleared = len(targets)
        elif primitive in ("SU", "S", "SU-p", "S-p"):
            first = HEAD
            summarized = window[:cut]
            summary_tokens = int(rng.integers(150, 400))
            request = [store.add("system", "Summarize the agent's progress.", 40)] + summarized
            summary = (request, _history_tokens(request, store) + 4 * len(request))
            facts = [f for m in summarized for f in store.facts.get(m, [])]
            history = (
                history[:HEAD]
                + [store.add("user", text.summary(facts, step), summary_tokens, facts)]
                + history[HEAD + cut :]
            )
            removed = cut
        else:  # truncation and anything unknown
            first = HEAD
            history = history[:HEAD] + history[HEAD + cut :]
            removed = cut
        after = _history_tokens(history, store)
        has_target = primitive not in ("OTRC", "CC")
        events.append(
            {
                "primitive": primitive,
                "trigger": _stage_trigger(pol, primitive),
                "depth": pol.depth if has_target else None,
                "window_tokens_before": before - _history_tokens(history[:HEAD], store),
                "window_tokens_after": after - _history_tokens(history[:HEAD], store),
                "total_tokens_before": before,
                "total_tokens_after": after,
                "target_tokens": int(threshold * (1 - target_depth)) if threshold and has_target else None,
                "messages_removed": removed,
                "messages_cleared": cleared,
                "summary_tokens": summary_tokens,
                "first_changed_index": first,
                "unchanged_prefix_tokens": _history_tokens(original[:first], store),
                "fallback": None,
            }
        )
    return history, events, summary


def _stage_trigger(pol: PolicySpec, primitive: str) -> str | None:
    if pol.trigger == "St+Th":
        return "St" if primitive in pol.step_stages else "Th"
    return pol.trigger


def _server_cached(previous_tokens: int, rng: np.random.Generator) -> int:
    """Server-side prefix hit: about the whole previous context, occasionally evicted."""
    if rng.random() < 0.03:
        return 0
    return int(rng.integers(0, 4)) * 16 + (previous_tokens // 16) * 16


def _command(rng: np.random.Generator, text: _Text, p_retrieval: float) -> tuple[str, list[str]]:
    pool = RETRIEVAL if rng.random() < p_retrieval else EXECUTION
    return text.command(pool[int(rng.integers(len(pool)))])


def _call_line(
    index, kind, step, start, latency, prompt, completion, cached, est_before, est_after, message_ids, events, model
) -> str:
    ids = '","'.join(message_ids)
    extra = "" if model is None else f',"model":"{model}"'
    return (
        f'{{"index":{index},"kind":"{kind}","step":{step},"start":{start:.3f},'
        f'"end":{start + latency:.3f},"latency_s":{latency:.3f},"status":"ok","error":null,'
        f'"prompt_tokens":{prompt},"completion_tokens":{completion},'
        f'"cached_tokens":{"null" if cached is None else cached},'
        f'"est_tokens_before":{est_before},"est_tokens_after":{est_after},'
        f'"message_ids":["{ids}"],"events":{_events_json(events)}{extra}}}\n'
    )


def _events_json(events: list[dict]) -> str:
    return json.dumps(events, separators=(",", ":")) if events else "[]"  # most calls compress nothing


def _setup_s(spec: RunSpec) -> float:
    """Seconds of preparation before the agent's start: an image build on the first attempt."""
    return 40.0 + spec.task_index % 7 if spec.attempt == 1 else 2.0


def _encoded(lines: list[str]) -> str:
    """Version-1 call lines as version 2 (``rundir.PromptEncoder``), compact as ``_call_line``'s."""
    encoder = PromptEncoder()
    return "".join(json.dumps(encoder.encode_line(json.loads(line)), separators=(",", ":")) + "\n" for line in lines)


def _run_record(spec: RunSpec, pol: PolicySpec, outcome: str, start: float, end: float, totals: dict) -> dict:
    versions = (
        dict(spec.versions) if spec.versions else {"ctxpolicy": "synthetic", "git_commit": None, "git_dirty": False}
    )
    return {
        "schema_version": spec.calls_version,
        "complete": True,
        "identity": {
            "benchmark": spec.benchmark,
            "cohort": spec.cohort,
            "task_id": spec.task_id,
            "stratum": spec.stratum or f"stratum-{spec.task_index % 3}",
            "model": spec.model,
            "policy": str(pol),
            "primitive": pol.primitive,
            "trigger": pol.trigger,
            "threshold_setting": spec.setting,
            "threshold_tokens": spec.threshold,
            "depth": pol.depth,
            "summarizer": spec.summarizer,
            "attempt": spec.attempt,
            "seed": spec.seed,
            "cell": spec.run_dir.parent.name,
            "track": spec.track,
        },
        "outcome": outcome,
        "error": "synthetic failure" if outcome == "error" else None,
        "submission": "diff --git a/x b/x\n" if outcome == "submitted" else None,
        # the workspace's preparation before the agent starts: the first attempt builds the image
        "timing": {
            "start": start - _setup_s(spec),
            "end": end,
            "wall_s": round(end - start + _setup_s(spec), 3),
            "setup_s": _setup_s(spec),
            "agent_s": round(end - start, 3),
        },
        "totals": totals,
        "settings": {
            "temperature": 0.2,
            "max_tokens": 512 if spec.versions is None else 4096,
            "step_limit": spec.step_limit,
            "wall_time_limit_s": spec.wall_limit_s,
            "command_timeout_s": 30 if spec.versions is None else 60,
            "format_error_limit": 3,
            "cache_block_tokens": 16,
        },
        "versions": versions,
        "trajectory_file": "trajectory.json",
    }
