"""A run's settings: the agent file (config/agent/agent.yaml), the study config's limits, overrides."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ctxpolicy.agent.client import RetryPolicy
from ctxpolicy.agent.versions import REPO_ROOT

AGENT_DIR = REPO_ROOT / "config" / "agent"
MODES = ("text", "tool")
TEMPLATE_KEYS = ("system_template", "instance_template", "format_error_template", "observation_template")

DEFAULT_TEMPERATURE = 0.2
DEFAULT_MAX_TOKENS = 4096
DEFAULT_CACHE_BLOCK_TOKENS = 16


class SettingsError(ValueError):
    """A bad agent setting; the message names the file, the field and the value."""


@dataclass(frozen=True)
class Templates:
    system_template: str
    instance_template: str
    format_error_template: str
    observation_template: str


@dataclass(frozen=True)
class RunSettings:
    """Everything that shapes a run besides its identity; recorded in run.json ``settings``."""

    temperature: float = DEFAULT_TEMPERATURE
    max_tokens: int = DEFAULT_MAX_TOKENS
    step_limit: int = 30
    wall_time_limit_s: int | None = 1500  # None: no limit
    command_timeout_s: int = 60
    format_error_limit: int = 3
    cache_block_tokens: int = DEFAULT_CACHE_BLOCK_TOKENS
    mode: str = "text"
    request_timeout_s: float = 600.0  # one HTTP attempt, start to last byte (a hard deadline)
    connect_timeout_s: float = 10.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def record(self) -> dict:
        return dataclasses.asdict(self)


def _read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{path}: expected a mapping at the top level")
    return data


def load_agent_file(agent_dir: Path = AGENT_DIR) -> dict:
    return _read_yaml(Path(agent_dir) / "agent.yaml")


def load_templates(mode: str, agent_dir: Path = AGENT_DIR) -> Templates:
    agent_file = Path(agent_dir) / "agent.yaml"
    relative = load_agent_file(agent_dir).get("templates", {}).get(mode)
    if not relative:
        raise SettingsError(f"{agent_file}: templates.{mode}: missing; expected one of {', '.join(MODES)}")
    path = Path(agent_dir) / relative
    data = _read_yaml(path)
    missing = [key for key in TEMPLATE_KEYS if not isinstance(data.get(key), str)]
    if missing:
        raise SettingsError(f"{path}: {', '.join(missing)}: missing or not a string")
    return Templates(**{key: data[key] for key in TEMPLATE_KEYS})


def build_settings(
    config: dict,
    benchmark: str,
    model: str,
    *,
    task_timeout_s: int | None = None,
    agent_dir: Path = AGENT_DIR,
    overrides: dict[str, Any] | None = None,
) -> RunSettings:
    """Settings for one run; a task's own timeout (Terminal-Bench) replaces the wall-time limit.

    The per-request limit comes from agent.yaml, unless the benchmark's ``limits`` set it."""
    agent = load_agent_file(agent_dir)
    limits = config["benchmarks"][benchmark].get("limits", {})
    model_cfg = config["models"][model]
    retry = agent.get("retry", {})
    values: dict[str, Any] = {
        "temperature": model_cfg.get("temperature", DEFAULT_TEMPERATURE),
        "max_tokens": model_cfg.get("max_tokens", DEFAULT_MAX_TOKENS),
        "cache_block_tokens": model_cfg.get("cache_block_tokens", DEFAULT_CACHE_BLOCK_TOKENS),
        "mode": model_cfg.get("agent_mode", agent.get("mode", "text")),
        "request_timeout_s": agent.get("request_timeout_s", 600.0),
        "connect_timeout_s": agent.get("connect_timeout_s", 10.0),
        "retry": RetryPolicy(**retry),
        **{key: limits[key] for key in ("step_limit", "wall_time_limit_s", "command_timeout_s",
                                         "format_error_limit", "request_timeout_s") if key in limits},
    }
    if task_timeout_s:
        values["wall_time_limit_s"] = task_timeout_s
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if values["mode"] not in MODES:
        raise SettingsError(f"mode: {values['mode']!r} is not one of {', '.join(MODES)}")
    for key in ("request_timeout_s", "connect_timeout_s"):
        if not _positive_number(values[key]):
            raise SettingsError(f"{key}: {values[key]!r} must be a number of seconds above 0 "
                                f"({Path(agent_dir) / 'agent.yaml'} or the benchmark's limits)")
    return RunSettings(**values)


def _positive_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
