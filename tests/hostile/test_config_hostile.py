"""Hostile configs through `ctxpolicy grid`: every one refused with exit 2 and one line naming the
file, where Snakemake would refuse it (or worse, accept it wrongly); and the documented
`imported.verdicts` key through the workflow itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ctxpolicy import cli
from ctxpolicy.testing.trajectories import write_corpus
from workflow_helpers import ROOT, snakemake

BASE = (ROOT / "config" / "config.yaml").read_text()
EXAMPLE = ROOT / "config" / "imported-example.yaml"


def grid(path: Path, capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = cli.main(["grid", "--config", str(path)])
    return code, capsys.readouterr().err


def refused(path: Path, capsys, *needles: str) -> str:
    code, err = grid(path, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0], err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def config_with(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def edited(tmp_path: Path, **changes) -> Path:
    config = yaml.safe_load(BASE)
    config.update(changes)
    return config_with(tmp_path, yaml.safe_dump(config, sort_keys=False))


@pytest.mark.parametrize(
    "text",
    [
        "study: x\nnested: " + "[" * 5000 + "]" * 5000 + "\n",
        "study: x\n" + "".join(f"{' ' * i}k:\n" for i in range(5000)),
    ],
    ids=["flow", "block"],
)
def test_a_5000_deep_yaml_is_one_line(tmp_path: Path, capsys, text: str):
    refused(config_with(tmp_path, text), capsys)


def test_a_config_that_is_not_utf8_is_one_line(tmp_path: Path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(BASE.encode() + "# caf\xe9\n".encode("latin-1"))
    refused(path, capsys, "UTF-8")


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"results_dir": ""}, "results_dir: must not be empty"),
        ({"results_dir": "   "}, "results_dir: '   ' is not allowed"),
        ({"figures_dir": "/"}, "figures_dir: '/' is not allowed"),
        ({"results_dir": "out", "figures_dir": "out/"}, "figures_dir: 'out/' is not allowed; it is results_dir"),
    ],
)
def test_results_and_figures_dirs_are_folders_of_their_own(tmp_path: Path, capsys, changes, needle):
    refused(edited(tmp_path, **changes), capsys, needle)


def test_a_duplicate_top_level_key_is_refused(tmp_path: Path, capsys):
    path = config_with(tmp_path, BASE + "\nattempts: 3\n")
    refused(path, capsys, "duplicate key 'attempts'")


def test_a_duplicate_nested_key_is_refused(tmp_path: Path, capsys):
    text = BASE.replace("\nbenchmarks:\n", "\nbenchmarks:\n  local:\n    adapter: local\n    cohorts: {main: x}\n", 1)
    assert text != BASE
    refused(config_with(tmp_path, text), capsys, "duplicate key 'local'")


def test_two_spellings_of_one_policy_in_a_list_are_refused_naming_both(tmp_path: Path, capsys):
    config = yaml.safe_load(BASE)
    config["grid"]["full_comparison"]["policies"] += ["TR/Th/0.50"]
    assert "TR/Th/0.5" in config["grid"]["full_comparison"]["policies"]
    path = config_with(tmp_path, yaml.safe_dump(config, sort_keys=False))
    refused(path, capsys, "'TR/Th/0.50'", "'TR/Th/0.5'", "grid.full_comparison.policies[")


@pytest.mark.parametrize(
    ("figures", "needle"),
    [({"fig99": ["qwen05b/local"]}, "figures.fig99"), ({"fig2": ["nobody/local"]}, "unknown model 'nobody'")],
)
def test_grid_refuses_what_the_workflow_refuses_in_the_figures_block(tmp_path: Path, capsys, figures, needle):
    refused(edited(tmp_path, figures=figures), capsys, needle)


def test_grid_refuses_a_missing_imported_path(tmp_path: Path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    refused(EXAMPLE, capsys, "imported.path", "results/imported-example/corpus")
    write_corpus(tmp_path / "results" / "imported-example" / "corpus")
    assert grid(EXAMPLE, capsys)[0] == 0


def test_the_imported_workflow_takes_a_swebench_report(tmp_path: Path):
    """`imported.verdicts`, as documented: the DAG is built and the import writes each run's verdict."""
    config = yaml.safe_load(EXAMPLE.read_text())
    write_corpus(tmp_path / config["imported"]["path"])
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"resolved_ids": ["task-mini1"]}))  # a bare list: the others unresolved
    config["imported"]["verdicts"] = str(report)
    path = tmp_path / "imported.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    cell = Path(config["results_dir"]) / "imported" / "runs" / "swebench" / "frontier" / "imported"
    done = snakemake(tmp_path, path, "--cores", "1", str(cell), timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    verdicts = {}
    for run_json in (tmp_path / cell).glob("*/run.json"):
        task = json.loads(run_json.read_text())["identity"]["task_id"]
        verdicts[task] = json.loads((run_json.parent / "verdict.json").read_text())
    assert len(verdicts) >= 6 and all(v["harness"] == "swe-bench-report" for v in verdicts.values())
    assert {t for t, v in verdicts.items() if v["resolved"]} == {"task-mini1"}


def test_a_merge_key_may_still_be_overridden(tmp_path: Path):
    """Only a key written twice is refused: a mapping's own key over a merged one (`<<`) is YAML's rule."""
    from ctxpolicy.study.config import load_config

    text = BASE.replace("\nattempts: 1\n", "\ndefaults: &d {attempts: 2}\nx: {<<: *d, attempts: 3}\nattempts: 1\n")
    assert text != BASE
    with pytest.raises(Exception, match="unknown key 'defaults'"):  # parsed: the schema speaks, not the loader
        load_config(config_with(tmp_path, text))
