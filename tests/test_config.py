"""Config loading: defaults filled, and every bad value is one line naming file, key, value and what is allowed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ctxpolicy.study.config import SCHEMA_PATH, ConfigError, load_config, validate_config
from ctxpolicy.study.grid import validate_study

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def local() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def error_for(config: dict, mutate) -> str:
    bad = copy.deepcopy(config)
    mutate(bad)
    with pytest.raises(ConfigError) as info:
        validate_study(bad, source="config/bad.yaml")
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml", "workstation.yaml", "workstation-swebench.yaml"])
def test_shipped_configs_validate(name):
    config = load_config(ROOT / "config" / name)
    assert config["grid"]["full_comparison"]["policies"][0] == "FC"


def test_defaults_are_filled(local):
    config = validate_config(local)
    bench = config["benchmarks"]["local"]
    assert bench["options"] == {}
    assert config["models"]["qwen05b"]["startup_timeout_s"] == 1800
    assert config["slurm"]["analysis"]["gpus"] == 0
    assert config["slurm"]["partition"] is None
    # defaults never leak between entries or back into the schema
    config["slurm"]["analysis"]["gpus"] = 7
    assert validate_config(local)["slurm"]["analysis"]["gpus"] == 0


def test_snakemake_validate_accepts_the_same_schema(local):
    from snakemake.utils import validate

    data = copy.deepcopy(local)
    validate(data, str(SCHEMA_PATH))
    assert data["models"]["qwen05b"]["startup_timeout_s"] == 1800


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: c["models"]["qwen05b"].update(server="ollama"),
            "config/bad.yaml: models.qwen05b.server: 'ollama' is not allowed; allowed: llamacpp, vllm, endpoint",
        ),
        (
            lambda c: c["models"]["qwen05b"].update(temperature=-1),
            "models.qwen05b.temperature: -1 is not allowed; must be >= 0",
        ),
        (
            lambda c: c["models"]["qwen05b"].update(temprature=0.3),
            "models.qwen05b: unknown key 'temprature'; allowed keys: agent_mode, api_key_env",
        ),
        (lambda c: c["models"]["qwen05b"].pop("gguf"), "models.qwen05b: missing required key 'gguf'"),
        (
            lambda c: c["models"]["qwen05b"].update(gguf="qwen-7b-typo"),
            "config/bad.yaml: models.qwen05b.gguf: 'qwen-7b-typo' is not a known model file; "
            "allowed: qwen2.5-coder-0.5b-instruct-q4_k_m, qwen2.5-coder-1.5b-instruct-q4_k_m",
        ),
        (lambda c: c.update(attempts="three"), "attempts: 'three' is not allowed; expected integer"),
        (
            lambda c: c["grid"]["sweeps"].update(settings=["tight", "medium"]),
            "grid.sweeps.settings[1]: 'medium' is not allowed; allowed: tight, primary, loose",
        ),
        (
            lambda c: c["grid"]["sweeps"].update(models=["qwen05b", "glm"]),
            "grid.sweeps.models[1]: 'glm' is not a model of this config; allowed: qwen05b",
        ),
        (
            lambda c: c["grid"]["sweeps"].update(cohort="subset"),
            "grid.sweeps.cohort: 'subset' is not a cohort of benchmark 'local'; allowed: main, sweep",
        ),
        (
            lambda c: c["grid"]["full_comparison"]["policies"].append("TR/Sometimes/0.5"),
            "grid.full_comparison.policies[7]: 'TR/Sometimes/0.5' is not a valid policy spec",
        ),
        (
            lambda c: c["thresholds"]["local"].update(qwen05b={"source": "preset"}),
            "thresholds.local.qwen05b: {'source': 'preset'} is not allowed; allowed: {source: calibrate[, round: N]} or",
        ),
        (
            lambda c: c["thresholds"]["local"].update(qwen05b={"source": "preset", "primary": 3000}),
            "thresholds.local.qwen05b: preset has no 'tight' threshold, but cell TR_Th_0.3__tight needs it",
        ),
        (
            lambda c: c["benchmarks"]["local"]["cohort_limit"].update(subset=2),
            "benchmarks.local.cohort_limit.subset: 'subset' is not a cohort of benchmark 'local'; allowed: main, sweep",
        ),
        (
            lambda c: c["grid"].update(calibration={}),
            "thresholds.local.qwen05b: source 'calibrate' needs 'qwen05b' and 'local' in grid.calibration",
        ),
    ],
)
def test_bad_values_name_key_value_and_allowed(local, mutate, expected):
    assert expected in error_for(local, mutate)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read config"):
        load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("models: [unclosed\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: not valid YAML"):
        load_config(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("just text\n")
    with pytest.raises(ConfigError, match=r"scalar\.yaml: the top level must be a mapping"):
        load_config(scalar)


def test_grid_checks_are_not_part_of_the_config_alone(local):
    """A policy spec that does not parse passes ``validate_config`` and fails ``validate_study``."""
    bad = copy.deepcopy(local)
    bad["grid"]["full_comparison"]["policies"].append("TR/Sometimes/0.5")
    validate_config(bad)
    with pytest.raises(ConfigError, match="is not a valid policy spec"):
        validate_study(bad)
