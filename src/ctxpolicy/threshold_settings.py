"""The names of the threshold settings, in their order from the tightest to the loosest, and the
one reader of thresholds files.

A Th policy's threshold is a setting of a benchmark and model (its tokens come from the config's
preset or from calibration, ``results/thresholds/{benchmark}/{model}.json``) or a number given
directly, which run records call ``fixed``. Standard library only: every room may import it.

The settings' tokens go tight < primary < loose (``order_problem``): a preset out of that order
(or with two equal settings) would silently invert or flatten the sweep's axis, so the config
checks, ``ctxpolicy calibrate --preset`` and every read of a preset's thresholds file refuse it.
A calibrated file is refused only when its settings go down (percentiles cannot); settings that
coincide there are a matter for a warning. A token count is an integer from 1 to 2**53 - 1,
never a boolean.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxpolicy.errors import CtxpolicyError

SETTINGS = ("tight", "primary", "loose")
PRIMARY = "primary"  # the setting of the full comparison and the summarizer comparison unless the config says
FIXED = "fixed"  # identity.threshold_setting of a run given its threshold as a number
PRESET = "preset"  # the ``source`` of a thresholds file written from the config's preset
MAX_TOKENS = 2**53 - 1


class ThresholdsFileError(CtxpolicyError, ValueError):
    """A thresholds file that cannot be used; the message names the file, the field and the value."""


def is_token_count(value: Any) -> bool:
    """An integer from 1 to ``MAX_TOKENS``; ``True`` is no token count."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_TOKENS


def order_problem(values: Mapping[str, Any], *, strict: bool = True) -> str | None:
    """Why the settings ``values`` gives (None or absent ones skipped) are not tight < primary <
    loose (with ``strict=False``: not tight <= primary <= loose), or None when they are."""
    given = [(name, values[name]) for name in SETTINGS if values.get(name) is not None]
    for (low, x), (high, y) in zip(given, given[1:]):
        if x > y or (strict and x == y):
            relation = "equal to" if x == y else "above"
            return f"{low} {x!r} is {relation} {high} {y!r}: the settings must go tight < primary < loose"
    return None


def check_thresholds(values: Any, where: str) -> dict:
    """A thresholds file's parsed content, checked: an object whose settings are token counts or
    null, in order (strict for a preset). Raises ``ThresholdsFileError`` starting with ``where``."""
    if not isinstance(values, dict):
        raise ThresholdsFileError(f"{where}: not a JSON object ({type(values).__name__})")
    for name in SETTINGS:
        value = values.get(name)
        if value is not None and not is_token_count(value):
            raise ThresholdsFileError(
                f"{where}: field {name} is {value!r}: not a token count (an integer from 1 to {MAX_TOKENS})"
            )
    problem = order_problem(values, strict=values.get("source") == PRESET)
    if problem:
        raise ThresholdsFileError(f"{where}: {problem}")
    return values


def read_thresholds(path: str | Path) -> dict:
    """A thresholds file (``ctxpolicy calibrate``'s output, calibrated or preset), checked by
    ``check_thresholds``. Raises ``OSError`` when it cannot be read and ``ThresholdsFileError``
    when it is no valid thresholds file."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThresholdsFileError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    return check_thresholds(values, str(path))
