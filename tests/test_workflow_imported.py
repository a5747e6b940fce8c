"""The imported-corpus path of the workflow (config `imported`, workflow/rules/imported.smk): an
imported-only config validates, resolves to the imported figure alone, and Snakemake imports,
calibrates, replays and draws the tests' small corpus with provenance back to its files."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from ctxpolicy.config import ConfigError, validate_config
from ctxpolicy.figures.catalog import targets_for
from ctxpolicy.study import load_study
from ctxpolicy.testing.trajectories import write_corpus
from workflow_helpers import ROOT, snakemake

EXAMPLE = ROOT / "config" / "imported-example.yaml"


def test_the_example_is_an_imported_only_study_with_one_figure():
    study = load_study(EXAMPLE)
    assert not study.has_study and study.imported["format"] == "auto"
    targets = targets_for(study)
    assert list(targets) == ["imported_replay"]
    assert targets["imported_replay"]["inputs"] == ["results/imported-example/tables/imported/replay/runs.parquet"]


def test_a_study_config_has_no_imported_figure():
    assert "imported_replay" not in targets_for(load_study(ROOT / "config" / "config.yaml"))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"study": "x"}, "missing required key 'models'"),
        ({"study": "x", "models": {}, "benchmarks": {}, "grid": {}}, "must not be empty"),
        ({"study": "x", "imported": {"path": "c", "benchmark": "b"}}, "imported: missing required key 'model'"),
        ({"study": "x", "imported": {"path": "c", "benchmark": "b", "model": "m", "format": "x"}}, "imported.format"),
    ],
)
def test_a_config_without_a_study_needs_an_imported_corpus(data, message):
    with pytest.raises(ConfigError, match=message):
        validate_config(data)


@pytest.fixture(scope="module")
def imported_workflow(tmp_path_factory):
    """config/imported-example.yaml as it is, its corpus written where it says (relative to -d)."""
    workdir = tmp_path_factory.mktemp("imported")
    sources = write_corpus(workdir / yaml.safe_load(EXAMPLE.read_text())["imported"]["path"])
    done = snakemake(workdir, EXAMPLE, "--cores", "2", timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return workdir, sources


def test_the_imported_corpus_is_replayed_and_drawn(imported_workflow):
    workdir, sources = imported_workflow
    figures = workdir / "figures" / "imported-example"
    for suffix in (".pdf", ".png", ".data.csv", ".notes.json"):
        assert (figures / f"imported_replay{suffix}").stat().st_size > 0
    numbers = pd.read_csv(figures / "imported_replay.data.csv")
    assert set(numbers["policy"]) == {"TR/Th/0.5", "OTRC/St"}
    assert (numbers["n_tasks"] == len(sources) + 1).all()  # the chat log holds two conversations
    tr = numbers.set_index("policy").loc["TR/Th/0.5"]
    assert tr["tokens_est"] < 1.0 and tr["tokens_lo"] <= tr["tokens_est"] <= tr["tokens_hi"]
    thresholds = json.loads((workdir / "results" / "imported-example" / "imported" / "thresholds.json").read_text())
    assert thresholds["counts"] == "mixed" and thresholds["runs_by_counts"]["local"] >= 1


def test_the_figure_and_the_tables_point_back_to_the_source_files(imported_workflow):
    workdir, sources = imported_workflow
    sidecars = [
        workdir / "figures" / "imported-example" / "imported_replay.pdf.prov.json",
        workdir / "results" / "imported-example" / "tables" / "imported" / "replay" / "runs.parquet.prov.json",
        workdir / "results" / "imported-example" / "imported" / "thresholds.json.prov.json",
    ]
    for sidecar in sidecars:
        inputs = json.loads(sidecar.read_text())["inputs"]
        named = {(sidecar.parent / i["path"]).resolve(): i["sha256"] for i in inputs}
        for source in sources.values():
            assert source.resolve() in named, f"{sidecar} does not name {source}"
    run = next((workdir / "results" / "imported-example" / "imported" / "runs").rglob("run.json"))
    imported = json.loads(run.read_text())["imported"]
    assert (workdir / "results" / "imported-example" / "imported" / "runs" / imported["source_file"]).resolve() in {
        s.resolve() for s in sources.values()
    }
