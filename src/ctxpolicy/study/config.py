"""Load and check a study config: one YAML file, validated against config/schema.yaml.

Validation has the semantics of ``snakemake.utils.validate(config, schema, set_default=True)``
(JSON Schema draft 2020-12, schema defaults filled in), followed by the cross-reference
checks a schema cannot express (a grid naming an unknown model, a cohort limit of an unknown
cohort, ...). Every failure is one ``ConfigError`` line naming the file, the key path, the
value and what is allowed. The checks that need the expanded grid or another room (every gguf
is a registered model file, policy specs parse, every Th cell has a threshold source) are
``ctxpolicy.study.grid.check_study``; ``ctxpolicy.study.load_study`` runs both. This module never
imports the grid or serving.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ctxpolicy.errors import UsageError
from ctxpolicy.paths import REPO_ROOT

SCHEMA_PATH = REPO_ROOT / "config" / "schema.yaml"
DEFAULT_CONFIG = REPO_ROOT / "config" / "config.yaml"
TRACKS = ("calibration", "full_comparison", "sweeps", "summarizer")


class ConfigError(UsageError, ValueError):
    """A config file that cannot be used; the message is one line naming file, key and value."""


def load_config(path: str | Path) -> dict:
    """Read, validate and default-fill the config at ``path``."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader that refuses duplicate keys
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
    except RecursionError:
        raise ConfigError(f"{path}: not a usable config: nested too deeply") from None
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise ConfigError(f"{path}: the top level must be a mapping of keys, got {got}")
    try:
        return validate_config(data, source=str(path))
    except RecursionError:
        raise ConfigError(f"{path}: not a usable config: nested too deeply") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a mapping naming one key twice is an error (PyYAML keeps
    the last silently): at the top level and in every nested mapping. Merge keys (``<<``) still
    let a mapping's own keys override the merged ones."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark.line)
                except TypeError:  # an unhashable key: construct_mapping says so
                    continue
                if first != key_node.start_mark.line:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first at line {first + 1})", key_node.start_mark
                    )
        return super().construct_mapping(node, deep)


def validate_config(data: Mapping[str, Any], source: str = "<config>") -> dict:
    """Return a validated, default-filled deep copy of ``data``."""
    config = copy.deepcopy(dict(data))
    _check_schema(config, source)
    _check_references(config, source)
    return config


# ---------------------------------------------------------------- schema


@functools.lru_cache(maxsize=1)
def load_schema() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


@functools.lru_cache(maxsize=1)
def _default_filling_validator():
    from jsonschema import Draft202012Validator, validators

    validate_properties = Draft202012Validator.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        # as snakemake.utils.validate, but copying defaults so nested defaults never mutate the schema
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    cls = validators.extend(Draft202012Validator, {"properties": set_defaults})
    return cls(load_schema())


def _check_schema(config: dict, source: str) -> None:
    errors = list(_default_filling_validator().iter_errors(config))
    if errors:
        first = min(errors, key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path]))
        raise ConfigError(f"{source}: {_describe(first)}")


def key_path(parts: Iterable[Any]) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _describe(error) -> str:
    where = key_path(error.absolute_path)
    value = error.instance
    kind, rule = error.validator, error.validator_value
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(value) - set(allowed))
        return f"{where}: unknown key {unknown[0]!r}; allowed keys: {', '.join(allowed)}"
    if kind == "required":
        # defaults are filled while validating: a key missing then may be present now
        missing = [k for k in rule if k not in value] or [error.message.split("'")[1]]
        return f"{where}: missing required key {missing[0]!r}"
    if kind in ("enum", "const"):
        allowed = rule if kind == "enum" else [rule]
        return f"{where}: {value!r} is not allowed; allowed: {', '.join(map(str, allowed))}"
    if kind == "type":
        wanted = " or ".join(rule) if isinstance(rule, list) else rule
        return f"{where}: {value!r} is not allowed; expected {wanted}"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[kind]
        return f"{where}: {value!r} is not allowed; must be {op} {rule}"
    if kind == "pattern":
        return f"{where}: {value!r} is not allowed; must match {rule}"
    if kind == "uniqueItems":
        return f"{where}: {value!r} is not allowed; items must be unique"
    if kind in ("minProperties", "minLength"):
        return f"{where}: must not be empty"
    if kind == "oneOf":
        allowed = error.schema.get("description") or "one of the documented forms (config/README.md)"
        return f"{where}: {value!r} is not allowed; allowed: {allowed}"
    return f"{where}: {value!r} is not allowed; {error.message}"


# ---------------------------------------------------------------- cross references


def _check_references(config: dict, source: str) -> None:
    def fail(where: str, message: str) -> None:
        raise ConfigError(f"{source}: {where}: {message}")

    _check_output_dirs(config, fail)
    _check_cohort_limits(config, fail)
    _check_cost_method(config, fail)
    _check_grid(config, fail)


def _check_output_dirs(config: dict, fail) -> None:
    """results_dir and figures_dir: each a folder (not empty, not only spaces), never the same one."""
    dirs = {}
    for key in ("results_dir", "figures_dir"):
        value = config[key]
        if not value.strip() or not value.strip("/"):
            fail(key, f"{value!r} is not allowed; expected a folder (a path that is not empty or '/')")
        dirs[key] = os.path.normpath(value)
    if dirs["results_dir"] == dirs["figures_dir"]:
        fail(
            "figures_dir",
            f"{config['figures_dir']!r} is not allowed; it is results_dir ({config['results_dir']!r}): "
            "the figures need a folder of their own",
        )


def _check_cohort_limits(config: dict, fail) -> None:
    for b, bench in config["benchmarks"].items():
        for cohort in bench["cohort_limit"]:
            if cohort not in bench["cohorts"]:
                fail(
                    f"benchmarks.{b}.cohort_limit.{cohort}",
                    f"{cohort!r} is not a cohort of benchmark {b!r}; allowed: {', '.join(bench['cohorts'])}",
                )


def _check_cost_method(config: dict, fail) -> None:
    from ctxpolicy.metrics.cost_methods import UnknownMethodError, method  # the one check of a method name

    name = config["metrics"]["cost_method"]  # the schema fills metrics in
    try:
        method(name)
    except UnknownMethodError as exc:
        fail("metrics.cost_method", str(exc))
    price = config["metrics"]["price"]
    if price is not None:
        from ctxpolicy.metrics.prices import PriceError, price_card  # litellm's map, read without litellm

        try:
            price_card(price)
        except PriceError as exc:
            fail("metrics.price", str(exc))


def _check_grid(config: dict, fail) -> None:
    models, benchmarks = config["models"], config["benchmarks"]
    for track in TRACKS:
        section = config["grid"][track]  # the schema fills in every section
        for key, known, what in (
            ("models", models, "model"),
            ("benchmarks", benchmarks, "benchmark"),
            ("summarizers", models, "model"),
        ):
            for i, name in enumerate(section.get(key, [])):
                if name not in known:
                    fail(
                        f"grid.{track}.{key}[{i}]",
                        f"{name!r} is not a {what} of this config; allowed: {', '.join(known)}",
                    )
        cohort = section.get("cohort")
        for b in section.get("benchmarks", []):
            if cohort not in benchmarks[b]["cohorts"]:
                fail(
                    f"grid.{track}.cohort",
                    f"{cohort!r} is not a cohort of benchmark {b!r}; allowed: {', '.join(benchmarks[b]['cohorts'])}",
                )
