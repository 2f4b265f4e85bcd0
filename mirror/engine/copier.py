"""The resident copier of one task index: a process that follows its source partitions for as
long as Spark's tasks renew its lease, forwarding records as they arrive and committing every
``commit_interval_ms`` (see :mod:`.lease` for how tasks reach it, and docs/architecture.md,
"Copying between micro-batches", for why it exists).

It turns a :class:`~.copy.CopyLoop` whose ranges never end (:data:`~.copy.TAIL`): fetches
are long polls, so a record is fetched as soon as the source has it, routed and produced at
once. Then, exactly-once, the records and the source offsets they reach commit in one
destination transaction, as a copy task's do (:mod:`.exactly_once`); at-least-once, the
producer is flushed. When:

- the copy has caught up with the source and ``commit_interval_ms`` passed since the last
  commit: a record waits at most that long for its transaction (the latency target);
- a waiting task's ranges are routed to their ends: the task, and with it Spark's
  micro-batch, can finish;
- a second passed while catching up: a long backlog is committed in pieces, each costing
  a flush and an EndTxn, so not every few milliseconds;
- the lease ends, a task releases it, or a signal (SIGTERM, SIGINT; SIGHUP from PySpark's
  worker daemon when the executor ends) stops the copier.

Each commit writes every partition's position, so the last transaction alone says where the
copier got to. On any error the copier reports it to the waiting task and exits; the next
lease starts a new copier, whose ``InitProducerId`` aborts what the old one left open.

Run as ``python -m mirror.engine.copier SOCKET``.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import socket
import sys
import time
from pathlib import Path

from kcodecs import KMirrorError

from ..kafka import TopicPartition
from ..logs import configure_spark_process
from .clients import client_for
from .copy import TAIL, CopyLoop, CopyRequest, TaskStats, collecting_new_objects_only
from .lease import Lease, Release, Report, failed, receive, send
from .offset_syncs import SyncLog
from .task import CopyJob

__all__ = ["Copier", "serve", "TAIL_WAIT_MS", "CATCH_UP_COMMIT_S"]

log = logging.getLogger(__name__)

TAIL_WAIT_MS = 500
"""A caught-up fetch waits this long for new records at the source (it returns as soon as one comes)."""
CATCH_UP_COMMIT_S = 1.0
"""While catching up, a transaction is committed after this long (each commit flushes the
producer and waits for EndTxn: every few milliseconds would halve the copy's speed)."""
SYNCS_INTERVAL_S = 1.0
"""Offset syncs go out with the first commit after this long, not with every commit: one record
per source partition per commit would be a hundred a second for the driver to read back at
every start, where micro-batches wrote about one. What a copier that dies loses is at most this
long of syncs (group offsets in that stretch are not translated until later ones cover them)."""


class Copier:
    """One task index's copy: its loop, its producer, what it has committed."""

    def __init__(self, job: CopyJob, task: int):
        self.job = job
        self.task = task
        self.committer = job.committer(task)
        self.loop = CopyLoop(dict(job.routes), client_for(job.source, job.retry), self.committer.producer,
                             fetch_max_bytes=job.fetch_max_bytes, max_buffer_bytes=job.max_buffer_bytes,
                             on_data_loss=job.on_data_loss, max_wait_ms=TAIL_WAIT_MS)
        self.positions: dict[TopicPartition, int] = {}
        """What the last commit made durable, per partition (what a waiting task may be told)."""
        self.last_commit = time.monotonic()
        self.last_syncs = self.last_commit

    def take(self, lease: Lease) -> None:
        """The lease's ranges: new partitions are followed from their range's start, or from what
        the destination says was committed, whichever is later; known ones go on."""
        self.job = lease.job
        self.loop.routes.update(lease.job.routes)
        new = [request for request in lease.ranges if request.tp not in self.loop.copies]
        # What the destination holds, read from the end of the offsets topic (start-up stays
        # short however long the job has run): the next transaction goes on from there.
        offsets = self.committer.offsets
        committed = offsets.latest(r.tp for r in new) if offsets is not None and new else {}
        for request in new:
            start = max(committed.get(request.tp, request.start), request.start)
            self.loop.assign(CopyRequest(request.tp, start, TAIL, request.floor))
            self.positions.setdefault(request.tp, start)

    def reached(self, ends: dict[TopicPartition, int]) -> bool:
        """Whether every one of ``ends`` is committed."""
        return all(self.positions.get(tp, -1) >= end for tp, end in ends.items())

    def routed(self, ends: dict[TopicPartition, int]) -> bool:
        """Whether every one of ``ends`` is routed (a commit would make it durable)."""
        return all(self.loop.position(tp) >= end for tp, end in ends.items() if tp in self.loop.copies)

    def due(self, ends_waited: list[dict[TopicPartition, int]], now: float) -> bool:
        """Whether to commit now (see the module's docstring)."""
        if not self._pending():
            return False
        if any(self.routed(ends) and not self.reached(ends) for ends in ends_waited):
            return True
        since = now - self.last_commit
        if self.loop.caught_up:
            return since >= self.job.commit_interval_ms / 1000
        return since >= CATCH_UP_COMMIT_S

    def _pending(self) -> bool:
        return (any(self.loop.position(tp) != self.positions.get(tp) for tp in self.loop.copies)
                or not self.committer.producer.idle)

    def commit(self, *, last: bool = False) -> None:
        """Make everything routed so far durable (:class:`~.commit.Committer`), with the offset
        syncs once a second and at the ``last`` commit."""
        positions = {tp: self.loop.position(tp) for tp in self.loop.copies}
        self.loop.flush()  # acknowledged: only then do the syncs know where the records landed
        now = time.monotonic()
        syncs = SyncLog()
        if last or now - self.last_syncs >= SYNCS_INTERVAL_S:
            syncs = self.loop.take_syncs()
            self.last_syncs = now
        self.committer.commit(positions, syncs)
        self.positions = positions
        self.last_commit = time.monotonic()

    def report(self) -> TaskStats:
        """What was copied since the last report (the syncs stay, for the next commit to write)."""
        return self.loop.take_stats(with_syncs=False)

    def close(self) -> None:
        self.loop.close()
        self.committer.producer.close()


class _Waiter:
    """A task waiting for its ranges' ends to be committed."""

    def __init__(self, conn: socket.socket, ends: dict[TopicPartition, int]):
        self.conn, self.ends = conn, ends


def serve(path: Path) -> int:
    """Listen at ``path`` and copy while leases last; the exit code is 0 after a clean end."""
    stopping: list[str] = []

    def stop(signum, _frame) -> None:
        stopping.append(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    copier: Copier | None = None
    task = -1
    clients: list[socket.socket] = []
    waiters: list[_Waiter] = []
    lease_until = time.monotonic() + 60.0  # the first lease is on its way
    lease_s = 0.0
    code = 0
    try:
        with collecting_new_objects_only():
            while not stopping and time.monotonic() < lease_until:
                watched = [listener, *clients]
                if copier is None:
                    readable, _, _ = select.select(watched, [], [], 0.5)
                else:
                    readable = copier.loop.turn(also=watched)
                for sock in readable:
                    if sock is listener:
                        conn, _ = listener.accept()
                        clients.append(conn)
                        continue
                    clients.remove(sock)
                    try:
                        message = receive(sock)
                    except (EOFError, OSError):
                        sock.close()
                        continue
                    if isinstance(message, Release):
                        if copier is not None:
                            copier.commit(last=True)
                        path.unlink(missing_ok=True)  # gone before the answer: the next lease starts anew
                        _answer(sock, Report(stats=copier.report() if copier else TaskStats([])))
                        stopping.append("released")
                        break
                    lease: Lease = message
                    task = lease.task
                    if copier is None:
                        waiters.append(_Waiter(sock, {}))  # told if the start fails
                        copier = Copier(lease.job, lease.task)
                        waiters.pop()
                    copier.take(lease)
                    lease_s = lease.seconds
                    lease_until = time.monotonic() + lease_s
                    ends = {r.tp: r.end for r in lease.ranges}
                    if lease.wait:
                        waiters.append(_Waiter(sock, ends))
                    else:
                        _answer(sock, Report(stats=copier.report()))
                if copier is None:
                    continue
                if copier.due([w.ends for w in waiters], time.monotonic()):
                    before = copier.positions
                    copier.commit()
                    if waiters and copier.positions != before:
                        # A task waits on this socket, so its driver is alive, and its copy moves:
                        # a micro-batch longer than the lease runs on (one that stalls does not).
                        lease_until = max(lease_until, time.monotonic() + lease_s)
                for waiter in [w for w in waiters if copier.reached(w.ends)]:
                    waiters.remove(waiter)
                    _answer(waiter.conn, Report(stats=copier.report()))
            if copier is not None:
                copier.commit(last=True)
                path.unlink(missing_ok=True)  # gone before the answers: a task run again starts a new copier
                for waiter in waiters:
                    _answer(waiter.conn, _final_report(copier, waiter, stopping[0] if stopping else "lease over"))
                waiters = []
    except KMirrorError as exc:
        log.warning("copier %d stopped: %s", task, exc)
        report = failed(task, exc)
        for waiter in waiters:
            _answer(waiter.conn, report)
        code = 1
    finally:
        for sock in clients:
            sock.close()
        listener.close()
        path.unlink(missing_ok=True)
        if copier is not None:
            copier.close()
    return code


def _final_report(copier: Copier, waiter: _Waiter, why: str) -> Report:
    """The answer to a task still waiting when the copier ends (its lease ran out, or a signal):
    its report if its ranges are committed through their ends; if not, a crash, so that the
    driver runs the task again (a new copier goes on from what was committed). A report would
    tell the driver that the ranges were copied, and the next micro-batch's would start past
    records this copier never committed."""
    if copier.reached(waiter.ends):
        return Report(stats=copier.report())
    behind = ", ".join(f"{tp} at {copier.positions.get(tp, '?')} of {end}" for tp, end in waiter.ends.items()
                       if copier.positions.get(tp, -1) < end)
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
