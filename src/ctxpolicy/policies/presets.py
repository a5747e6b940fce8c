"""Deployed systems expressed in the P/T/D notation, so they can be compared on equal terms.

Each preset is an approximation: a spec plus a threshold given as a fraction of the model's
context window. Three are the closest analogue of a row of the study's Table 2 (``table2_row``
names it); Codex has no row there and is our own mapping (``table2_row`` is None).
``docs/policies.md`` says what each system does and where the mapping differs.
``NEIGHBOUR_PRESETS`` write another study's policies in our notation (The Complexity Trap's
observation masking, turn-count summarization and their hybrid), for replays beside ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxpolicy.policies.spec import PolicySpec, parse_spec


# The study's Table 2: each deployed mechanism's closest analogue in its notation (its last column).
TABLE2_ANALOGUES = {"OpenHands": "SU-p/Th/0.5", "Gemini CLI": "TRC+S-p/Th/0.7", "Claude Code": "TRC+S/Th/1.0"}


@dataclass(frozen=True)
class Preset:
    name: str
    system: str
    spec: str
    threshold_fraction: float
    behaviour: str
    table2_row: str | None = None  # the study's Table 2 row it is the closest analogue of; None: ours

    @property
    def source(self) -> str:
        return f"closest analogue of Table 2's {self.table2_row} row" if self.table2_row else "ours (not in Table 2)"

    @property
    def policy(self) -> PolicySpec:
        return parse_spec(self.spec)

    def threshold(self, context_window: int) -> int:
        return int(self.threshold_fraction * context_window)


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "openhands",
            "OpenHands",
            "SU-p/Th/0.5",
            0.75,
            "the older half of the events becomes a free-form summary; the first few events "
            "(our protected prefix) and the latest events stay verbatim; OpenHands fires at 80 events "
            "or a token cap, which we approximate by a threshold at 0.75 of the window",
            "OpenHands",
        ),
        Preset(
            "gemini-cli",
            "Gemini CLI",
            "TRC+S-p/Th/0.7",
            0.5,
            "large tool results are truncated, then the older 70 % of the history becomes a "
            "structured state snapshot once the history reaches half the context window",
            "Gemini CLI",
        ),
        Preset(
            "claude-code",
            "Claude Code",
            "TRC+S/Th/1.0",
            0.97,
            "old tool outputs are cleared, then near the context limit the whole history is "
            "replaced by a structured summary (nothing kept verbatim)",
            "Claude Code",
        ),
        Preset(
            "codex",
            "Codex CLI",
            "SU/Th/0.5",
            0.9,
            "at 90 % of the context window the history is replaced by a free-form hand-off summary",
        ),
    )
}


@dataclass(frozen=True)
class NeighbourPreset:
    """A policy of another study, in our notation: no threshold (it fires on steps or turns)."""

    name: str
    study: str
    spec: str
    behaviour: str

    @property
    def policy(self) -> PolicySpec:
        return parse_spec(self.spec)


COMPLEXITY_TRAP = "The Complexity Trap (Lindenbauer et al., 2025; SWE-agent on SWE-bench Verified)"
NEIGHBOUR_PRESETS: dict[str, NeighbourPreset] = {
    p.name: p
    for p in (
        NeighbourPreset(
            "complexity-trap-masking",
            COMPLEXITY_TRAP,
            "OTRC/St/k10",
            "observation masking: before every call, each tool result but the last 10 is replaced by a "
            "placeholder (SWE-agent's keep-the-last-N-observations processor); the agent's own turns stay",
        ),
        NeighbourPreset(
            "complexity-trap-summary",
            COMPLEXITY_TRAP,
            "SU-p/Tn21/k10",
            "LLM summarization: once the window holds 21 agent turns, everything before the last 10 turns "
            "becomes one free-form summary, the 10 turns stay verbatim",
        ),
        NeighbourPreset(
            "complexity-trap-hybrid",
            COMPLEXITY_TRAP,
            "OTRC+SU-p/St+Tn21/k10",
            "both: masking before every call, and the summary of all but the last 10 turns every 21 turns",
        ),
    )
}


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
