"""Shared test fixtures.

Tests that need a real external component (the embedded LLM, bubblewrap, the local SLURM)
use the ``require`` helper: it skips with the reason when the component is missing, unless
CTXPOLICY_REQUIRE_ALL=1 (set by scripts/test.sh and CI), where a missing component fails.

scripts/test.sh runs the suite on every core (pytest-xdist, ``-n auto --dist loadgroup``: a
worker per core and one more, capped below). Each worker is its own pytest session: a session fixture that builds a
tree on disk shares it through ``built_once`` (one build, under a file lock, for all workers);
tests that must not run beside each other carry ``pytest.mark.xdist_group(NAME)``: a group runs on
one worker, one test after the other (README, "Tests and benchmarks"). The units go out longest
first, by each test's time in the last run (kept in pytest's cache, tests/xdist_scheduling.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

MAX_WORKERS = 4  # -n auto: at most this many workers (each holds ~1 GB)


@pytest.hookimpl(optionalhook=True)  # xdist's hook: the suite also runs without xdist (-p no:xdist)
def pytest_xdist_auto_num_workers(config) -> int | None:
    """``-n auto``: one worker more than the cores this process may use (its CPU affinity; xdist's
    own default counts physical cores, one on a 2-vCPU machine), at most ``MAX_WORKERS``. A worker
    often waits (the SLURM executor's polling, sandboxes starting, another worker's build of a
    shared data set): on 2 cores two workers kept them 145 % busy, three 155-159 % (README,
    "Tests and benchmarks"). PYTEST_XDIST_AUTO_NUM_WORKERS
    (xdist's variable, read by its own hook) sets the number instead; 0 runs in one process."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return min(len(os.sched_getaffinity(0)) + 1, MAX_WORKERS)


# --dist loadgroup, done by tests/xdist_scheduling.py (xdist 3.8.0's own loses the groups and can hang)


# each test's measured time, kept by the controller (or the only process) for the next run's order
_DURATIONS: list = []  # the DurationRecorder of this process, when it is not a worker


def pytest_configure(config) -> None:
    if hasattr(config, "workerinput"):
        return
    from xdist_scheduling import DurationRecorder

    _DURATIONS[:] = [DurationRecorder()]
    if config.pluginmanager.hasplugin("xdist") and config.getvalue("dist") == "loadgroup":
        from xdist_scheduling import start_controller

        start_controller(config)


def pytest_runtest_logreport(report) -> None:
    for recorder in _DURATIONS:
        recorder.add(report)


def pytest_sessionfinish(session) -> None:
    for recorder in _DURATIONS:
        recorder.store(session.config)


def pytest_unconfigure(config) -> None:
    if not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist"):
        from xdist_scheduling import stop_controller

        stop_controller(config)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    from xdist_scheduling import GROUPS_DIR, folder_of

    folder = folder_of(node.config)
    if folder:
        node.workerinput[GROUPS_DIR] = folder


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist_scheduling import GroupScheduling, folder_of

    folder = folder_of(config)
    return GroupScheduling(config, log, folder) if folder else None


def pytest_collection_modifyitems(config, items) -> None:
    if hasattr(config, "workerinput"):
        from xdist_scheduling import write_groups

        write_groups(config, items)


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> object:
    """``build(folder)`` run once per test run, its (JSON-able) result returned to every worker.

    Without xdist (or with one worker) it is ``build(tmp_path_factory.mktemp(name))``. Under xdist
    the first worker to ask builds into a fresh folder beside the workers' own temporary trees,
    under a file lock, and writes down the result; the others wait on the lock and read it. A build
    that fails leaves nothing written down, so the next worker to ask builds (and fails) itself:
    each worker's tests report the failure. Callers must treat the tree as read-only."""
    from filelock import FileLock

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        return build(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # this run's pytest-N/, above the popen-gwK folders
    done = shared / f"{name}.built.json"
    with FileLock(str(shared / f"{name}.lock")):
        if done.is_file():
            return json.loads(done.read_text(encoding="utf-8"))["result"]
        folder = Path(tempfile.mkdtemp(prefix=f"{name}-{worker}-", dir=shared))  # a retry: a fresh folder
        result = build(folder)
        tmp = done.with_suffix(".tmp")
        tmp.write_text(json.dumps({"result": result, "by": worker}), encoding="utf-8")
        tmp.replace(done)
        return result


def require(condition: bool, what: str) -> None:
    if condition:
        return
    if os.environ.get("CTXPOLICY_REQUIRE_ALL") == "1":
        pytest.fail(f"required component missing: {what}")
    pytest.skip(f"missing: {what}")


def _quota_mounts() -> set[Path]:
    from ctxpolicy.sandbox import quota

    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return set()
    points = {Path(line.split()[1].encode().decode("unicode_escape")) for line in lines if len(line.split()) > 1}
    return {p for p in points if p.name and quota.image_path(p).is_file()}


@pytest.fixture(autouse=True)
def _no_quota_mount_left(tmp_path_factory):
    """A workspace a test mounted on its quota image (the local adapter's prepare_workspace) and
    left mounted is released after it, so that no loop device outlives the test. Only mounts under
    this process's own temporary root count: on several workers (pytest-xdist) another worker's
    test mounts its workspaces meanwhile, and releasing those would pull them from under it."""
    from ctxpolicy.sandbox import quota

    own = tmp_path_factory.getbasetemp().resolve()
    before = _quota_mounts()
    yield
    for point in _quota_mounts() - before:
        if point.resolve().is_relative_to(own):
            quota.release(point, keep=False)


@pytest.fixture
def sandbox_workspace(tmp_path: Path) -> Path:
    """A fresh, empty workspace folder for the real bubblewrap sandbox (required)."""
    from ctxpolicy.sandbox import bwrap_available

    require(bwrap_available(), "bubblewrap (Debian package bubblewrap) able to create a sandbox")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return workspace


@pytest.fixture
def figure_root(monkeypatch):
    """Run a figure test from the repository root in the house style; close its figures after."""
    import matplotlib.pyplot as plt

    from ctxpolicy.figures import style

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    style.apply()
    yield
    plt.close("all")


# The threads of every model server the tests start. On several workers the model's tests run
# beside other tests, and llama.cpp's threads wait for each other by spinning after every step of
# the model: with two threads and another busy process on two cores one of them is often off-core,
# the other spins, and generation slows down many times over (on a 2-core machine with both
# cores oversubscribed, 2026-12-04: 0.2-0.3 tokens/s on two threads, 4-5 on one); one thread never
# waits for another.
LLM_THREADS = 1


@contextlib.contextmanager
def embedded_llm_server(log_path: Path, ready_timeout_s: float = 180):
    """The embedded model (config/config.yaml's qwen05b, on ``LLM_THREADS`` threads) served by
    llama.cpp for the block (required: the server code and the assembled model)."""
    import yaml

    model_cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "config" / "config.yaml").read_text())
    model_cfg = {**model_cfg["models"]["qwen05b"], "threads": LLM_THREADS}
    try:
        from ctxpolicy.serving.models import cached_model
        from ctxpolicy.serving.server import start_server
    except ImportError:
        cached_model = start_server = None
    require(start_server is not None, "ctxpolicy.serving.start_server")
    require(
        cached_model(model_cfg["gguf"]) is not None,
        f"embedded model (python -m ctxpolicy.serving.models ensure --install {model_cfg['gguf']})",
    )
    with start_server(model_cfg, log_path=log_path, ready_timeout_s=ready_timeout_s) as server:
        yield server


@pytest.fixture(scope="session")
def embedded_llm(tmp_path_factory):
    """One embedded model server (``embedded_llm_server``) for the tests that need a server to
    answer but not its start-up or its end (those start their own): started at the first such test
    and shared by the rest. They are all marked ``llm``, so under xdist they run on one worker, in
    turn (tests/xdist_scheduling.py), and one server serves them all, one request at a time."""
    with embedded_llm_server(tmp_path_factory.mktemp("embedded-llm") / "server.log") as server:
        yield server


PAPER_TASK_CAP = 6  # tasks per cohort of the paper-shaped test data (docs/synthetic.md)


@pytest.fixture(scope="session")
def paper_tables(tmp_path_factory) -> tuple[Path, Path]:
    """The reduced paper-shaped synthetic data set, built once per session: (tables dir, config path).

    Every cell of config/synthetic-paper.yaml with the first ``PAPER_TASK_CAP`` tasks of each cohort
    and 3 attempts; ``tables/`` holds runs, calls and events parquet files: attempt 1 audited, and
    of the tight and loose sweep cells (left out by every figure drawn from events) the first task."""
    from ctxpolicy.testing.paper import build_tables, make_paper_dataset

    def build(out: Path) -> list[str]:
        config = make_paper_dataset(out, task_cap=PAPER_TASK_CAP, processes=2)
        return [str(build_tables(out, processes=2, audit_attempts=1, audit_sweep_tasks=1)), str(config)]

    tables, config = built_once(tmp_path_factory, "paper-data", build)
    return Path(tables), Path(config)
