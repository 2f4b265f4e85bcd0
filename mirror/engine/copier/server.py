"""The resident copier's process: it listens on its socket, takes leases from Spark's tasks,
turns its :class:`~.copier.Copier` between them, and answers each task once its ranges are
committed (see :mod:`.leasing` for how tasks reach it, and docs/architecture.md, "Copying
between micro-batches", for why it exists).

It runs for as long as its lease is renewed; it ends when the lease runs out, a task releases
it, or a signal (SIGTERM, SIGINT; SIGHUP from PySpark's worker daemon when the executor ends)
stops it, committing what it copied first. On any error it reports to the waiting tasks and
exits; the next lease starts a new copier, whose ``InitProducerId`` aborts what the old one
left open.

Run as ``python -m mirror.engine.copier SOCKET``.
"""

from __future__ import annotations

import contextlib
import logging
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kcodecs import KMirrorError

from ...kafka import TopicPartition
from ...logs import configure_spark_process
from ..collector import collecting_new_objects_only
from ..ranges import TaskStats
from ..clients import client_for
from ..failures import TaskFailure, cluster_role, failed_cluster, verdict
from ..job import CopyJob
from .copier import Copier
from .messages import Lease, MessageError, Release, Report, receive, send

__all__ = ["serve", "main"]

log = logging.getLogger(__name__)

FIRST_LEASE_S = 60.0
"""How long a copier just started waits for the lease that started it."""


@dataclass
class _Waiter:
    """A task waiting for its ranges' ends to be committed."""

    conn: socket.socket
    ends: dict[TopicPartition, int]


class _Server:
    """One copier process: its socket, its connections, the tasks waiting, and its lease."""

    def __init__(self, path: Path):
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(8)
        self.clients: list[socket.socket] = []
        self.waiters: list[_Waiter] = []
        self.copier: Copier | None = None
        self.job: CopyJob | None = None
        """The last lease's job (which clusters it copies between), once one came."""
        self.task = -1
        self.lease_until = time.monotonic() + FIRST_LEASE_S
        self.lease_s = 0.0
        self.stopping: list[str] = []
        """Why the copier ends (a signal's name, or "released"); empty while it runs."""

    def run(self) -> int:
        """Copy while leases last; the exit code is 0 after a clean end."""
        try:
            with collecting_new_objects_only():
                while not self.stopping and time.monotonic() < self.lease_until:
                    for sock in self._readable():
                        with self._step("lease message"):
                            self._on_readable(sock)
                        if self.stopping:
                            break
                    if self.copier is not None:
                        self._commit_if_due()
                        with self._step("answer tasks"):
                            self._answer_reached()
                self._finish()
            return 0
        except KMirrorError as exc:
            log.warning("copier %d stopped: %s%s", self.task, self._role_of(exc), exc)
            self._answer_all(_failed(self.task, exc))
            return 1
        except Exception as exc:  # a bug: its traceback here, its name and text to every task
            log.exception("copier %d failed", self.task)
            self._answer_all(Report(crash=f"failed: {type(exc).__name__}: {exc}"))
            return 1
        finally:
            self._close()

    def _name(self) -> str:
        """For the log: its task index, once a lease said it."""
        return f"copier {self.task}" if self.task >= 0 else f"the copier at {self.path}"

    def _role_of(self, error: KMirrorError) -> str:
        """"source " or "destination " when ``error`` says which cluster failed, for the log."""
        job = self.job
        if job is None:
            return ""
        role = cluster_role(failed_cluster(error), client_for(job.source, job.retry),
                            client_for(job.destination, job.retry))
        return role + " " if role else ""

    def _step(self, kind: str):
        """A step of the loop, timed when the copier keeps a trace (:mod:`..trace`)."""
        return self.copier.loop.step(kind) if self.copier is not None else contextlib.nullcontext()

    def stop(self, signum, _frame) -> None:
        self.stopping.append(signal.Signals(signum).name)

    def _readable(self) -> list:
        """The sockets with something to read; the copy turns meanwhile, once it has a lease."""
        watched = [self.listener, *self.clients]
        if self.copier is None:
            return select.select(watched, [], [], 0.5)[0]
        return self.copier.loop.turn(also=watched)

    def _on_readable(self, sock: socket.socket) -> None:
        if sock is self.listener:
            self.clients.append(self.listener.accept()[0])
            return
        self.clients.remove(sock)
        try:
            message = receive(sock, Lease, Release)
        except MessageError as exc:
            # Said to the task, which fails the job with it, and here, in the executor's log.
            log.warning("%s refused a message: %s", self._name(), exc)
            _answer(sock, Report(refused=str(exc)))
            return
        except (EOFError, OSError) as exc:
            log.debug("a connection to copier %d ended without a lease: %s", self.task, exc)
            sock.close()
            return
        if isinstance(message, Release):
            self._on_release(sock)
        else:
            self._on_lease(sock, message)

    def _on_release(self, sock: socket.socket) -> None:
        if self.copier is not None:
            self.copier.commits.commit(last=True)
        self.path.unlink(missing_ok=True)  # gone before the answer: the next lease starts anew
        _answer(sock, Report(stats=self.copier.report() if self.copier else TaskStats([])))
        self.stopping.append("released")

    def _on_lease(self, sock: socket.socket, lease: Lease) -> None:
        self.task = lease.task
        self.job = lease.job
        if self.copier is None:
            self.waiters.append(_Waiter(sock, {}))  # told if the start fails
            self.copier = Copier(lease.job, lease.task)
            self.waiters.pop()
        self.copier.take(lease)
        self.lease_s = lease.seconds
        self.lease_until = time.monotonic() + self.lease_s
        if lease.wait:
            self.waiters.append(_Waiter(sock, {r.tp: r.end for r in lease.ranges}))
        else:
            _answer(sock, Report(stats=self.copier.report()))

    def _commit_if_due(self) -> None:
        commits = self.copier.commits
        before = commits.positions
        commits.poll()  # a sealed transaction ended (exactly-once)
        if commits.due([w.ends for w in self.waiters], time.monotonic()):
            commits.commit()
        if self.waiters and commits.positions != before:
            # A task waits on this socket, so its driver is alive, and its copy moves: a
            # micro-batch longer than the lease runs on (one that stalls does not).
            self.lease_until = max(self.lease_until, time.monotonic() + self.lease_s)

    def _answer_reached(self) -> None:
        for waiter in [w for w in self.waiters if self.copier.commits.reached(w.ends)]:
            self.waiters.remove(waiter)
            _answer(waiter.conn, Report(stats=self.copier.report()))

    def _finish(self) -> None:
        """The lease is over (or a signal, or a release): commit, then answer who still waits."""
        if self.copier is None:
            return
        self.copier.commits.commit(last=True)
        self.path.unlink(missing_ok=True)  # gone before the answers: a task run again starts a new copier
        why = self.stopping[0] if self.stopping else "lease over"
        for waiter in self.waiters:
            _answer(waiter.conn, _final_report(self.copier, waiter, why))
        self.waiters = []

    def _answer_all(self, report: Report) -> None:
        """``report`` to every task that asked, and to those whose lease is not read yet
        (connected, or still in the listener's backlog): none must see the copier vanish
        (:class:`~.leasing.CopierLostError`, an error of its own) when it stopped on an outage
        that all of them are to wait out."""
        self.path.unlink(missing_ok=True)  # a task run again starts a new copier
        for waiter in self.waiters:
            _answer(waiter.conn, report)
        self.waiters = []
        self.listener.setblocking(False)
        with contextlib.suppress(OSError):  # BlockingIOError: the backlog is empty
            while True:
                self.clients.append(self.listener.accept()[0])
        for sock in self.clients:
            sock.settimeout(1.0)
            try:
                receive(sock, Lease, Release)
            except (EOFError, OSError, MessageError):
                continue  # closed below, as before
            _answer(sock, report)

    def _close(self) -> None:
        for sock in self.clients:
            sock.close()
        self.listener.close()
        self.path.unlink(missing_ok=True)
        if self.copier is not None:
            self.copier.close()


def serve(path: Path) -> int:
    """Listen at ``path`` and copy while leases last; the exit code is 0 after a clean end."""
    server = _Server(path)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, server.stop)
    return server.run()


def _failed(task: int, error: KMirrorError) -> Report:
    """The report of a copier that stopped on ``error``: a crash where a new attempt may fix it
    (a new copier starts), else the failure for the driver to judge."""
    if verdict(error) == "other":
        return Report(crash=f"{type(error).__name__}: {error}")
    return Report(stats=TaskStats([], failure=TaskFailure.of(task, error)))


def _final_report(copier: Copier, waiter: _Waiter, why: str) -> Report:
    """The answer to a task still waiting when the copier ends (its lease ran out, or a signal):
    its report if its ranges are committed through their ends; if not, a crash, so that the
    driver runs the task again (a new copier goes on from what was committed). A report would
    tell the driver that the ranges were copied, and the next micro-batch's would start past
    records this copier never committed."""
    commits = copier.commits
    if commits.reached(waiter.ends):
        return Report(stats=copier.report())
    behind = ", ".join(f"{tp} at {commits.positions.get(tp, '?')} of {end}" for tp, end in waiter.ends.items()
                       if commits.positions.get(tp, -1) < end)
    return Report(crash=f"stopped ({why}) before its ranges were committed: {behind}")


def _answer(sock: socket.socket, report: Report) -> None:
    try:
        send(sock, report)
    except OSError:
        pass  # the task went away; what it would have been told is in the next report
    finally:
        sock.close()


def main(argv: list[str]) -> int:
    configure_spark_process(logging.WARNING)
    return serve(Path(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
