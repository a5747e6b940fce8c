"""A run's settings as typed models, in mini-swe-agent's style: one pydantic model per group of
settings, one docstring per field, and the one set of defaults.

``RunSettings`` is what shapes a run besides its identity (recorded in run.json ``settings``).
Its values come, later ones winning, from its defaults, the agent file (config/agent/agent.yaml,
validated as ``AgentFile``), the study config (``models.<name>``: temperature, max_tokens,
stop_after_action, cache_block_tokens, agent_mode; ``benchmarks.<name>.limits``), a task's own timeout and the
command line. Neither the config schema nor the agent file repeats a default.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ctxpolicy.errors import UsageError
from ctxpolicy.agent.versions import REPO_ROOT

if TYPE_CHECKING:
    from ctxpolicy.study import Study

AGENT_DIR = REPO_ROOT / "config" / "agent"
MODES = ("text", "tool")
TEMPLATE_KEYS = ("system_template", "instance_template", "format_error_template", "observation_template")

Mode = Literal["text", "tool"]
# int or float as written (a record keeps 600, not 600.0); never a bool or a string
Seconds = Annotated[int | float, Field(gt=0)]


class SettingsError(UsageError, ValueError):
    """A bad agent setting; the message names the file, the field and the value."""


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True)


class RetryPolicy(_Settings):
    """Bounded retries of an LLM request (refused connection, timeout, 5xx, 429), then outcome ``error``."""

    max_attempts: Annotated[int, Field(ge=1)] = 4
    """Attempts of one request, the first included."""
    backoff_initial_s: Annotated[int | float, Field(ge=0)] = 1.0
    """Seconds before the first retry; doubled before each next one."""
    backoff_max_s: Annotated[int | float, Field(ge=0)] = 20.0
    """The longest wait between two attempts, in seconds."""


class RunSettings(_Settings):
    """Everything that shapes a run besides its identity; recorded in run.json ``settings``."""

    temperature: Annotated[int | float, Field(ge=0)] = 0.2
    """Sampling temperature of the agent's and the summarizer's calls (config: ``models.<name>.temperature``)."""
    max_tokens: Annotated[int, Field(ge=1)] = 4096
    """Most output tokens of one call (config: ``models.<name>.max_tokens``; ``--max-tokens``)."""
    stop_after_action: bool = False
    """Text mode: end each call at the closing fence of its command block (an OpenAI ``stop`` sequence),
    not at ``max_tokens``; the fence the server leaves out is put back in the recorded message
    (config: ``models.<name>.stop_after_action``)."""
    step_limit: Annotated[int, Field(ge=0)] = 250
    """Most LLM calls of a run; 0: no limit (config: ``benchmarks.<name>.limits.step_limit``; ``--step-limit``)."""
    wall_time_limit_s: Annotated[int, Field(ge=1)] | None = 1500
    """Wall-clock seconds a run may take; None: no limit. A task's own timeout (Terminal-Bench) replaces it."""
    command_timeout_s: Annotated[int, Field(ge=1)] = 60
    """Seconds one shell command may run in the sandbox (config: ``benchmarks.<name>.limits``)."""
    format_error_limit: Annotated[int, Field(ge=0)] = 3
    """Consecutive answers without a command after which the run ends (outcome ``format_error_limit``)."""
    cache_block_tokens: Annotated[int, Field(ge=1)] = 16
    """The server's prefix-cache block, in tokens, for the cached-token estimate (config: ``models.<name>``)."""
    mode: Mode = "text"
    """text: one fenced bash block per answer; tool: the OpenAI ``bash`` tool (``models.<name>.agent_mode``,
    the agent file, ``--mode``)."""
    request_timeout_s: Seconds = 600
    """The most one HTTP request may take, start to last byte (a hard deadline, not a per-read timeout); the
    run's remaining wall time caps it further (agent file; a benchmark's ``limits.request_timeout_s``)."""
    connect_timeout_s: Seconds = 10
    """Seconds to open the connection to the model server (agent file)."""
    retry: RetryPolicy = RetryPolicy()
    """Retries of a failed request (agent file)."""

    def record(self) -> dict:
        """The settings as ``run.json`` records them, with the action format the mode writes."""
        from ctxpolicy.policies import actions

        return {**self.model_dump(), "action_format": actions.of_mode(self.mode)}


class AgentFile(_Settings):
    """config/agent/agent.yaml: the prompt templates per mode, and the run settings every run shares.

    The settings keys are optional: left out, ``RunSettings``' default applies."""

    templates: dict[Mode, str]
    """Prompt templates per mode, relative to the agent file's folder."""
    mode: Mode | None = None
    """See ``RunSettings.mode``."""
    request_timeout_s: Seconds | None = None
    """See ``RunSettings.request_timeout_s``."""
    connect_timeout_s: Seconds | None = None
    """See ``RunSettings.connect_timeout_s``."""
    retry: RetryPolicy | None = None
    """See ``RetryPolicy``."""

    def settings(self) -> dict[str, Any]:
        """The run settings this file sets."""
        return {name: getattr(self, name) for name in self.model_fields_set if name != "templates"}


class Templates(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    system_template: str
    instance_template: str
    format_error_template: str
    observation_template: str


def describe_error(exc: ValidationError) -> str:
    """The first problem of a validation error (a missing key last) as ``key.path: value: what is wrong``."""
    errors = exc.errors()
    error = next((e for e in errors if e["type"] != "missing"), errors[0])
    union = [part for part in error["loc"] if part in ("int", "float")]  # tags of ``int | float`` fields
    loc = [str(part) for part in error["loc"] if part not in ("int", "float")]
    where = ".".join(loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        model_fields = _fields_at(loc[:-1])
        allowed = f"; allowed keys: {', '.join(model_fields)}" if model_fields else ""
        return f"{where}: unknown key (value {error['input']!r}){allowed}"
    if error["type"] == "missing":
        return f"{where}: missing"
    problem = (
        "expected a number"
        if union and error["type"] in ("int_type", "int_parsing", "float_type")
        else error["msg"][0].lower() + error["msg"][1:]
    )
    return f"{where}: {error['input']!r}: {problem}"


def _fields_at(loc: list[str]) -> list[str]:
    model: Any = AgentFile
    for part in loc:
        field = model.model_fields.get(part)
        model = getattr(field, "annotation", None) if field else None
        model = next(
            (m for m in getattr(model, "__args__", (model,)) if isinstance(m, type) and issubclass(m, BaseModel)), None
        )
        if model is None:
            return []
    return list(model.model_fields)


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


def load_agent_file(agent_dir: Path = AGENT_DIR) -> AgentFile:
    path = Path(agent_dir) / "agent.yaml"
    data = _read_yaml(path)
    try:
        return AgentFile.model_validate(data)
    except ValidationError as exc:
        raise SettingsError(f"{path}: {describe_error(exc)}") from None


def load_templates(mode: str, agent_dir: Path = AGENT_DIR) -> Templates:
    agent_file = Path(agent_dir) / "agent.yaml"
    relative = load_agent_file(agent_dir).templates.get(mode)
    if not relative:
        raise SettingsError(f"{agent_file}: templates.{mode}: missing; expected one of {', '.join(MODES)}")
    path = Path(agent_dir) / relative
    data = _read_yaml(path)
    missing = [key for key in TEMPLATE_KEYS if not isinstance(data.get(key), str)]
    if missing:
        raise SettingsError(f"{path}: {', '.join(missing)}: missing or not a string")
    return Templates(**{key: data[key] for key in TEMPLATE_KEYS})


MODEL_KEYS = {
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "stop_after_action": "stop_after_action",
    "cache_block_tokens": "cache_block_tokens",
    "agent_mode": "mode",
}  # models.<name> key -> RunSettings field
LIMIT_KEYS = ("step_limit", "wall_time_limit_s", "command_timeout_s", "format_error_limit", "request_timeout_s")


def build_settings(
    study: Study,
    benchmark: str,
    model: str,
    *,
    task_timeout_s: int | None = None,
    agent_dir: Path = AGENT_DIR,
    overrides: dict[str, Any] | None = None,
) -> RunSettings:
    """Settings for one run: RunSettings' defaults, then the agent file, the model's and the
    benchmark's config, a task's own timeout (Terminal-Bench) and ``overrides`` (None: not given)."""
    agent_file = load_agent_file(agent_dir)
    model_cfg = study.model(model)
    limits = study.benchmark(benchmark)["limits"]  # the schema fills in {}
    layers = [
        (f"{Path(agent_dir) / 'agent.yaml'}", agent_file.settings()),
        (f"models.{model}", {field: model_cfg[key] for key, field in MODEL_KEYS.items() if key in model_cfg}),
        (f"benchmarks.{benchmark}.limits", {key: limits[key] for key in LIMIT_KEYS if key in limits}),
        ("the task's timeout", {"wall_time_limit_s": task_timeout_s} if task_timeout_s else {}),
        ("the command line", {k: v for k, v in (overrides or {}).items() if v is not None}),
    ]
    values: dict[str, Any] = {}
    for _, layer in layers:
        values.update(layer)
    try:
        return RunSettings.model_validate(values)
    except ValidationError as exc:
        field = str(exc.errors()[0]["loc"][0])
        source = next((name for name, layer in reversed(layers) if field in layer), "RunSettings")
        raise SettingsError(f"{source}: {describe_error(exc)}") from None
