"""The P/T/D notation: parse and print policy specs such as ``TR/Th/0.5`` or ``OTRC+S-p/St+Th/0.5``.

A primitive is a chain of stages joined by ``+``, in this order:

* ``OTRC`` (optional, first; the step part of ``St`` and ``St+Th`` policies),
* the clearing and preparing stages ``TRC``, ``CT``, ``DUMP`` (optional, in this order),
* at most one final stage: ``TR``, ``SU``, ``S``, ``SU-p``, ``S-p``, ``DIGEST`` or ``CC``.

``FC`` (full context) stands alone and never compresses.

A TRC stack with a summary (``TRC+S-p/Th/0.7``, ``TRC+S/Th/1.0``) takes a depth D in (0, 1]: the
fraction of the window removed after both stages, as the study's Table 2 defines it; D = 1 keeps
nothing of the window verbatim and gives the summary the minimum allowance. Written without a
depth (or with the canonical 0.5) it is today's ``TRC+SU/Th`` and keeps its name and cell slug.
These stacks stay depth-invariant in the sweeps (``depth_tunable`` is False): the study runs them
once per threshold, and a depth other than 0.5 is for deployed-system analogues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ctxpolicy.errors import UsageError
from ctxpolicy.policies import stages

CANONICAL_DEPTH = 0.5
STUDY_DEPTHS = (0.3, 0.5, 0.7)

# The study's primitives, then the ones beyond it, by how depth applies to them.
DEPTH_TUNABLE = ("TR", "SU", "SU-p", "S", "S-p", "DIGEST")
DEPTH_INVARIANT = ("TRC", "TRC+SU", "TRC+S", "OTRC", "OTRC+TR", "OTRC+SU-p", "OTRC+S-p", "CC")
STUDY_PRIMITIVES = (
    "FC",
    "TR",
    "TRC",
    "SU",
    "S",
    "SU-p",
    "S-p",
    "TRC+SU",
    "TRC+S",
    "OTRC",
    "OTRC+TR",
    "OTRC+SU-p",
    "OTRC+S-p",
)

# The stages, their order and what each needs are the rows of ``policies.stages``.
STEP_STAGE = "OTRC"
FULL_DEPTH = 1.0
TRIGGERS = ("Th", "St", "St+Th")
TRIGGER_WORDS = {"Th": "threshold", "St": "step"}
# Beyond the study (The Complexity Trap's policies, docs/policies.md): a turn-count trigger
# ``TnN`` (fire once the window holds N agent turns; ``St+TnN`` with OTRC as its step part) and a
# keep-last-M parameter ``kM`` in the depth's place: OTRC keeps the last M tool results (every
# older one cleared), a partial summary the last M turns (every older one summarized).
TURN_PREFIX = "Tn"
KEEP_PREFIX = "k"


def valid_forms() -> str:
    """The valid forms of a spec, the stages' part written from the rows of ``policies.stages``."""
    step = stages.names("step")[0]
    preparing = stages.names("preparing")
    finals = [name for name in stages.names("final") if stages.STAGES[name].alone is None]
    alone = [f"{name}/{stages.STAGES[name].alone}" for name in stages.names("final") if stages.STAGES[name].alone]
    clearing = [f"{name}/Th|St" for name in stages.names("preparing", needs_summary=False)]
    preparers = " and ".join(stages.names("preparing", needs_summary=True))
    return (
        f"valid forms: FC | {step}/St | {step}+FINAL/St+Th[/D] | {' | '.join(alone)} | "
        f"{''.join(f'[{name}+]' for name in preparing)}FINAL/Th|St[/D] | {' | '.join(clearing)}, "
        f"where FINAL is one of {', '.join(finals)} ({preparers} need a summary: {', '.join(stages.names(summary=True))}), "
        "D is a depth in (0, 1) such as 0.3, 0.5, 0.7 (TRC alone and OTRC stacks accept only 0.5; "
        "a TRC stack with SU, S, SU-p or S-p accepts D in (0, 1], and a summary primitive alone accepts D = 1); "
        "examples: TR/Th/0.5, SU-p/Th/0.3, TRC/Th, TRC+S-p/Th/0.7, TRC+S/Th/1.0, OTRC+S-p/St+Th/0.5, OTRC/St, FC; "
        "keep-last-M forms: OTRC/St/kM (every tool result but the last M cleared), "
        "[OTRC+]SU-p|S-p/[St+]TnN/kM (every N agent turns, all but the last M summarized), "
        "e.g. OTRC/St/k10, SU-p/Tn21/k10, OTRC+SU-p/St+Tn21/k10"
    )


VALID_FORMS = valid_forms()

_SPEC_RE = re.compile(
    r"^(?P<primitive>[A-Za-z+-]+)(?:/(?P<trigger>St\+Th|St\+Tn[0-9]+|Tn[0-9]+|Th|St))?"
    r"(?:/(?:(?P<depth>[0-9.]+)|k(?P<keep>[0-9]+)))?$"
)


class PolicySpecError(UsageError, ValueError):
    """An unknown or ill-formed policy spec; the message lists the valid forms."""


@dataclass(frozen=True)
class PolicySpec:
    primitive: str
    trigger: str | None = None
    depth: float | None = None
    keep: int | None = None  # kM: the last M tool results (OTRC) or agent turns (a partial summary) kept

    @property
    def turns(self) -> int | None:
        """N of a ``TnN`` trigger: the agent turns in the window that fire the summary."""
        part = (self.trigger or "").rpartition("+")[2]
        return int(part[len(TURN_PREFIX) :]) if part.startswith(TURN_PREFIX) else None

    @property
    def stages(self) -> tuple[str, ...]:
        return tuple(self.primitive.split("+"))

    @property
    def is_fc(self) -> bool:
        return self.primitive == "FC"

    @property
    def needs_threshold(self) -> bool:
        return self.trigger is not None and "Th" in self.trigger

    @property
    def needs_target(self) -> bool:
        """Whether any stage compresses towards a depth target (then ``depth`` is set)."""
        return not self.is_fc and any(s not in stages.STAGES or stages.STAGES[s].target for s in self.stages)

    @property
    def depth_tunable(self) -> bool:
        return self.needs_target and self.keep is None and not ({"TRC", STEP_STAGE} & set(self.stages))

    @property
    def depth_settable(self) -> bool:
        """A TRC stack ending in a summary: depth-invariant in the sweeps, but any D in (0, 1] may be set."""
        chain = self.stages
        return chain[0] == "TRC" and chain[-1] in _llm_summaries()

    @property
    def step_stages(self) -> tuple[str, ...]:
        """Stages applied before every call."""
        if self.trigger == "St":
            return self.stages
        if self.trigger and self.trigger.startswith("St+"):
            return self.stages[:1]
        return ()

    @property
    def threshold_stages(self) -> tuple[str, ...]:
        """Stages applied before a call when the history exceeds the threshold."""
        if self.trigger == "Th":
            return self.stages
        if self.trigger == "St+Th":
            return self.stages[1:]
        return ()

    @property
    def turn_stages(self) -> tuple[str, ...]:
        """Stages applied before a call when the window holds ``turns`` agent turns."""
        if self.turns is None:
            return ()
        return self.stages[1:] if self.trigger.startswith("St+") else self.stages

    @property
    def needs_summarizer(self) -> bool:
        return bool(set(_llm_summaries()) & set(self.stages))

    def __str__(self) -> str:
        parts = [self.primitive]
        if self.trigger:
            parts.append(self.trigger)
        shown = self.depth_tunable or STEP_STAGE in self.stages
        if self.depth_settable and self.depth != CANONICAL_DEPTH:
            shown = True  # a Table 2 analogue; at 0.5 the stack keeps its depth-free name
        if self.keep is not None:
            parts.append(f"{KEEP_PREFIX}{self.keep}")
        elif self.depth is not None and shown:
            parts.append("1.0" if self.depth == FULL_DEPTH else f"{self.depth:g}")
        return "/".join(parts)

    @property
    def slug(self) -> str:
        """A filesystem-safe, stable name: ``OTRC+S-p/St+Th/0.5`` -> ``OTRCplusS-p_StplusTh_0.5``."""
        return str(self).replace("+", "plus").replace("/", "_")


def _llm_summaries() -> tuple[str, ...]:
    return stages.names(llm=True)


def _fail(spec: str, why: str) -> PolicySpecError:
    return PolicySpecError(f"policy spec {spec!r}: {why}; {valid_forms()}")


def _check_stages(spec: str, chain: list[str]) -> None:
    rows = stages.STAGES
    for stage in chain:
        if stage not in rows:
            raise _fail(spec, f"unknown primitive {stage!r}")
    if len(set(chain)) != len(chain):
        raise _fail(spec, "a primitive appears twice")
    order = list(rows)
    positions = [order.index(s) for s in chain]
    finals = [s for s in chain if rows[s].kind == "final"]
    if positions != sorted(positions) or len(finals) > 1:
        step, preparing = stages.names("step")[0], ", ".join(stages.names("preparing"))
        raise _fail(spec, f"stages must be {step}, then {preparing}, then at most one final primitive")
    if finals and finals[0] != chain[-1]:
        raise _fail(spec, "the final primitive must come last")
    for stage in chain:
        if rows[stage].alone and chain != [stage]:
            raise _fail(spec, f"{stage} stands alone")
    final = finals[0] if finals else None
    preparers = stages.names("preparing", needs_summary=True)
    if (set(preparers) & set(chain)) and (final is None or not rows[final].summary):
        summaries = ", ".join(stages.names(summary=True))
        raise _fail(spec, f"{' and '.join(preparers)} prepare a summary and need one of {summaries} after them")
    if "TRC" in chain and final == "TR":
        raise _fail(spec, "TRC already falls back to TR; write TRC")


def _check_trigger(spec: str, chain: list[str], trigger: str | None) -> None:
    if trigger is None:
        raise _fail(spec, "a trigger (Th, St or St+Th) is required")
    if TURN_PREFIX in trigger:
        _check_turns(spec, chain, trigger)
        return
    if chain == [STEP_STAGE]:
        if trigger != "St":
            raise _fail(spec, "OTRC alone is step-triggered: write OTRC/St")
    elif chain[0] == STEP_STAGE:
        if trigger != "St+Th":
            raise _fail(spec, "an OTRC stack runs OTRC every step and the rest on the threshold: use St+Th")
    elif trigger == "St+Th":
        raise _fail(spec, "St+Th needs OTRC as its step part")
    elif len(chain) == 1 and stages.STAGES[chain[0]].alone not in (None, trigger):
        alone = stages.STAGES[chain[0]].alone
        raise _fail(spec, f"{chain[0]} is {TRIGGER_WORDS[alone]}-triggered: write {chain[0]}/{alone}")


def _check_turns(spec: str, chain: list[str], trigger: str) -> None:
    """``TnN`` fires a partial summary (SU-p, S-p), alone or after OTRC under ``St+TnN``."""
    if int(trigger.rpartition(TURN_PREFIX)[2]) < 1:
        raise _fail(spec, "a turn-count trigger needs N >= 1 turns")
    final = chain[-1]
    if stages.STAGES[final].kind != "final" or stages.STAGES[final].keep_run is None:
        raise _fail(spec, "a turn-count trigger (TnN) fires a partial summary: SU-p or S-p, keeping the last M turns")
    if chain[0] == STEP_STAGE and not trigger.startswith("St+"):
        raise _fail(spec, "an OTRC stack runs OTRC every step: use St+TnN")
    if trigger.startswith("St+") and (chain[0] != STEP_STAGE or len(chain) != 2):
        raise _fail(spec, "St+TnN is OTRC every step and one partial summary on the turn count: OTRC+SU-p or OTRC+S-p")
    if chain[0] != STEP_STAGE and len(chain) != 1:
        raise _fail(spec, "a turn-count trigger takes SU-p or S-p alone, or after OTRC")


def _check_keep(spec: str, candidate: PolicySpec, keep: str | None) -> int | None:
    """``kM``: required by a turn-count trigger, allowed on OTRC/St; never elsewhere."""
    turns = candidate.turns is not None
    if keep is None:
        if turns:
            raise _fail(spec, "a turn-count trigger needs the turns it keeps: /kM, e.g. SU-p/Tn21/k10")
        return None
    if not turns and (candidate.primitive, candidate.trigger) != (STEP_STAGE, "St"):
        raise _fail(spec, "a keep-last-M parameter (kM) applies to OTRC/St and to turn-triggered summaries only")
    value = int(keep)
    if value < 1:
        raise _fail(spec, "kM needs M >= 1")
    if turns and value >= candidate.turns:
        raise _fail(spec, f"keeping {value} turns of {candidate.turns} leaves nothing to summarize: M < N")
    return value


def parse_spec(text: str) -> PolicySpec:
    """Parse ``P/T/D`` into a :class:`PolicySpec`; raises :class:`PolicySpecError` listing the valid forms."""
    spec = str(text).strip()
    if spec == "FC":
        return PolicySpec("FC")
    match = _SPEC_RE.match(spec)
    if not match:
        raise _fail(spec, "ill-formed")
    primitive = match["primitive"]
    chain = primitive.split("+")
    if "FC" in chain:
        raise _fail(spec, "FC takes no trigger or depth")
    _check_stages(spec, chain)
    trigger = match["trigger"]
    _check_trigger(spec, chain, trigger)
    candidate = PolicySpec(primitive, trigger, None)
    keep = _check_keep(spec, candidate, match["keep"])
    if keep is not None:
        return PolicySpec(primitive, trigger, None, keep)
    depth = _parse_depth(spec, match["depth"], candidate)
    return PolicySpec(primitive, trigger, depth)


def _parse_depth(spec: str, raw: str | None, candidate: PolicySpec) -> float | None:
    if not candidate.needs_target:
        if raw is not None:
            raise _fail(spec, f"{candidate.primitive} takes no depth")
        return None
    if raw is None:
        return CANONICAL_DEPTH
    try:
        depth = float(raw)
    except ValueError:
        raise _fail(spec, f"depth {raw!r} is not a number") from None
    full_allowed = candidate.stages[-1] in _llm_summaries()
    if depth == FULL_DEPTH and not full_allowed:
        raise _fail(spec, "D = 1 keeps nothing verbatim and needs a summary (SU, S, SU-p, S-p) as the final primitive")
    if not 0.0 < depth <= FULL_DEPTH:
        raise _fail(spec, f"depth {raw} is outside (0, 1]")
    if not candidate.depth_tunable and not candidate.depth_settable and depth != CANONICAL_DEPTH:
        raise _fail(spec, f"{candidate.primitive} is depth-invariant and uses D = {CANONICAL_DEPTH}")
    return depth
