"""SIGINT/SIGTERM for a long command: an exception in the main thread, then no process left behind."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import psutil

HANDLED = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; a KeyboardInterrupt so that ``except Exception`` lets it through."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def raise_on_signals() -> Iterator[None]:
    """Within the block, the first SIGINT/SIGTERM raises Interrupted in the main thread; later
    ones are ignored so that cleanup is not itself interrupted. Handlers are restored after."""
    fired = False

    def handler(signum, frame):
        nonlocal fired
        if not fired:
            fired = True
            raise Interrupted(signum)

    previous = {signum: signal.signal(signum, handler) for signum in HANDLED}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def kill_descendants(grace_s: float = 2.0, rounds: int = 3) -> None:
    """SIGTERM every descendant process, SIGKILL those still alive after ``grace_s``.

    Repeated a few times: worker threads of this process may start a command while we scan.
    """
    for _ in range(rounds):
        try:
            children = psutil.Process().children(recursive=True)
        except psutil.Error:
            return
        if not children:
            return
        for child in children:
            with contextlib.suppress(psutil.Error):
                child.terminate()
        _, alive = psutil.wait_procs(children, timeout=grace_s)
        for child in alive:
            with contextlib.suppress(psutil.Error):
                child.kill()
        psutil.wait_procs(alive, timeout=grace_s)
