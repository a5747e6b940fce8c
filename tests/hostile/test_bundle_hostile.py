"""Bundles a hostile exporter made: sizes that lie, sparse members, more than the cap, and a
target directory whose folders are links out of it. Nothing of them may be written."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from ctxpolicy import cli
from ctxpolicy.provenance.bundle import BUNDLE_FORMAT, SCHEMA_VERSION, BundleError, check_bundle, import_bundle
from ctxpolicy.testing.runs import make_runs

MEMBER = "runs/local/qwen05b/FC/task-0000__a1/big.bin"


def manifest(entries: list[dict]) -> bytes:
    return json.dumps({"format": BUNDLE_FORMAT, "schema_version": SCHEMA_VERSION, "files": entries}).encode()


def entry(path: str, sha256: str, size: int) -> dict:
    return {"path": path, "sha256": sha256, "size": size, "mtime_ns": 1_700_000_000_000_000_000}


def small_bundle(tmp_path: Path, data: bytes, listed_size: int) -> Path:
    """One member holding `data` whose checksum the manifest gets right and whose size it states."""
    bundle = tmp_path / "lying.tar.gz"
    body = manifest([entry(MEMBER, hashlib.sha256(data).hexdigest(), listed_size)])
    with tarfile.open(bundle, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, content in ((f"results/{MEMBER}", data), ("MANIFEST.json", body)):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return bundle


def test_a_member_larger_than_its_manifest_size_is_refused(tmp_path: Path):
    bundle = small_bundle(tmp_path, b"x" * 100_000, listed_size=10)
    with pytest.raises(BundleError, match="size mismatch .*10 bytes, the member 100000"):
        check_bundle(bundle)
    target = tmp_path / "reviewer" / "results"
    with pytest.raises(BundleError):
        import_bundle(bundle, target)
    assert not target.exists()


def test_a_sparse_member_is_refused_before_it_is_read(tmp_path: Path):
    """The issue's case at a smaller scale: a member of 256 MiB of holes, listed as 10 bytes
    with the right checksum, in a bundle of a few KB."""
    assert shutil.which("tar"), "GNU tar makes the sparse member"
    source = tmp_path / "source"
    big = source / "results" / MEMBER
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(256 << 20)
    digest = hashlib.sha256()
    with open(big, "rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    (source / "MANIFEST.json").write_bytes(manifest([entry(MEMBER, digest.hexdigest(), 10)]))
    bundle = tmp_path / "sparse.tar.gz"
    subprocess.run(["tar", "-C", str(source), "--sparse", "-czf", str(bundle), "results", "MANIFEST.json"], check=True)
    assert bundle.stat().st_size < 64 << 10
    with pytest.raises(BundleError, match="a sparse member"):
        check_bundle(bundle)
    target = tmp_path / "reviewer" / "results"
    with pytest.raises(BundleError, match="a sparse member"):
        import_bundle(bundle, target)
    assert not target.exists()


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    results = tmp_path / "source" / "results"
    make_runs(results / "runs", policies=("FC",), tasks=2, attempts=1, calls_per_run=2)
    bundle = tmp_path / "bundle.tar.gz"
    assert cli.main(["bundle", "export", "--results", str(results), "--out", str(bundle)]) == 0
    return bundle


def test_a_bundle_past_the_total_cap_is_refused(exported: Path, tmp_path: Path, capsys):
    capsys.readouterr()
    assert cli.main(["bundle", "check", str(exported), "--max-size", "1K"]) == 2
    assert "more than the cap of 1024 bytes" in capsys.readouterr().err
    target = tmp_path / "reviewer" / "results"
    assert cli.main(["bundle", "import", str(exported), "--results", str(target), "--max-size", "1K"]) == 2
    assert "more than the cap" in capsys.readouterr().err and not target.exists()
    assert cli.main(["bundle", "check", str(exported), "--max-size", "1G"]) == 0  # the cap is the caller's
    with pytest.raises(SystemExit) as exc:  # argparse: no size
        cli.main(["bundle", "check", str(exported), "--max-size", "lots"])
    assert exc.value.code == 2 and "'lots' is no size" in capsys.readouterr().err


def test_a_linked_folder_inside_the_target_does_not_let_import_write_outside(exported: Path, tmp_path: Path):
    target = tmp_path / "reviewer" / "results"
    target.mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, target / "runs")
    with pytest.raises(BundleError, match=r"symbolic links.*\n  runs$"):
        import_bundle(exported, target)
    assert list(outside.iterdir()) == []
    (target / "runs").unlink()  # deeper down, too
    (target / "runs" / "local").mkdir(parents=True)
    os.symlink(outside, target / "runs" / "local" / "qwen05b")
    with pytest.raises(BundleError, match=r"runs/local/qwen05b"):
        import_bundle(exported, target)
    assert list(outside.iterdir()) == []
