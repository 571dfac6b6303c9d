"""`tally serve --workers N`: the master process forks N workers sharing the
listening socket, starts another when one dies (stopping all when one could not
even build its app), and on SIGTERM/SIGINT passes it on and waits for them."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

log = logging.getLogger("tally.serving")

GRACE_SECONDS = 10  # a stopping worker finishes its requests for this long, then is killed
BOOT_FAILED = 3  # exit code of a worker that could not build its app (as gunicorn's)


class Master:
    """Forks the workers, keeps their number, stops them on SIGTERM/SIGINT."""

    def __init__(
        self,
        run_worker: Callable[[int], None],
        workers: int,
        before_fork: Callable[[], None] = lambda: None,
    ) -> None:
        """`before_fork` runs before each fork; its exception stops the master."""
        self.run_worker, self.workers, self.before_fork = run_worker, workers, before_fork
        self.children: set[int] = set()
        self.stopping = False

    def run(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        try:
            while not self.stopping:
                while len(self.children) < self.workers and not self.stopping:
                    self._spawn()
                self._reap()
                time.sleep(0.2)
        finally:
            self._stop_children()

    def _on_stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def _spawn(self) -> None:
        self.before_fork()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                self.run_worker(os.getppid())
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                log.exception("worker %d failed", os.getpid())
                code = 1
            finally:
                logging.shutdown()
                os._exit(code)
        self.children.add(pid)
        log.info("started worker %d", pid)

    def _reap(self) -> None:
        while self.children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            self.children.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            if code == BOOT_FAILED:
                log.error("worker %d failed to boot: stopping", pid)
                self.stopping = True
                raise SystemExit(1)
            if not self.stopping:
                log.warning("worker %d exited (%s); starting another", pid, code)

    def _stop_children(self) -> None:
        for pid in self.children:
            _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while self.children and time.monotonic() < deadline:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                time.sleep(0.1)
            else:
                self.children.discard(pid)
        for pid in self.children:
            _signal(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass
