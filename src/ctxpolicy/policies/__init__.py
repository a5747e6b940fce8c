"""Context-compression policies: the primitive × trigger × depth design space.

Pure functions over chat histories; the summarizer call (and the DUMP stage's file, written by
a caller-supplied :class:`HistoryDump`) are the only I/O. See ``docs/policies.md``.
"""

from ctxpolicy.policies.dump import HistoryDump
from ctxpolicy.policies.engine import PolicyResult, apply_policy
from ctxpolicy.policies.history import (
    CLEARED_MARKER,
    COMPACTED_MARKER,
    MARKERS,
    PLACEHOLDER,
    SUMMARY_MARKER,
    marker_of,
    protected_prefix_length,
)
from ctxpolicy.policies.messages import MessageError, check_messages
from ctxpolicy.policies.presets import NEIGHBOUR_PRESETS, PRESETS, NeighbourPreset, Preset, preset
from ctxpolicy.policies.prompts import load_prompt
from ctxpolicy.policies.rewrite import PolicyError
from ctxpolicy.policies.session import PolicySession, Turn
from ctxpolicy.policies.spec import (
    CANONICAL_DEPTH,
    DEPTH_INVARIANT,
    DEPTH_TUNABLE,
    STUDY_DEPTHS,
    STUDY_PRIMITIVES,
    VALID_FORMS,
    PolicySpec,
    PolicySpecError,
    parse_spec,
)
from ctxpolicy.policies.summarizer import (
    DeterministicSummarizer,
    EndpointSummarizer,
    HttpTransport,
    Summarizer,
    SummaryCall,
    SummaryTransport,
)

__all__ = [
    "CANONICAL_DEPTH",
    "CLEARED_MARKER",
    "COMPACTED_MARKER",
    "DEPTH_INVARIANT",
    "DEPTH_TUNABLE",
    "MARKERS",
    "PLACEHOLDER",
    "PRESETS",
    "NEIGHBOUR_PRESETS",
    "NeighbourPreset",
    "STUDY_DEPTHS",
    "STUDY_PRIMITIVES",
    "SUMMARY_MARKER",
    "VALID_FORMS",
    "DeterministicSummarizer",
    "EndpointSummarizer",
    "HttpTransport",
    "HistoryDump",
    "MessageError",
    "PolicyError",
    "PolicyResult",
    "PolicySpec",
    "PolicySpecError",
    "Preset",
    "Summarizer",
    "SummaryCall",
    "SummaryTransport",
    "apply_policy",
    "check_messages",
    "load_prompt",
    "marker_of",
    "parse_spec",
    "preset",
    "protected_prefix_length",
    "PolicySession",
    "Turn",
]
