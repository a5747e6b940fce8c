"""The agent room: mini-swe-agent with the compression-policy hook, per-call telemetry, run
records and cells (docs/architecture.md, "Run directory"; docs/schema.md, "run record").

Light to import: mini-swe-agent (slow, prints a banner) is imported only when a run starts.
"""

import os

# mini-swe-agent prints a banner on import unless told not to; runs log to files, not banners.
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")

from ctxpolicy.agent.record import rebuild_prompts  # noqa: E402

__all__ = ["rebuild_prompts"]
