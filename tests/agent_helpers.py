"""Helpers of the agent command tests: a study config over two small offline tasks."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import require

from ctxpolicy import cli

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "config" / "config.yaml"
TASKS = ("hello-world", "csv-sum")


def offline_study(tmp_path: Path) -> Path:
    """The real config, with a cohort of ``TASKS`` from the offline suite and results under
    ``tmp_path``; returns the config file. Needs bubblewrap."""
    from ctxpolicy.sandbox import bwrap_available

    require(bwrap_available(), "bubblewrap (Debian package bubblewrap)")
    config = yaml.safe_load(CONFIG.read_text())
    cohort = tmp_path / "cohort.txt"
    cohort.write_text("\n".join(TASKS) + "\n")
    config["benchmarks"]["local"]["cohorts"] = {"main": str(cohort), "sweep": str(cohort)}
    config["results_dir"] = str(tmp_path / "results")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def help_text(capsys: pytest.CaptureFixture, command: str) -> str:
    """What ``ctxpolicy COMMAND --help`` prints."""
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    return capsys.readouterr().out
