"""A ``Study`` from a config mapping that a test or benchmark built or changed in place.

Below the command line every reader takes a typed ``ctxpolicy.study.Study``, loaded once from the
config file (``ctxpolicy.study.load_study``); only tests hold a bare mapping, and this turns it
into a Study the same way (validated, default-filled, its grid checked).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from ctxpolicy.study import Study
from ctxpolicy.study.config import validate_config
from ctxpolicy.study.grid import check_study


def study_of(config: Mapping[str, Any] | Study, source: str = "<config>") -> Study:
    """A Study from a config mapping (validated again, its grid checked), or the Study itself.
    The same content gives the same Study (cached on its JSON text, so a mapping changed in place
    is a new study)."""
    if isinstance(config, Study):
        return config
    return _study_of_text(json.dumps(config, sort_keys=True, default=str), source)


@functools.lru_cache(maxsize=16)
def _study_of_text(text: str, source: str) -> Study:
    return Study(check_study(validate_config(json.loads(text), source=source), source=source), source)
