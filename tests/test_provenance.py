"""Provenance sidecars: what they record, and how show and verify follow them back to run records."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import require

from ctxpolicy import cli, gitstate
from ctxpolicy.agent.versions import software_versions
from ctxpolicy.provenance import (
    SidecarError,
    code_state,
    package_versions,
    read_sidecar,
    run_record_files,
    sha256_file,
    sidecar_path,
    trace,
    verify,
    write_sidecar,
)

MODEL = {
    "name": "qwen2.5-coder-0.5b-instruct",
    "file": "/models/qwen.gguf",
    "sha256": "ab" * 32,
    "hub_id": None,
    "revision": None,
}
RUN_COMMIT = "c0ffee" * 6 + "abcd"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_run(cell_dir: Path, task_id: str, attempt: int = 1, *, verdict: bool = True) -> Path:
    run_dir = cell_dir / f"{task_id}__a{attempt}"
    run_dir.mkdir(parents=True)
    identity = {
        "benchmark": cell_dir.parts[-3],
        "model": cell_dir.parts[-2],
        "cell": cell_dir.name,
        "task_id": task_id,
        "attempt": attempt,
    }
    record = {
        "schema_version": 1,
        "complete": True,
        "identity": identity,
        "outcome": "submitted",
        "versions": {"git_commit": RUN_COMMIT, "git_dirty": False, "model": MODEL},
    }
    (run_dir / "run.json").write_text(json.dumps(record))
    (run_dir / "calls.jsonl").write_text(json.dumps({"index": 0, "kind": "agent"}) + "\n")
    (run_dir / "messages.jsonl").write_text("{}\n")
    if verdict:
        (run_dir / "verdict.json").write_text(json.dumps({"resolved": task_id.endswith("1")}))
    (run_dir / "workspace").mkdir()
    (run_dir / "workspace" / "run.json").write_text("not a run record")
    return run_dir


@pytest.fixture
def study(tmp_path, monkeypatch):
    """A two-level chain: figure ← table ← six run records in two cells."""
    monkeypatch.chdir(tmp_path)
    runs = Path("results/runs")
    cell_files = []
    for cell in ("FC", "TR_Th_0.5__primary"):
        cell_dir = runs / "local" / "qwen05b" / cell
        for task in ("t-1", "t-2", "t-3"):
            make_run(cell_dir, task)
        for name in ("cell.json", "eval.json"):
            (cell_dir / name).write_text(json.dumps({"cell": cell, "file": name}))
            cell_files.append(cell_dir / name)
    Path("config").mkdir()
    Path("config/config.yaml").write_text("study: local\n")
    Path("notebooks").mkdir()
    Path("notebooks/fig2.ipynb").write_text('{"cells": []}')
    Path("results/tables").mkdir(parents=True)
    table = Path("results/tables/runs.parquet")
    table.write_bytes(b"PAR1 table")
    write_sidecar(
        table, config_path=Path("config/config.yaml"), inputs=run_record_files(runs) + cell_files, repo_root=tmp_path
    )
    Path("figures").mkdir()
    figure = Path("figures/fig2.pdf")
    figure.write_bytes(b"%PDF figure")
    write_sidecar(
        figure,
        config_path=Path("config/config.yaml"),
        inputs=[table],
        notebook=Path("notebooks/fig2.ipynb"),
        extra={"rule": "fig2"},
        repo_root=tmp_path,
    )
    return {"runs": runs, "table": table, "figure": figure}


def test_sha256_file_streams_large_files(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(bytes(range(256)) * 40_000)  # several read blocks
    assert sha256_file(path) == digest(path)


def test_run_record_files_are_what_the_tables_read_and_skip_workspaces(study):
    files = run_record_files(study["runs"])
    assert len(files) == 24
    assert {f.name for f in files} == {"run.json", "calls.jsonl", "messages.jsonl", "verdict.json"}
    assert not any("workspace" in f.parts for f in files)


def test_table_sidecar_records_every_run_file_with_its_hash(study):
    sidecar = read_sidecar(sidecar_path(study["table"]))
    base = study["table"].parent
    recorded = {(base / e["path"]).resolve(): e["sha256"] for e in sidecar["inputs"]}
    expected = {f.resolve(): digest(f) for f in [*run_record_files(study["runs"]), *study["runs"].glob("*/*/*/*.json")]}
    assert len(expected) == 24 + 4
    assert recorded == expected
    assert sidecar["target"] == {"path": "runs.parquet", "sha256": digest(study["table"])}
    assert sidecar["config"]["sha256"] == digest(Path("config/config.yaml"))
    assert (base / sidecar["config"]["path"]).resolve() == Path("config/config.yaml").resolve()
    assert sidecar["models"] == [MODEL]  # from run.json versions.model, deduplicated
    assert sidecar["notebook"] is None
    assert sidecar["packages"]["ctxpolicy"] is not None


def test_figure_sidecar_points_to_its_inputs_sidecar_and_carries_their_models(study):
    sidecar = read_sidecar(sidecar_path(study["figure"]))
    [entry] = sidecar["inputs"]
    base = study["figure"].parent
    assert (base / entry["path"]).resolve() == study["table"].resolve()
    assert entry["sha256"] == digest(study["table"])
    assert (base / entry["sidecar"]).resolve() == sidecar_path(study["table"]).resolve()
    assert sidecar["notebook"]["sha256"] == digest(Path("notebooks/fig2.ipynb"))
    assert sidecar["models"] == [MODEL]
    assert sidecar["extra"] == {"rule": "fig2"}


def test_sidecar_is_deterministic_apart_from_its_timestamp(study):
    path = sidecar_path(study["figure"])
    first = path.read_text()
    write_sidecar(
        study["figure"],
        config_path=Path("config/config.yaml"),
        inputs=[study["table"]],
        notebook=Path("notebooks/fig2.ipynb"),
        extra={"rule": "fig2"},
        repo_root=Path.cwd(),
    )
    second = path.read_text()
    strip = lambda text: {k: v for k, v in json.loads(text).items() if k != "recorded_at"}  # noqa: E731
    assert strip(first) == strip(second)
    assert second == json.dumps(json.loads(second), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_write_sidecar_refuses_a_missing_input_naming_it(study):
    with pytest.raises(SidecarError, match="results/tables/gone.parquet: input does not exist"):
        write_sidecar(study["figure"], config_path=None, inputs=[Path("results/tables/gone.parquet")])
    with pytest.raises(SidecarError, match="is not a regular file"):
        write_sidecar(study["figure"], config_path=None, inputs=[study["runs"]])


def make_repo(path: Path, *tracked: str) -> tuple[list[str], str]:
    """A git repository at ``path`` with one commit of ``tracked`` files; its git command and HEAD."""
    require(shutil.which("git") is not None, "git")
    path.mkdir(parents=True)
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    for name in tracked:
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text("one\n")
    subprocess.run([*git, "add", *tracked], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return git, head


def test_code_state_reads_commit_and_dirty_means_tracked_changes_only(tmp_path):
    repo = tmp_path / "repo"
    git, head = make_repo(repo, "a.txt")

    assert code_state(repo) == {"commit": head, "dirty": False}
    (repo / "results").mkdir()
    (repo / "results" / "fig2.pdf").write_bytes(b"%PDF")  # untracked outputs do not count
    assert code_state(repo) == {"commit": head, "dirty": False}
    (repo / "a.txt").write_text("two\n")
    assert code_state(repo) == {"commit": head, "dirty": True}
    subprocess.run([*git, "add", "a.txt"], check=True)  # staged counts too
    assert code_state(repo) == {"commit": head, "dirty": True}

    sidecar = write_sidecar(repo / "a.txt", config_path=None, inputs=[], repo_root=repo)
    assert read_sidecar(sidecar)["code"] == {"commit": head, "dirty": True}

    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert code_state(outside) == {"commit": None, "dirty": None}


def test_sidecar_written_outside_any_repo_names_the_package_checkouts_commit(tmp_path, monkeypatch):
    require(shutil.which("git") is not None, "git")
    require(gitstate.code_repo() == gitstate.PACKAGE_DIR, "ctxpolicy installed from a git checkout")
    expected = code_state(gitstate.PACKAGE_DIR)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert code_state(elsewhere)["commit"] is None
    (elsewhere / "table.csv").write_text("a\n1\n")
    sidecar = write_sidecar(elsewhere / "table.csv", config_path=None, inputs=[])
    assert read_sidecar(sidecar)["code"]["commit"] == expected["commit"] is not None


def test_code_state_falls_back_to_the_working_directory_then_to_none(tmp_path, monkeypatch):
    installed = tmp_path / "site-packages" / "ctxpolicy"  # not tracked by any repository
    installed.mkdir(parents=True)
    monkeypatch.setattr(gitstate, "PACKAGE_DIR", installed)
    _, head = make_repo(tmp_path / "checkout", "a.txt")
    monkeypatch.chdir(tmp_path / "checkout")
    assert code_state() == {"commit": head, "dirty": False}
    monkeypatch.chdir(installed)
    assert gitstate.code_repo() is None and code_state() == {"commit": None, "dirty": None}


@pytest.fixture
def fresh_software_versions():
    software_versions.cache_clear()
    yield software_versions
    software_versions.cache_clear()


def test_run_records_and_sidecars_share_the_package_checkout_and_dirty_rule(
    tmp_path, monkeypatch, fresh_software_versions
):
    checkout = tmp_path / "checkout"
    git, head = make_repo(checkout, "src/ctxpolicy/__init__.py")
    monkeypatch.setattr(gitstate, "PACKAGE_DIR", checkout / "src" / "ctxpolicy")
    monkeypatch.chdir(tmp_path)
    (checkout / "results.csv").write_text("untracked\n")
    (checkout / "src" / "ctxpolicy" / "__init__.py").write_text("two\n")
    (tmp_path / "table.csv").write_text("a\n")

    sidecar = read_sidecar(write_sidecar(tmp_path / "table.csv", config_path=None, inputs=[]))
    versions = fresh_software_versions()
    assert sidecar["code"] == {"commit": head, "dirty": True}
    assert (versions["git_commit"], versions["git_dirty"]) == (head, True)

    subprocess.run([*git, "checkout", "-q", "--", "src/ctxpolicy/__init__.py"], check=True)
    fresh_software_versions.cache_clear()
    sidecar = read_sidecar(write_sidecar(tmp_path / "table.csv", config_path=None, inputs=[]))
    versions = fresh_software_versions()
    assert sidecar["code"] == {"commit": head, "dirty": False}
    assert (versions["git_commit"], versions["git_dirty"]) == (head, False)


def test_package_versions_reads_installed_metadata():
    versions = package_versions(["pytest", "no-such-distribution-xyz"])
    assert versions == {"no-such-distribution-xyz": None, "pytest": pytest.__version__}
    assert set(package_versions()) >= {"ctxpolicy", "snakemake", "mini-swe-agent", "xllamacpp"}


def test_verify_passes_an_untouched_chain(study):
    checked, problems = verify(study["figure"])
    assert problems == []
    # figure, config, notebook, table and its sidecar, 24 run files, cell.json and eval.json of two cells
    assert checked == 33


def test_verify_names_each_changed_and_missing_file_along_the_chain(study):
    changed_run = study["runs"] / "local/qwen05b/FC/t-2__a1/run.json"
    changed_run.write_text(changed_run.read_text().replace("submitted", "error"))
    missing_verdict = study["runs"] / "local/qwen05b/TR_Th_0.5__primary/t-3__a1/verdict.json"
    missing_verdict.unlink()
    Path("notebooks/fig2.ipynb").write_text('{"cells": [1]}')

    _, problems = verify(study["figure"])
    found = {(p.path, p.problem, p.sidecar) for p in problems}
    assert found == {
        (changed_run.as_posix(), "changed", "results/tables/runs.parquet.prov.json"),
        (missing_verdict.as_posix(), "missing", "results/tables/runs.parquet.prov.json"),
        ("notebooks/fig2.ipynb", "changed", "figures/fig2.pdf.prov.json"),
    }
    [run_problem] = [p for p in problems if p.problem == "missing"]
    assert run_problem.actual is None and len(run_problem.recorded) == 64


def test_verify_reports_a_vanished_intermediate_sidecar(study):
    sidecar_path(study["table"]).unlink()
    _, problems = verify(study["figure"])
    assert [(p.path, p.problem) for p in problems] == [("results/tables/runs.parquet.prov.json", "sidecar missing")]


def test_verify_refuses_a_target_without_sidecar(study):
    with pytest.raises(SidecarError, match="figures/other.pdf.prov.json: no provenance sidecar"):
        verify(Path("figures/other.pdf"))


def test_malformed_sidecar_is_named_with_its_field(study):
    path = sidecar_path(study["table"])
    data = json.loads(path.read_text())
    data["inputs"][3] = {"path": "x"}
    path.write_text(json.dumps(data))
    with pytest.raises(SidecarError, match=r"runs.parquet.prov.json: field 'inputs\[3\]'"):
        read_sidecar(path)


def test_trace_follows_figure_to_table_to_run_records(study):
    tree = trace(study["figure"])
    assert tree["path"] == "figures/fig2.pdf"
    assert tree["notebook"]["path"] == "notebooks/fig2.ipynb"
    [table] = tree["inputs"]
    assert table["path"] == "results/tables/runs.parquet"
    assert table["sidecar"] == "results/tables/runs.parquet.prov.json"
    assert len(table["runs"]) == 6
    run = table["runs"][0]
    assert run["identity"]["task_id"] == "t-1" and run["identity"]["cell"] == "FC"
    assert run["model"]["sha256"] == MODEL["sha256"]
    assert run["code"] == {"commit": RUN_COMMIT, "dirty": False}
    assert [f["path"].rsplit("/", 1)[1] for f in run["files"]] == [
        "calls.jsonl",
        "messages.jsonl",
        "run.json",
        "verdict.json",
    ]
    assert [c["dir"] for c in table["cells"]] == [
        "results/runs/local/qwen05b/FC",
        "results/runs/local/qwen05b/TR_Th_0.5__primary",
    ]
    assert [f["path"].rsplit("/", 1)[1] for f in table["cells"][0]["files"]] == ["cell.json", "eval.json"]
    assert table["inputs"] == []


def test_show_prints_the_chain(study, capsys):
    assert cli.main(["provenance", "show", "figures/fig2.pdf"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("figures/fig2.pdf  sha256 " + digest(study["figure"])[:12])
    assert "    results/tables/runs.parquet  sha256 " + digest(study["table"])[:12] in out
    assert "runs      6 runs in 2 cells" in out
    fc_line = next(line for line in lines if "local/qwen05b/FC " in line)
    assert "3 runs (3 submitted)" in fc_line
    assert f"model sha256 {MODEL['sha256'][:12]}" in fc_line
    assert f"code {RUN_COMMIT[:12]} (clean)" in fc_line
    assert fc_line.endswith("+ cell.json, eval.json")

    assert cli.main(["provenance", "show", "figures/fig2.pdf", "--each-run"]) == 0
    assert "t-3 a1  submitted" in capsys.readouterr().out

    assert cli.main(["provenance", "show", "figures/fig2.pdf", "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    assert tree["inputs"][0]["runs"][5]["identity"]["cell"] == "TR_Th_0.5__primary"


def test_verify_cli_exit_codes_and_listing(study, capsys):
    assert cli.main(["provenance", "verify", "figures/fig2.pdf"]) == 0
    assert "verified figures/fig2.pdf: 33 files unchanged" in capsys.readouterr().out

    gone = study["runs"] / "local/qwen05b/FC/t-1__a1/calls.jsonl"
    gone.unlink()
    assert cli.main(["provenance", "verify", "figures/fig2.pdf", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["ok"] is False
    assert [(p["path"], p["problem"]) for p in result["results"][0]["problems"]] == [(gone.as_posix(), "missing")]

    assert cli.main(["provenance", "verify", "figures/nothing.pdf"]) == 2
    assert "figures/nothing.pdf.prov.json: no provenance sidecar" in capsys.readouterr().err


def test_record_cli_gathers_inputs_from_list_glob_and_runs(study, capsys):
    Path("inputs.txt").write_text(
        "# run files\n" + "\n".join(str(p) for p in run_record_files(study["runs"] / "local/qwen05b/FC")) + "\n\n"
    )
    Path("results/thresholds").mkdir()
    Path("results/thresholds/local.json").write_text("{}")
    Path("results/tables/calls.parquet").write_bytes(b"PAR1 calls")
    code = cli.main(
        [
            "provenance",
            "record",
            "results/tables/runs.parquet",
            "results/tables/calls.parquet",
            "--config",
            "config/config.yaml",
            "--inputs-from",
            "inputs.txt",
            "--runs",
            str(study["runs"] / "local/qwen05b/TR_Th_0.5__primary/t-1__a1"),
            str(study["runs"] / "local/qwen05b/TR_Th_0.5__primary/t-2__a1"),
            "--runs",
            str(study["runs"] / "local/qwen05b/TR_Th_0.5__primary/t-3__a1"),
            "--inputs-glob",
            "results/thresholds/**/*.json",
            "--extra",
            "rule=aggregate",
        ]
    )
    assert code == 0
    for table in ("runs", "calls"):
        sidecar = read_sidecar(f"results/tables/{table}.parquet.prov.json")
        paths = {e["path"] for e in sidecar["inputs"]}
        assert len(paths) == 25 and "../thresholds/local.json" in paths
        assert sidecar["extra"] == {"rule": "aggregate"}
    assert capsys.readouterr().out.split() == [
        "results/tables/runs.parquet.prov.json",
        "results/tables/calls.parquet.prov.json",
    ]

    assert cli.main(["provenance", "record", "figures/fig2.pdf", "--inputs-glob", "nothing/*.json"]) == 2
    assert "--inputs-glob 'nothing/*.json': matched no files" in capsys.readouterr().err


def test_show_flags_run_records_that_vanished(study, capsys):
    (study["runs"] / "local/qwen05b/FC/t-2__a1/run.json").unlink()
    assert cli.main(["provenance", "show", "figures/fig2.pdf", "--each-run"]) == 0
    out = capsys.readouterr().out
    assert "local/qwen05b/FC                  3 runs (1 run.json missing, 2 submitted)" in out
    assert "t-2__a1  run.json missing" in out


def test_verify_rehashes_model_files_only_when_asked(study, tmp_path):
    assert verify(study["figure"])[1] == []
    _, problems = verify(study["figure"], models=True)
    assert {(p.path, p.problem) for p in problems} == {(MODEL["file"], "missing")}


def test_run_record_files_skip_runs_moved_aside_as_stale(tmp_path):
    from ctxpolicy.provenance.runs import run_record_files

    cell = tmp_path / "local" / "m" / "TR_Th_0.5__primary"
    for run in (cell / "t-1__a1", cell / "stale" / "t-1__a1"):
        run.mkdir(parents=True)
        (run / "run.json").write_text("{}")
    assert run_record_files(tmp_path) == [cell / "t-1__a1" / "run.json"]


def test_sidecars_without_input_sidecar_hashes_are_still_read_and_followed(study, capsys):
    figure_sidecar = sidecar_path(study["figure"])
    data = json.loads(figure_sidecar.read_text())
    assert all("sidecar_sha256" in entry for entry in data["inputs"] if "sidecar" in entry)
    for entry in data["inputs"]:  # a sidecar written before the pointers carried a hash
        entry.pop("sidecar_sha256", None)
    figure_sidecar.write_text(json.dumps(data))
    checked, problems = verify(study["figure"])
    assert (checked, problems) == (32, [])
    assert trace(study["figure"])["inputs"][0]["runs"]
    run_json = sorted(study["runs"].rglob("run.json"))[0]
    run_json.write_text(run_json.read_text().replace("submitted", "error"))
    assert [(p.path, p.problem) for p in verify(study["figure"])[1]] == [(run_json.as_posix(), "changed")]
