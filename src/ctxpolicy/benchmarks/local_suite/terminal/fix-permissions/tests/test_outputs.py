import os
from pathlib import Path


def test_run_sh_is_executable():
    assert os.access("run.sh", os.X_OK)


def test_run_output():
    assert Path("run_output.txt").read_text().strip() == "build 4711 ok"
