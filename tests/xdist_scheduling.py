"""The suite's ``--dist loadgroup``: each group of tests on one worker, and a crashed worker never
hangs the run (the hooks that use this module are in tests/conftest.py).

pytest-xdist 3.8.0, the newest release, does neither with our pytest (9.2):

- it marks a group by appending ``@NAME`` to the test's ``_nodeid``, a field pytest 9.2 no longer
  reads (its ids are structured), so every group is silently spread over the workers
  (pytest-dev/pytest-xdist#1386, open);
- a worker that dies and is replaced hangs the run: the dead worker's finished groups go back on
  the queue as empty units, and a replacement handed one test waits for a second one that never
  comes (pytest-dev/pytest-xdist#1323, #1327, #1378).

So the groups travel beside the ids, as the maintainers propose: each worker writes
{test id: group} after its collection into a folder the controller names in ``workerinput``,
and the scheduler, a subclass of xdist's own, reads it when it splits the tests into units.
The subclass changes two steps besides: a dead worker's unfinished tests go back on the queue
(the one it died in is reported failed by xdist and not run again: pytest-dev/pytest-xdist#1371),
and a worker that has taken the last unit is told to finish, as at the start of a run. A
replacement worker gets no work before its collection is in (xdist would hand it a unit it cannot
send when a second worker dies while the replacement of the first still collects).

And it hands the units out longest first (xdist's own order is the collection's), so that the
workers finish together: a long group started last (the embedded model's, a workflow run's)
leaves the other workers idle while it runs. A unit's length is the sum of its tests' costs:
each test's last measured time (setup, call and teardown; the controller keeps them in pytest's
cache, ``ctxpolicy/durations``, after every run that has the cache), else its time in the seed a
clean clone starts from (``tests/durations.json``), else a guess from its kind (``GUESSED_S``). The units go out one at a time to whichever worker is nearly idle, so the worker
that took the model's long group gets nothing else until it is nearly done: each worker takes
its fair share of the rest by finishing its own.
Drop the parts xdist fixes once a fixed xdist is locked (the order stays ours).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from xdist.scheduler import LoadScopeScheduling

GROUPS_DIR = "ctxpolicy_xdist_groups"  # the workerinput key: where workers write their groups
_FOLDER = pytest.StashKey[str]()


LLM_GROUP = "embedded-llm"
DURATIONS_KEY = "ctxpolicy/durations"  # pytest's cache: {test id: seconds} of the last runs
# A clean clone has no cache: it orders by the slow tests' times of a whole run, committed here
# (refresh after a run that moved them: python tests/xdist_scheduling.py .pytest_cache/v/ctxpolicy/durations)
SEED_FILE = Path(__file__).with_name("durations.json")
SEED_FLOOR_S = 1.0  # quicker tests are guessed (GUESSED_S) as well as measured, and keep the file short
# A test's cost before any run measured it: the model's tests start llama.cpp and run agents;
# a module fixture's tests share a built tree (a workflow run, a server); the rest are quick.
GUESSED_S = {"llm": 30.0, "module": 3.0, "free": 0.3}


def item_group(item) -> str | None:
    """A test's group: its ``xdist_group`` mark's name; else ``embedded-llm`` for a test marked
    ``llm`` (each starts the embedded model on llama.cpp or asks the one server they share,
    ``conftest.embedded_llm``: two model runs at once starve each other into their timeouts);
    else its module's path when it uses a module-scoped fixture (built once, on one worker: every
    notebook executed, a workflow run); else none (the test goes wherever there is room)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    if item.get_closest_marker("llm") is not None:
        return LLM_GROUP
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if defs and defs[-1].scope == "module":
            return item.nodeid.split("::", 1)[0]
    return None


def item_cost(item, measured: dict[str, float]) -> float:
    """A test's expected seconds: its last measured time, else ``GUESSED_S`` of its kind."""
    if item.nodeid in measured:
        return float(measured[item.nodeid])
    if item.get_closest_marker("llm") is not None:
        return GUESSED_S["llm"]
    group = item_group(item)
    return GUESSED_S["module"] if group is not None and group != LLM_GROUP else GUESSED_S["free"]


def longest_first(units: dict[str, dict[str, bool]], costs: dict[str, float]) -> list[str]:
    """The scopes of UNITS ({scope: {test id: done}}) by their tests' summed COSTS, longest first;
    equal ones in their given order. A test without a cost counts ``GUESSED_S["free"]``."""
    length = {scope: sum(costs.get(nodeid, GUESSED_S["free"]) for nodeid in unit) for scope, unit in units.items()}
    return sorted(units, key=lambda scope: -length[scope])


def measured_durations(config) -> dict[str, float]:
    cache = getattr(config, "cache", None)
    return dict(cache.get(DURATIONS_KEY, {})) if cache is not None else {}


def known_durations(config, seed: Path = SEED_FILE) -> dict[str, float]:
    """Each test's expected seconds: this checkout's last run (pytest's cache) over the seed that
    a clean clone starts from (``SEED_FILE``: the slow tests' times of a whole run, committed)."""
    try:
        seeded = json.loads(seed.read_text())
    except FileNotFoundError:
        seeded = {}
    return {**seeded, **measured_durations(config)}


def write_seed(cache_file: Path, seed: Path = SEED_FILE, floor_s: float = SEED_FLOOR_S) -> int:
    """Rewrite SEED from the durations of the last whole run in CACHE_FILE (pytest's cache, as
    written by ``DurationRecorder``): the tests of at least FLOOR_S seconds, to a tenth of a second.
    Returns how many it kept."""
    measured = json.loads(cache_file.read_text())
    kept = {test: round(s, 1) for test, s in sorted(measured.items()) if s >= floor_s}
    seed.write_text(json.dumps(kept, indent=0) + "\n")
    return len(kept)


class DurationRecorder:
    """On the controller: each test's seconds (setup + call + teardown) of this run, merged into
    pytest's cache at the end for the next run's order (a test not run keeps its old time)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, report) -> None:
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration

    def store(self, config) -> None:
        cache = getattr(config, "cache", None)
        if cache is None or not self.seconds:
            return
        merged = {**measured_durations(config), **{k: round(v, 3) for k, v in self.seconds.items()}}
        cache.set(DURATIONS_KEY, merged)


def start_controller(config) -> str:
    """The folder the workers write their groups into (removed by ``stop_controller``)."""
    folder = tempfile.mkdtemp(prefix="ctxpolicy-xdist-groups-")
    config.stash[_FOLDER] = folder
    return folder


def stop_controller(config) -> None:
    folder = config.stash.get(_FOLDER, None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def write_groups(config, items) -> None:
    """On a worker: {test id: group} of the collected tests, for the controller's scheduler."""
    folder = getattr(config, "workerinput", {}).get(GROUPS_DIR)
    if not folder:
        return
    groups = {item.nodeid: group for item in items if (group := item_group(item)) is not None}
    measured = known_durations(config)
    costs = {item.nodeid: item_cost(item, measured) for item in items}
    target = Path(folder) / f"{config.workerinput['workerid']}.json"
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps({"groups": groups, "costs": costs}), encoding="utf-8")
    os.replace(tmp, target)


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with the workers' groups as scopes (a test without one is its own),
    the scopes handed out longest first."""

    def __init__(self, config, log=None, folder: str | None = None) -> None:
        super().__init__(config, log)
        self._folder = folder
        self._groups: dict[str, str] | None = None
        self._costs: dict[str, float] = {}

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            self._groups, self._costs = self._read_groups()
        group = self._groups.get(nodeid)
        return f"group:{group}" if group is not None else nodeid

    def _read_groups(self) -> tuple[dict[str, str], dict[str, float]]:
        # called once every worker has finished collecting, so each has written its file; they
        # collected the same tests (xdist checks), so any one of them will do
        files = sorted(Path(self._folder).glob("*.json")) if self._folder else []
        if self._folder and not files:
            raise RuntimeError(f"no worker wrote its test groups into {self._folder}")
        if not files:
            return {}, {}
        written = json.loads(files[0].read_text(encoding="utf-8"))
        return written["groups"], written["costs"]

    def schedule(self) -> None:
        if self.collection is not None or not self.collection_is_completed:
            return super().schedule()  # later calls: as xdist (more work to each idle worker)
        if not self._check_nodes_have_same_collection():
            self.log("**Different tests collected, aborting run**")
            return None
        # as xdist's first call, with the units queued longest first instead of as collected
        self.collection = list(next(iter(self.registered_collections.values())))
        if not self.collection:
            return None
        units: dict[str, dict[str, bool]] = {}
        for nodeid in self.collection:
            units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
        for scope in longest_first(units, self._costs):
            self.workqueue[scope] = units[scope]
        for _ in range(len(self.nodes) - len(self.workqueue)):  # more workers than units
            unused, _ = self.assigned_work.popitem()
            unused.shutdown()
        for node in self.nodes:
            self._assign_work_unit(node)
        for node in self.nodes:
            self._reschedule(node)
        return None

    def remove_node(self, node):
        workload = self.assigned_work.pop(node)
        unfinished = [(scope, unit) for scope, unit in workload.items() if not all(unit.values())]
        if not unfinished:
            return None
        # a worker runs its units in the order they were sent: the first unfinished test is the
        # one it died in
        crashitem = next(nodeid for nodeid, done in unfinished[0][1].items() if not done)
        unfinished[0][1][crashitem] = True
        for scope, unit in unfinished:
            if not all(unit.values()):
                self.workqueue[scope] = unit
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem

    def _reschedule(self, node) -> None:
        # a replacement still collecting has no collection to send indices from (xdist's own
        # _assign_work_unit would fail on it, after taking the unit off the queue, inside
        # remove_node, where DSession swallows a KeyError: the unit and the crash report were
        # lost); it gets work when its collection is in, from schedule()
        if node.shutting_down or node not in self.registered_collections:
            return
        if self.workqueue and self._pending_of(self.assigned_work[node]) <= 2:
            self._assign_work_unit(node)
        if not self.workqueue:
            node.shutdown()  # it runs what it holds, then stops: never left waiting for more


def folder_of(config) -> str | None:
    """The controller's groups folder (None without xdist's loadgroup, or on a worker)."""
    return config.stash.get(_FOLDER, None)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python tests/xdist_scheduling.py .pytest_cache/v/ctxpolicy/durations")
    print(f"{SEED_FILE}: {write_seed(Path(sys.argv[1]))} tests of at least {SEED_FLOOR_S:g} s")
