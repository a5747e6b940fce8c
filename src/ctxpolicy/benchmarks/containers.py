"""Container images and command lines for the cluster benchmarks (Docker or Apptainer).

Pure functions that build names, paths and argv lists; `environment_available` is the one probe.
Containers keep the image's own user (the SWE-bench and Terminal-Bench images expect root); what
limits them is the runtime's flags: no network, a process cap and a memory cap (docs/sandbox.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ctxpolicy.sandbox.limits import DEFAULT_LIMITS, SandboxLimits

DEFAULT_SIF_CACHE = Path(os.environ.get("CTXPOLICY_SIF_CACHE", Path.home() / ".cache" / "ctxpolicy" / "sif"))
# what every apptainer call uses: a private, throw-away writable layer over the read-only image,
# root inside the container (the SWE-bench images are built for USER root), a clean environment
APPTAINER_EXEC_ARGS = ("--containall", "--cleanenv", "--fakeroot", "--writable-tmpfs")
# what mini-swe-agent's singularity environment uses by default, which our limits extend
MINISWEAGENT_APPTAINER_ARGS = ("--contain", "--cleanenv", "--fakeroot")


def docker_run_args(limits: SandboxLimits = DEFAULT_LIMITS) -> list[str]:
    """`docker run` flags for an agent's container: removed at the end, no network, capped."""
    return ["--rm", "--network", "none", "--pids-limit", str(limits.pids), "--memory", f"{limits.memory_mb}m"]


def apptainer_limit_args(limits: SandboxLimits = DEFAULT_LIMITS, *, cgroups: bool = False) -> list[str]:
    """Apptainer flags: its own network namespace with loopback only (works with --fakeroot), and
    the cgroup caps only when asked (`apptainer.cgroup_limits`: rootless cgroups need cgroup v2 with
    systemd, which many clusters lack, and apptainer then refuses to start)."""
    args = ["--net", "--network", "none"]
    if cgroups:
        args += ["--pids-limit", str(limits.pids), "--memory", f"{limits.memory_mb}m"]
    return args


def swebench_image(instance: dict[str, Any]) -> str:
    """The instance's official evaluation image, as the dataset names it or by the SWE-bench scheme."""
    image = instance.get("image") or instance.get("image_name") or instance.get("docker_image")
    if image:
        return image
    docker_safe_id = instance["instance_id"].replace("__", "_1776_")  # docker names cannot hold '__'
    return f"docker.io/swebench/sweb.eval.x86_64.{docker_safe_id}:latest".lower()


def docker_uri(image: str) -> str:
    return image if image.startswith("docker://") else f"docker://{image}"


def sif_path(image: str, cache_dir: Path = DEFAULT_SIF_CACHE) -> Path:
    """Where the image converted to a SIF file is cached (one file per image and tag)."""
    name = image.removeprefix("docker://").replace("/", "_").replace(":", "_")
    return Path(cache_dir) / f"{name}.sif"


def apptainer_build_argv(image: str, sif: Path, executable: str = "apptainer") -> list[str]:
    return [executable, "build", str(sif), docker_uri(image)]


def apptainer_exec_argv(
    sif: Path,
    command: str,
    *,
    binds: dict[Path, str] | None = None,
    cwd: str = "/testbed",
    executable: str = "apptainer",
    limit_args: list[str] | None = None,
) -> list[str]:
    limit_args = apptainer_limit_args() if limit_args is None else limit_args
    argv = [executable, "exec", *APPTAINER_EXEC_ARGS, *limit_args, "--pwd", cwd]
    for host, container in (binds or {}).items():
        argv += ["--bind", f"{host}:{container}:ro"]
    return [*argv, str(sif), "bash", "-c", command]


def docker_build_argv(tag: str, context: Path, executable: str = "docker") -> list[str]:
    return [executable, "build", "-t", tag, str(context)]


def environment_available(kind: str, executable: str | None = None) -> tuple[bool, str]:
    """(available, reason) for a container runtime on this machine."""
    if kind == "docker":
        exe = executable or "docker"
        if shutil.which(exe) is None:
            return False, f"{exe} is not installed"
        probe = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60)
        return (probe.returncode == 0, "the docker daemon does not answer" if probe.returncode else "")
    if kind == "apptainer":
        candidates = [executable] if executable else ["apptainer", "singularity"]
        found = [c for c in candidates if c and shutil.which(c)]
        return (bool(found), "" if found else f"none of {', '.join(candidates)} is installed")
    return False, f"unknown environment kind {kind!r}"


def apptainer_executable(cfg: dict[str, Any]) -> str:
    configured = (cfg.get("apptainer") or {}).get("executable")
    if configured:
        return configured
    return "apptainer" if shutil.which("apptainer") or not shutil.which("singularity") else "singularity"


def apptainer_cgroup_limits(cfg: dict[str, Any]) -> bool:
    return bool((cfg.get("apptainer") or {}).get("cgroup_limits"))


def minisweagent_environment_config(
    kind: str,
    image: str,
    *,
    cwd: str,
    timeout: int,
    env: dict[str, str],
    sif: Path | None = None,
    executable: str | None = None,
    limits: SandboxLimits = DEFAULT_LIMITS,
    apptainer_cgroups: bool = False,
) -> dict[str, Any]:
    """The config mini-swe-agent's `get_environment` takes for a Docker or Apptainer run."""
    if kind == "docker":
        config = {
            "environment_class": "docker",
            "image": image,
            "cwd": cwd,
            "timeout": timeout,
            "env": env,
            "interpreter": ["bash", "-c"],
            "run_args": docker_run_args(limits),
        }
    elif kind == "apptainer":
        config = {
            "environment_class": "singularity",
            "cwd": cwd,
            "timeout": timeout,
            "env": env,
            "image": str(sif) if sif is not None and Path(sif).is_file() else docker_uri(image),
            "exec_args": [*MINISWEAGENT_APPTAINER_ARGS, *apptainer_limit_args(limits, cgroups=apptainer_cgroups)],
        }
    else:
        raise ValueError(f"no container environment for kind {kind!r}")
    if executable:
        config["executable"] = executable
    return config
