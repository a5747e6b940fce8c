"""``ctxpolicy replay``: the mechanical effect of a policy with the agent's actions held fixed.

A recorded full-context run is replayed step by step through a policy session
(``ctxpolicy.policies.PolicySession``, the one the harness and the proxy use): at each of the
source's agent calls the messages the agent added since the previous call are appended, the policy
runs as it would before that call, and the prompt it would have sent is recorded with its events.
The output is a run directory in the run-record format (``identity.track: replay``) with the
source run named, so ``aggregate``, ``compare`` and the figures read it. No server is involved:
prompt sizes are local token counts, summaries are placeholders unless a summarizer endpoint is
given. See docs/analysis.md ("Replay and the cost decomposition").
"""

from ctxpolicy.replay.engine import ReplayedRun, replay_source
from ctxpolicy.replay.placeholder import PlaceholderSummarizer
from ctxpolicy.replay.source import SourceError, SourceRun, find_source_runs, read_source_run

TRACK = "replay"

__all__ = [
    "TRACK",
    "PlaceholderSummarizer",
    "ReplayedRun",
    "SourceError",
    "SourceRun",
    "find_source_runs",
    "read_source_run",
    "replay_source",
]
