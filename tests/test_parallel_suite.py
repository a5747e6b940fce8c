"""The suite on every core (scripts/test.sh: pytest-xdist with its PYTEST_PARALLEL options, the
scheduling of tests/xdist_scheduling.py): a failing test, a worker that dies, or a shared tree
that fails to build still fail the run and its closing summary line still counts every test; a
group runs on one worker, in order; the tests sharing a module fixture get it built once; a
session tree built with ``conftest.built_once`` is built once for all workers; the longest units
go out first (the embedded model's group before the quicker tests collected ahead of it), by
each test's last measured time or a guess from its kind; ``-n auto`` is the usable cores, capped.
The parallel cases are one small suite of their own, run once in a
scratch directory with this suite's conftest.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import conftest
import xdist_scheduling

ROOT = Path(__file__).resolve().parents[1]


def parallel_options() -> list[str]:
    """The xdist options scripts/test.sh gives pytest (its PYTEST_PARALLEL array)."""
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    match = re.search(r"^PYTEST_PARALLEL=\((.*)\)$", script, flags=re.M)
    assert match, "scripts/test.sh: no PYTEST_PARALLEL=(...) line"
    assert '"${PYTEST_PARALLEL[@]}" "$@"' in script, "scripts/test.sh does not pass PYTEST_PARALLEL to pytest"
    return shlex.split(match[1])


def test_test_sh_runs_the_suite_on_every_core_by_groups():
    options = parallel_options()
    assert options[options.index("-n") + 1] == "auto"
    assert options[options.index("--dist") + 1] == "loadgroup"


CRASHING = {
    "test_outcomes.py": """
        import os
        import time
        import pytest

        @pytest.mark.parametrize("i", range(6))
        def test_passes(i):
            time.sleep(0.05)

        def test_fails():
            assert 1 + 1 == 3, "arithmetic"

        def test_kills_its_worker():
            os._exit(3)

        @pytest.mark.xdist_group("doomed")
        @pytest.mark.parametrize("i", range(4))
        def test_in_a_group_that_loses_its_worker(i):
            if i == 1:
                os._exit(9)
            time.sleep(0.05)
    """,
}
CLEAN = {
    "test_groups.py": """
        import os
        import time
        import pytest

        SEEN = []

        def log(tmp_path_factory, name, text):
            with (tmp_path_factory.getbasetemp().parent / name).open("a") as f:
                f.write(text + "\\n")

        @pytest.mark.xdist_group("alone")
        @pytest.mark.parametrize("i", range(4))
        def test_in_the_group(i, tmp_path_factory):
            log(tmp_path_factory, "started.log", os.environ["PYTEST_XDIST_WORKER"] + " group")
            SEEN.append(i)
            log(tmp_path_factory, "group.log", f"{os.environ['PYTEST_XDIST_WORKER']} {SEEN}")

        @pytest.mark.parametrize("i", range(8))
        def test_free(i, tmp_path_factory):
            log(tmp_path_factory, "started.log", os.environ["PYTEST_XDIST_WORKER"] + " free")
            time.sleep(0.2)
            log(tmp_path_factory, "free.log", os.environ["PYTEST_XDIST_WORKER"])
    """,
    "test_module_fixture.py": """
        import os
        import pytest

        @pytest.fixture(scope="module")
        def server(tmp_path_factory):
            with (tmp_path_factory.getbasetemp().parent / "server.log").open("a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
            return "up"

        @pytest.mark.parametrize("i", range(6))
        def test_uses_the_server(server, i):
            assert server == "up"
    """,
    "test_llm_a.py": """
        import os
        import time
        import pytest

        pytestmark = pytest.mark.llm

        @pytest.mark.parametrize("i", range(3))
        def test_a_model_server(i, tmp_path_factory):
            with (tmp_path_factory.getbasetemp().parent / "started.log").open("a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + " llm\\n")
            time.sleep(0.1)
            with (tmp_path_factory.getbasetemp().parent / "llm.log").open("a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    """,
    "test_llm_b.py": """
        import os
        import time
        import pytest

        @pytest.mark.llm
        @pytest.mark.parametrize("i", range(3))
        def test_another_model_server(i, tmp_path_factory):
            time.sleep(0.1)
            with (tmp_path_factory.getbasetemp().parent / "llm.log").open("a") as f:
                f.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    """,
    "test_trees.py": """
        import os
        import time
        import pytest
        from conftest import built_once

        def builder(tmp_path_factory, name, fail=False):
            def build(folder):
                time.sleep(0.5)  # both workers ask while the first builds
                with (tmp_path_factory.getbasetemp().parent / f"{name}.log").open("a") as log:
                    log.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
                if fail:
                    raise RuntimeError("no tree")
                (folder / "data.txt").write_text("built")
                return str(folder)
            return built_once(tmp_path_factory, name, build)

        @pytest.fixture(scope="session")
        def tree(tmp_path_factory):
            return builder(tmp_path_factory, "tree")

        @pytest.fixture(scope="session")
        def broken_tree(tmp_path_factory):
            return builder(tmp_path_factory, "broken", fail=True)

        @pytest.mark.parametrize("i", range(8))
        def test_reads_the_tree(tree, i):
            assert open(os.path.join(tree, "data.txt")).read() == "built"

        @pytest.mark.parametrize("i", range(6))
        def test_needs_the_broken_tree(broken_tree, i):
            pass
    """,
}


def run_in_parallel(scratch: Path, files: dict[str, str]) -> tuple[subprocess.CompletedProcess, Path]:
    """FILES as a suite of their own, run as scripts/test.sh runs ours, on 2 workers."""
    suite = scratch / "suite"
    suite.mkdir()
    for helper in ("conftest.py", "xdist_scheduling.py"):
        shutil.copy(ROOT / "tests" / helper, suite / helper)
    (suite / "pytest.ini").write_text("[pytest]\nmarkers =\n    llm: the embedded model\n", encoding="utf-8")
    for name, text in files.items():
        (suite / name).write_text(textwrap.dedent(text), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "CTXPOLICY_REQUIRE"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *parallel_options(), "-p", "no:cacheprovider", "--basetemp", "bt", "-q"],
        cwd=suite,
        env={**env, "PYTEST_XDIST_AUTO_NUM_WORKERS": "2"},
        capture_output=True,
        text=True,
        timeout=240,  # xdist's own loadgroup scheduler never ends this run (a dead worker)
    )
    return done, suite / "bt"


@pytest.fixture  # one test reads it: not module-scoped, so it is not grouped with clean_run's tests
def crashing_run(tmp_path_factory):
    return run_in_parallel(tmp_path_factory.mktemp("crashing-suite"), CRASHING)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    return run_in_parallel(tmp_path_factory.mktemp("clean-suite"), CLEAN)


def last_line(done: subprocess.CompletedProcess) -> str:
    return [line for line in done.stdout.splitlines() if line.strip()][-1]


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_failures_and_dead_workers_fail_the_run_and_the_summary_counts_every_test(crashing_run):
    done, _ = crashing_run
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    # 6 + 1 + 1 + 4 tests, each run once: the failing one and the two a worker died in fail
    assert re.fullmatch(r"=*\s*3 failed, 9 passed in [\d.]+s( \(.*\))?\s*=*", last_line(done)), out
    assert re.search(r"FAILED test_outcomes.py::test_fails - AssertionError: arithmetic", out), out
    assert "crashed while running 'test_outcomes.py::test_kills_its_worker'" in out, out
    assert "crashed while running 'test_outcomes.py::test_in_a_group_that_loses_its_worker[1]'" in out, out


def test_a_failed_shared_build_fails_the_tests_that_need_it(clean_run):
    done, basetemp = clean_run
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert re.fullmatch(r"=*\s*32 passed, 6 errors in [\d.]+s( \(.*\))?\s*=*", last_line(done)), out
    assert len(re.findall(r"ERROR test_trees.py::test_needs_the_broken_tree", out)) == 6, out
    assert 1 <= len(lines(basetemp / "broken.log")) <= 2  # each worker with such tests tries, and fails
    assert not (basetemp / "broken.built.json").exists()


def test_a_group_runs_on_one_worker_in_order_and_the_other_tests_spread(clean_run):
    _, basetemp = clean_run
    group = lines(basetemp / "group.log")
    assert len({line.split()[0] for line in group}) == 1, group
    assert group[-1].endswith("[0, 1, 2, 3]"), group  # one after the other, in one session
    assert set(lines(basetemp / "free.log")) == {"gw0", "gw1"}


def test_the_tests_of_the_embedded_model_run_on_one_worker(clean_run):
    _, basetemp = clean_run
    workers = lines(basetemp / "llm.log")
    assert len(workers) == 6 and len(set(workers)) == 1, workers


def test_the_longest_group_goes_out_first(clean_run):
    # the model's 6 tests (a guessed 30 s each) are collected after the quick ones, and start first
    _, basetemp = clean_run
    started = [line.split() for line in lines(basetemp / "started.log")]
    llm_worker = next(worker for worker, kind in started if kind == "llm")
    assert [kind for worker, kind in started if worker == llm_worker][0] == "llm", started


def test_units_are_ordered_by_their_tests_summed_costs_longest_first():
    units = {"a": {"a1": False}, "group:b": {"b1": False, "b2": False}, "c": {"c1": False}, "d": {"d1": False}}
    costs = {"a1": 2.0, "b1": 1.5, "b2": 1.5, "c1": 2.0}  # d1 unmeasured: the quick guess
    assert xdist_scheduling.longest_first(units, costs) == ["group:b", "a", "c", "d"]  # ties as given
    assert xdist_scheduling.longest_first(units, {}) == ["group:b", "a", "c", "d"]  # by test count


class FakeWorker:
    """What the scheduler uses of xdist's WorkerController: the commands it was sent."""

    def __init__(self, name):
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent, self.shutting_down = [], False

    def send_runtest_some(self, indices):
        self.sent.append(list(indices))

    def shutdown(self):
        self.shutting_down = True


def test_a_second_worker_dying_while_the_first_ones_replacement_collects_loses_no_test():
    # the CI run of 2026-12-05: gw1 died, its replacement gw2 was still collecting when gw0 died
    # in a group; the group's rest went to gw2 before it had a collection, and was never run
    ids = ["t.py::alone", "t.py::kill", *(f"t.py::g[{i}]" for i in range(4))]
    config = type("Config", (), {"getvalue": lambda self, name: ["2*popen"], "option": None})()
    sched = xdist_scheduling.GroupScheduling(config)
    sched._groups, sched._costs = {f"t.py::g[{i}]": "doomed" for i in range(4)}, {}
    gw0, gw1, gw2 = FakeWorker("gw0"), FakeWorker("gw1"), FakeWorker("gw2")
    for worker in (gw0, gw1):
        sched.add_node(worker)
        sched.add_node_collection(worker, ids)
    sched.schedule()
    group_worker = gw0 if [2, 3, 4, 5] in gw0.sent else gw1
    other = gw1 if group_worker is gw0 else gw0
    for batch in other.sent:  # the other worker runs all it gets, and is told to finish
        for index in batch:
            sched.mark_test_complete(other, index)
    assert sorted(i for batch in other.sent for i in batch) == [0, 1]
    assert other.shutting_down and sched.remove_node(other) is None
    sched.add_node(gw2)  # the replacement has said it is ready; it still collects
    sched.mark_test_complete(group_worker, 2)  # g[0] passes, then the worker dies in g[1]
    assert sched.remove_node(group_worker) == "t.py::g[1]"
    assert gw2.sent == [] and not gw2.shutting_down
    sched.add_node_collection(gw2, ids)
    sched.schedule()
    assert gw2.sent == [[4, 5]] and gw2.shutting_down  # g[2] and g[3], then it finishes
    for index in (4, 5):
        sched.mark_test_complete(gw2, index)
    assert sched.remove_node(gw2) is None and sched.tests_finished


class FakeCache:
    def __init__(self, stored=None):
        self.stored = dict(stored or {})

    def get(self, key, default):
        return self.stored.get(key, default)

    def set(self, key, value):
        self.stored[key] = value


class Report:
    def __init__(self, nodeid, duration):
        self.nodeid, self.duration = nodeid, duration


def test_measured_times_are_summed_per_test_and_merged_into_the_cache():
    config = type("Config", (), {"cache": FakeCache({xdist_scheduling.DURATIONS_KEY: {"old": 9.0, "t": 1.0}})})()
    recorder = xdist_scheduling.DurationRecorder()
    for phase in (0.5, 2.0, 0.25):  # setup, call, teardown
        recorder.add(Report("t", phase))
    recorder.store(config)
    assert xdist_scheduling.measured_durations(config) == {"old": 9.0, "t": 2.75}  # a test not run keeps its time
    xdist_scheduling.DurationRecorder().store(type("NoCache", (), {})())  # -p no:cacheprovider: nothing kept


def test_a_clean_clone_orders_by_the_committed_seed_and_a_checkout_by_its_own_last_run(tmp_path):
    measured = tmp_path / "durations"
    measured.write_text(json.dumps({"slow": 143.96, "quick": 0.4, "edge": 1.0}))
    seed = tmp_path / "seed.json"
    assert xdist_scheduling.write_seed(measured, seed) == 2  # the quick test is left to the guesses
    assert json.loads(seed.read_text()) == {"edge": 1.0, "slow": 144.0}
    clean = type("NoCache", (), {})()
    assert xdist_scheduling.known_durations(clean, seed) == {"edge": 1.0, "slow": 144.0}
    ran = type("Config", (), {"cache": FakeCache({xdist_scheduling.DURATIONS_KEY: {"slow": 20.0}})})()
    assert xdist_scheduling.known_durations(ran, seed) == {"edge": 1.0, "slow": 20.0}
    assert xdist_scheduling.known_durations(clean, tmp_path / "absent.json") == {}


def test_the_committed_seed_names_tests_that_exist():
    seed = json.loads(xdist_scheduling.SEED_FILE.read_text())
    assert seed and all(s >= xdist_scheduling.SEED_FLOOR_S for s in seed.values())
    repo = xdist_scheduling.SEED_FILE.parent.parent
    gone = sorted(path for path in {test.split("::", 1)[0] for test in seed} if not (repo / path).is_file())
    assert not gone, f"tests/durations.json names files that are gone: {gone} (refresh it)"


def test_a_tests_cost_is_its_measured_time_else_a_guess_from_its_kind():
    class Item:
        def __init__(self, nodeid, marks=()):
            self.nodeid, self._marks = nodeid, marks

        def get_closest_marker(self, name):
            return object() if name in self._marks else None

    guess = xdist_scheduling.GUESSED_S
    assert xdist_scheduling.item_cost(Item("m::t", ("llm",)), {"m::t": 4.0}) == 4.0
    assert xdist_scheduling.item_cost(Item("m::t", ("llm",)), {}) == guess["llm"]
    assert xdist_scheduling.item_cost(Item("m::t"), {}) == guess["free"]
    assert guess["llm"] > guess["module"] > guess["free"]


def test_the_tests_sharing_a_module_fixture_get_it_built_once(clean_run):
    _, basetemp = clean_run
    assert len(lines(basetemp / "server.log")) == 1


def test_a_session_tree_is_built_once_for_all_workers(clean_run):
    _, basetemp = clean_run
    assert len(lines(basetemp / "tree.log")) == 1
    assert (basetemp / "tree.built.json").is_file()


def test_built_once_without_workers_builds_into_its_own_folder(tmp_path_factory, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    built = []
    result = conftest.built_once(tmp_path_factory, "solo", lambda folder: built.append(folder) or str(folder))
    assert len(built) == 1 and result == str(built[0]) and built[0].is_dir()


def test_auto_workers_are_one_more_than_the_usable_cores_capped(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    cores = len(os.sched_getaffinity(0))
    assert conftest.pytest_xdist_auto_num_workers(None) == min(cores + 1, conftest.MAX_WORKERS)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert conftest.pytest_xdist_auto_num_workers(None) == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert conftest.pytest_xdist_auto_num_workers(None) == conftest.MAX_WORKERS
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "0")  # xdist's own variable: its hook reads it
    assert conftest.pytest_xdist_auto_num_workers(None) is None
