"""Results bundles: export → import round trip, refusal of tampered or unsafe bundles, and the
restored modification times that let Snakemake see archived runs as present."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxpolicy import cli
from ctxpolicy.testing.runs import make_runs
from ctxpolicy.provenance import run_record_files, verify, write_sidecar
from ctxpolicy.provenance.bundle import (
    MANIFEST_NAME,
    BundleError,
    check_bundle,
    export_bundle,
    import_bundle,
    restored_mtimes,
    safe_relative,
)

OLD = 1_600_000_000  # long before any checkout: the runs were made elsewhere, long ago
CELLS = ("FC", "TR_Th_0.5__primary")


def touch(path: Path, seconds: float) -> None:
    os.utime(path, ns=(int(seconds * 1e9),) * 2)


def build_results(results: Path) -> None:
    """A small finished study, its files timed in the order the DAG made them."""
    make_runs(results / "runs", policies=("FC", "TR/Th/0.5"), tasks=2, attempts=1, calls_per_run=3)
    clock = iter(range(OLD, OLD + 1000))
    cell = {name: results / "runs/local/qwen05b" / name for name in CELLS}
    for path in run_record_files(cell["FC"]):
        touch(path, next(clock))
    (cell["FC"] / "cell.json").write_text('{"runs": 2}')
    touch(cell["FC"] / "cell.json", next(clock))
    thresholds = results / "thresholds/local/qwen05b.json"
    thresholds.parent.mkdir(parents=True)
    thresholds.write_text('{"source": "calibrated", "primary": 3000}')
    touch(thresholds, next(clock))
    for path in run_record_files(cell["TR_Th_0.5__primary"]):
        touch(path, next(clock))
    (cell["TR_Th_0.5__primary"] / "cell.json").write_text('{"runs": 2}')
    touch(cell["TR_Th_0.5__primary"] / "cell.json", next(clock))
    for name in CELLS:
        (cell[name] / "eval.json").write_text('{"graded": 2}')
        touch(cell[name] / "eval.json", next(clock))
    workspace = cell["FC"] / "task-0000__a1" / "workspace"
    workspace.mkdir()
    (workspace / "big.bin").write_bytes(b"\0" * 4096)
    table = results / "tables/runs.parquet"
    table.parent.mkdir()
    table.write_bytes(b"PAR1 runs")
    write_sidecar(table, config_path=None, inputs=run_record_files(results / "runs"))
    for path in (table, Path(f"{table}.prov.json")):
        touch(path, next(clock))


def files_under(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def original_mtimes(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def exported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "source/results"
    build_results(source)
    bundle = tmp_path / "bundle.tar.gz"
    manifest = export_bundle(source, bundle)
    return source, bundle, manifest


def rewrite(
    bundle: Path,
    out: Path,
    *,
    replace: dict[str, bytes] | None = None,
    drop: tuple[str, ...] = (),
    add: list[tuple[tarfile.TarInfo, bytes | None]] = (),
) -> Path:
    """A copy of ``bundle`` with some member contents replaced, dropped or added."""
    replace = replace or {}
    with tarfile.open(bundle) as src, tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT) as dst:
        for member in src:
            if member.name in drop:
                continue
            data = replace.get(member.name, src.extractfile(member).read())
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
        for info, data in add:
            if data is not None:
                info.size = len(data)
            dst.addfile(info, io.BytesIO(data) if data is not None else None)
    return out


def test_round_trip_restores_identical_files_in_dag_order(exported, tmp_path):
    source, bundle, manifest = exported
    before = original_mtimes(source)
    target = tmp_path / "reviewer/results"

    summary = import_bundle(bundle, target)

    expected = {k: v for k, v in files_under(source).items() if "/workspace/" not in k}
    assert files_under(target) == expected
    assert summary.written == len(expected) == len(manifest["files"])
    after = original_mtimes(target)

    def exported_order(path: str) -> tuple[bool, int]:
        return path.startswith("tables/"), before[path]

    # every pair keeps its order, simultaneous files stay simultaneous, tables come last
    order = sorted(after, key=exported_order)
    assert [after[p] for p in order] == sorted(after.values())
    for a, b in zip(order, order[1:]):
        assert (after[a] == after[b]) == (exported_order(a) == exported_order(b))
    assert min(after.values()) > OLD * 10**9 + 10**12  # moved up to the moment of import


def test_imported_table_sidecar_still_verifies(exported, tmp_path):
    source, bundle, _ = exported
    target = tmp_path / "elsewhere/res"
    import_bundle(bundle, target)
    checked, problems = verify(target / "tables/runs.parquet")
    assert problems == []
    assert checked == 1 + len(run_record_files(source / "runs"))


def test_manifest_lists_checksums_and_leaves_workspaces_out_unless_asked(exported, tmp_path):
    source, bundle, manifest = exported
    listed = {e["path"]: e for e in manifest["files"]}
    for rel, entry in listed.items():
        assert entry["sha256"] == hashlib.sha256((source / rel).read_bytes()).hexdigest()
        assert entry["mtime_ns"] == (source / rel).stat().st_mtime_ns
    assert "thresholds/local/qwen05b.json" in listed and "tables/runs.parquet.prov.json" in listed
    assert not any("workspace" in path for path in listed)
    with tarfile.open(bundle) as tar:
        assert tar.getnames()[-1] == MANIFEST_NAME

    with_ws = export_bundle(source, tmp_path / "with-workspaces.tar.gz", workspaces=True)
    assert "runs/local/qwen05b/FC/task-0000__a1/workspace/big.bin" in {e["path"] for e in with_ws["files"]}


def test_tampered_file_is_refused_by_name_before_anything_is_written(exported, tmp_path):
    _, bundle, _ = exported
    victim = "results/runs/local/qwen05b/TR_Th_0.5__primary/task-0001__a1/run.json"
    tampered = rewrite(bundle, tmp_path / "tampered.tar.gz", replace={victim: b'{"outcome": "submitted"}'})
    target = tmp_path / "reviewer/results"
    with pytest.raises(BundleError, match=f"{victim}: checksum mismatch"):
        import_bundle(tampered, target)
    assert not target.exists()


def test_missing_and_unlisted_files_are_refused(exported, tmp_path):
    _, bundle, _ = exported
    extra = tarfile.TarInfo("results/runs/local/qwen05b/FC/extra.json")
    dropped = "results/thresholds/local/qwen05b.json"
    changed = rewrite(bundle, tmp_path / "changed.tar.gz", drop=(dropped,), add=[(extra, b"{}")])
    with pytest.raises(BundleError) as refused:
        check_bundle(changed)
    message = str(refused.value)
    assert f"{dropped}: listed in MANIFEST.json but not in the bundle" in message
    assert "results/runs/local/qwen05b/FC/extra.json: not listed in MANIFEST.json" in message

    no_manifest = rewrite(bundle, tmp_path / "bare.tar.gz", drop=(MANIFEST_NAME,))
    with pytest.raises(BundleError, match="no MANIFEST.json"):
        check_bundle(no_manifest)


def traversal_member(name: str, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


@pytest.mark.parametrize(
    "member, data, problem",
    [
        (traversal_member("results/../../escaped.txt"), b"owned", "path leaves the results directory"),
        (traversal_member("/tmp/ctxpolicy-escaped.txt"), b"owned", "path leaves the results directory"),
        (traversal_member("results/runs/link", tarfile.SYMTYPE, "/etc/passwd"), None, "not a regular file"),
        (traversal_member("results/runs/hard", tarfile.LNKTYPE, "results/MANIFEST.json"), None, "not a regular file"),
    ],
)
def test_unsafe_members_are_refused(exported, tmp_path, member, data, problem):
    _, bundle, _ = exported
    unsafe = rewrite(bundle, tmp_path / "unsafe.tar.gz", add=[(member, data)])
    target = tmp_path / "deep/reviewer/results"
    with pytest.raises(BundleError, match=problem) as refused:
        import_bundle(unsafe, target)
    assert member.name in str(refused.value)
    assert not target.exists()
    assert not (tmp_path / "deep/escaped.txt").exists() and not (tmp_path / "escaped.txt").exists()


def test_manifest_path_leaving_results_is_refused(exported, tmp_path):
    _, bundle, manifest = exported
    manifest["files"].append({"path": "../outside.txt", "sha256": "0" * 64, "size": 0, "mtime_ns": 0})
    forged = rewrite(bundle, tmp_path / "forged.tar.gz", replace={MANIFEST_NAME: json.dumps(manifest).encode()})
    with pytest.raises(BundleError, match=r"'files\[\d+\].path': '../outside.txt' leaves the results directory"):
        import_bundle(forged, tmp_path / "results")


def test_import_refuses_to_replace_different_files_unless_asked(exported, tmp_path):
    _, bundle, _ = exported
    target = tmp_path / "reviewer/results"
    import_bundle(bundle, target)
    local = target / "thresholds/local/qwen05b.json"
    local.write_text('{"edited": true}')
    with pytest.raises(BundleError, match="thresholds/local/qwen05b.json"):
        import_bundle(bundle, target)
    assert local.read_text() == '{"edited": true}'
    summary = import_bundle(bundle, target, overwrite=True)
    assert summary.written == 1 and local.read_text().startswith('{"source"')


def test_restored_mtimes_keep_order_and_ties_and_put_tables_last():
    files = [
        {"path": "tables/t.parquet", "mtime_ns": 5},
        {"path": "runs/a/cell.json", "mtime_ns": 9},
        {"path": "runs/a/x/run.json", "mtime_ns": 3},
        {"path": "runs/a/x/calls.jsonl", "mtime_ns": 3},
        {"path": "thresholds/m.json", "mtime_ns": 7},
    ]
    assert restored_mtimes(files, now_ns=10_000, step_ns=10) == {
        "runs/a/x/run.json": 9_970,
        "runs/a/x/calls.jsonl": 9_970,
        "thresholds/m.json": 9_980,
        "runs/a/cell.json": 9_990,
        "tables/t.parquet": 10_000,
    }


@given(
    st.lists(st.tuples(st.sampled_from(["runs", "thresholds", "tables"]), st.integers(0, 40)), min_size=1, max_size=25)
)
def test_restored_mtimes_preserve_every_pairwise_order(items):
    files = [{"path": f"{top}/f{i}", "mtime_ns": mtime} for i, (top, mtime) in enumerate(items)]
    restored = restored_mtimes(files, now_ns=10**18)
    exported = {e["path"]: (e["path"].startswith("tables/"), e["mtime_ns"]) for e in files}
    for a in exported:
        for b in exported:
            assert (exported[a] < exported[b]) == (restored[a] < restored[b])
    assert max(restored.values()) == 10**18


@given(st.lists(st.sampled_from(["a", "b.json", "..", ".", "", "/", "\\", "c/..", "results"]), max_size=6))
def test_safe_relative_never_leaves_its_base(parts):
    name = "/".join(parts)
    if safe_relative(name) is not None:
        resolved = os.path.normpath(os.path.join("/base", name))
        assert resolved.startswith("/base/") or resolved == "/base"


def test_bundle_cli_round_trip_and_refusal(exported, tmp_path, capsys):
    source, _, _ = exported
    assert cli.main(["bundle", "export", "--results", str(source), "--out", "b.tar.gz"]) == 0
    assert "b.tar.gz: " in capsys.readouterr().out
    assert cli.main(["bundle", "check", "b.tar.gz"]) == 0
    assert "all checksums match" in capsys.readouterr().out
    assert cli.main(["bundle", "import", "b.tar.gz", "--results", "restored"]) == 0
    assert "restored " in capsys.readouterr().out
    assert (tmp_path / "restored/tables/runs.parquet").read_bytes() == b"PAR1 runs"

    victim = "results/tables/runs.parquet"
    rewrite(tmp_path / "b.tar.gz", tmp_path / "bad.tar.gz", replace={victim: b"PAR1 forged"})
    assert cli.main(["bundle", "import", "bad.tar.gz", "--results", "other"]) == 2
    assert f"{victim}: checksum mismatch" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()

    assert cli.main(["bundle", "export", "--results", "nowhere", "--out", "x.tar.gz"]) == 2
    assert "nowhere: no runs, replay, thresholds, tables directory to bundle" in capsys.readouterr().err


SNAKEFILE = """
CELLS = ["FC", "TR_Th_0.5__primary"]
wildcard_constraints: cell="TR.*"

rule all:
    input: "results/tables/runs.parquet"

rule run_fc:
    input: "config/config.yaml"
    output: "results/runs/local/qwen05b/FC/cell.json"
    shell: "exit 1"

rule calibrate:
    input: "results/runs/local/qwen05b/FC/cell.json"
    output: "results/thresholds/local/qwen05b.json"
    shell: "exit 1"

rule run_cell:
    input: "config/config.yaml", "results/thresholds/local/qwen05b.json"
    output: "results/runs/local/qwen05b/{cell}/cell.json"
    shell: "exit 1"

rule evaluate:
    input: "results/runs/local/qwen05b/{any}/cell.json"
    output: "results/runs/local/qwen05b/{any}/eval.json"
    shell: "exit 1"

rule aggregate:
    input: expand("results/runs/local/qwen05b/{c}/eval.json", c=CELLS)
    output: "results/tables/runs.parquet"
    shell: "exit 1"
"""


def snakemake_jobs(workdir: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--cores", "1", "-d", str(workdir), "-s", str(workdir / "Snakefile")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def fresh_checkout(root: Path) -> Path:
    (root / "config").mkdir(parents=True)
    (root / "config/config.yaml").write_text("study: local\n")
    (root / "Snakefile").write_text(SNAKEFILE)
    return root


def test_snakemake_sees_imported_runs_as_present(exported, tmp_path):
    _, bundle, _ = exported

    # Control: plain extraction keeps the old times, older than the fresh checkout: all rerun.
    plain = fresh_checkout(tmp_path / "plain")
    with tarfile.open(bundle) as tar:
        tar.extractall(plain, filter="data")
    assert "run_fc" in snakemake_jobs(plain)

    checkout = fresh_checkout(tmp_path / "checkout")
    import_bundle(bundle, checkout / "results")
    out = snakemake_jobs(checkout)
    assert "Nothing to be done" in out, out


def test_a_file_that_is_not_a_bundle_is_refused(tmp_path):
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar archive at all" * 10)
    with pytest.raises(BundleError, match="junk.tar.gz: unreadable bundle"):
        import_bundle(junk, tmp_path / "results")
    assert not (tmp_path / "results").exists()
