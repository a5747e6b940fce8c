"""Deployed systems expressed in the P/T/D notation, so they can be compared on equal terms.

Each preset is an approximation: a spec plus a threshold given as a fraction of the model's
context window. ``docs/policies.md`` says what each system does and where the mapping differs.
"""

from __future__ import annotations

from dataclasses import dataclass

from ctxpolicy.policies.spec import PolicySpec, parse_spec


@dataclass(frozen=True)
class Preset:
    name: str
    system: str
    spec: str
    threshold_fraction: float
    behaviour: str

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
            "(our protected prefix) and the latest events stay verbatim",
        ),
        Preset(
            "gemini-cli",
            "Gemini CLI",
            "TRC+S-p/Th",
            0.5,
            "large tool results are truncated, then the older 70 % of the history becomes a "
            "structured state snapshot once the history reaches half the context window",
        ),
        Preset(
            "claude-code",
            "Claude Code",
            "TRC+S/Th",
            0.95,
            "old tool outputs are cleared, then near the context limit the whole history is "
            "replaced by a structured summary",
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


def preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(PRESETS)}") from None
