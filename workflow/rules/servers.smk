# Local runs share one model server per model between all their cells (ctxpolicy.serving.shared):
# onstart announces the session to every job (CTXPOLICY_SHARED_SERVERS, inherited by the local
# jobs' shells), the first cell that needs a model starts its server, the others reuse it, and
# onsuccess/onerror stop them. A server also stops by itself within a second of Snakemake being
# gone (kill -9 included). Cluster runs (a non-local executor, or a job inside one) are left
# alone: each cell job starts and stops its own server. CTXPOLICY_SHARED_SERVERS=off opts out.

from snakemake.settings.types import ExecMode

from ctxpolicy.serving import shared as shared_servers

SHARED_SESSION = shared_servers.Session(os.getpid(), Path(RESULTS).resolve() / ".servers")


def _shares_servers() -> bool:
    if os.environ.get(shared_servers.ENV) == "off":
        return False
    return workflow.local_exec and workflow.exec_mode == ExecMode.DEFAULT


def cell_threads(cpus: int) -> int:
    """A run cell's threads: its model's cpus, or 1 when the cell is a client of a shared server
    (the server's CPU is outside every job), so that a second cell, a grading or a figure job
    keeps the server's other slots and the cores busy while a cell waits for its last run."""
    return 1 if _shares_servers() else cpus


def _stop_shared_servers() -> None:
    if os.environ.get(shared_servers.ENV) == SHARED_SESSION.announce():
        shared_servers.stop_all(SHARED_SESSION.directory, SHARED_SESSION.owner_pid)


onstart:
    if _shares_servers():
        os.environ[shared_servers.ENV] = SHARED_SESSION.announce()


onsuccess:
    _stop_shared_servers()


onerror:
    _stop_shared_servers()
