"""The study: the config loaded, validated and expanded once, typed (``load_study(path) -> Study``).

Three modules, in import order: ``config`` (the schema, its defaults, the cross references within
the file: ``load_config``, ``ConfigError``), ``grid`` (the cells: ``Cell``, ``expand_grid``,
``resolve_threshold``, ``check_study``) and ``study`` (``Study``, the one reader of the config
mapping, built from both)."""

from ctxpolicy.study.config import ConfigError
from ctxpolicy.study.study import (
    IMPORTED_TRACK,
    UNTRIGGERED,
    Configuration,
    Design,
    Pair,
    Study,
    load_study,
)

__all__ = [
    "IMPORTED_TRACK",
    "UNTRIGGERED",
    "ConfigError",
    "Configuration",
    "Design",
    "Pair",
    "Study",
    "load_study",
]
