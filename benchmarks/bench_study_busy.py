"""The local study on a busy machine: does it finish, with every figure, and how long does it take?

    python3 benchmarks/bench_study_busy.py [--repo PATH_OR_URL] [--dir DIR] [--burners N]
                                           [--max-burn-s S] [--python-env VENV] [-- SNAKEMAKE_ARGS]

Clones the repository (default: this one, its committed HEAD) into a fresh DIR (default: a new
temporary directory), starts N CPU-burning processes (default: one per core) that spin until
the study ends or S seconds have passed (default 3 hours), runs `bash scripts/study.sh` in the
clone (install included), and prints the wall time, the load average and the study's own end
summary. With --python-env VENV the install is skipped: the clone's code runs with VENV's
interpreter (PYTHONPATH=DIR/src), for machines where the environment already exists. Arguments
after `--` go to Snakemake (a target, to check the benchmark itself on a small part).

Not part of scripts/test.sh: it takes as long as the study and keeps every core busy on purpose.
The measured time goes into docs/workflow.md ("On a busy machine").
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def burn(stop_at: float) -> None:
    """Spin until the deadline (the parent also terminates burners once the study ends)."""
    x = 0
    while time.time() < stop_at:
        for _ in range(100_000):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def study_command(clone: Path, python_env: Path | None, extra: list[str]) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    env.pop("SNAKEMAKE_PROFILE", None)
    if python_env is None:
        return ["bash", "scripts/study.sh", *extra], env
    venv = python_env.resolve()  # the real path: the sandbox mounts resolved prefixes only
    env["PYTHONPATH"] = str(clone / "src")
    script = (
        f"{shlex.quote(str(venv))}/bin/snakemake --cores 2 {shlex.join(extra)}; status=$?; "
        f"{shlex.quote(str(venv))}/bin/python workflow/scripts/study_summary.py --config config/config.yaml; "
        "exit $status"
    )
    return ["bash", "-c", script], env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", default=str(ROOT), help="what to clone (default: this repository)")
    parser.add_argument("--dir", type=Path, help="clone into this new directory (default: a temporary one)")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 2, help="CPU-burning processes")
    parser.add_argument("--max-burn-s", type=float, default=3 * 3600, help="burners stop after this at the latest")
    parser.add_argument("--python-env", type=Path, help="an existing virtualenv: skip the install")
    parser.add_argument("snakemake_args", nargs="*", help="after --: arguments for Snakemake")
    args = parser.parse_args()

    clone = args.dir or Path(tempfile.mkdtemp(prefix="ctxpolicy-busy-")) / "ctxpolicy"
    if clone.exists() and any(clone.iterdir()):
        sys.exit(f"bench_study_busy: {clone} is not empty; give a new --dir")
    subprocess.run(["git", "clone", "-q", args.repo, str(clone)], check=True)
    commit = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    command, env = study_command(clone, args.python_env, args.snakemake_args)

    stop_at = time.time() + args.max_burn_s
    burners = [multiprocessing.Process(target=burn, args=(stop_at,), daemon=True) for _ in range(args.burners)]
    for process in burners:
        process.start()
    print(
        f"bench_study_busy: {clone} at {commit}; {args.burners} burners; load before "
        f"{os.getloadavg()[0]:.1f}; running {' '.join(command)}",
        flush=True,
    )
    start = time.monotonic()
    log_path = clone / "bench_study_busy.log"
    try:
        with open(log_path, "w") as log:
            done = subprocess.run(command, cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT)
    finally:
        for process in burners:
            process.terminate()
        for process in burners:
            process.join()
    wall = time.monotonic() - start
    output = log_path.read_text(errors="replace")
    summary = output[output.rfind("== study summary") :] if "== study summary" in output else "(no summary)"
    print(
        f"exit {done.returncode} after {wall / 60:.1f} min ({wall:.0f} s); load average now "
        + " ".join(f"{x:.1f}" for x in os.getloadavg())
        + f"; log {log_path}"
    )
    print(summary.rstrip())
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main())
