"""The names of the threshold settings, in their order from the tightest to the loosest.

A Th policy's threshold is a setting of a benchmark and model (its tokens come from the config's
preset or from calibration, ``results/thresholds/{benchmark}/{model}.json``) or a number given
directly, which run records call ``fixed``. Standard library only: every room may import it.
"""

from __future__ import annotations

SETTINGS = ("tight", "primary", "loose")
PRIMARY = "primary"  # the setting of the full comparison and the summarizer comparison unless the config says
FIXED = "fixed"  # identity.threshold_setting of a run given its threshold as a number
