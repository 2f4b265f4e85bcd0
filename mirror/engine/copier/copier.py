"""The copy of a resident copier: its loop over ranges that never end, and its commits.

It turns a :class:`~mirror.engine.copy.CopyLoop` whose ranges never end
(:data:`~mirror.engine.copy.TAIL`): fetches are long polls, so a record is fetched as soon as
the source has it, routed and produced at once. Then, exactly-once, the records and the source
offsets they reach commit in one destination transaction, as a copy task's do
(:class:`~mirror.engine.commit.Committer`); at-least-once, the producer is flushed. When
(:meth:`Copier.due`):

- the copy has caught up with the source and ``commit_interval_ms`` passed since the last
  commit: a record waits at most that long for its transaction (the latency target);
- a waiting task's ranges are routed to their ends: the task, and with it Spark's
  micro-batch, can finish;
- a second passed while catching up: a long backlog is committed in pieces, each costing
  a flush and an EndTxn, so not every few milliseconds.

At-least-once there is no flush but the last: a record is visible once acknowledged, and the
acknowledgements, as they come, say how far each partition is durable
(:meth:`~mirror.engine.copy.CopyLoop.durable`). A waiting task is answered from them, and a
commit every ``commit_interval_ms`` only writes the offset syncs (once a second) and notes
the durable positions: a flush would wait for every batch in flight while the copy stops.

Each commit writes every partition's position, so the last transaction alone says where the
copier got to.
"""

from __future__ import annotations

import time

from ...kafka import TopicPartition
from ..clients import client_for
from ..copy import TAIL, CopyLoop
from ..ranges import CopyRequest, TaskStats
from ..offset_syncs import SyncLog
from ..job import CopyJob
from ..trace import CopierTrace
from .messages import Lease

__all__ = ["Copier", "TAIL_WAIT_MS", "CATCH_UP_COMMIT_S", "SYNCS_INTERVAL_S"]

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
        self.trace = CopierTrace.from_environment()
        self.loop = CopyLoop(dict(job.routes), client_for(job.source, job.retry), self.committer.producer,
                             fetch_max_bytes=job.fetch_max_bytes, max_buffer_bytes=job.max_buffer_bytes,
                             on_data_loss=job.on_data_loss, max_wait_ms=TAIL_WAIT_MS, trace=self.trace)
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
        """Whether every one of ``ends`` is committed (at-least-once: acknowledged, as the
        acknowledgements come, with no commit)."""
        if not self.committer.exactly_once:
            copies = self.loop.copies
            return all(tp in copies and self.loop.durable(tp) >= end for tp, end in ends.items())
        return all(self.positions.get(tp, -1) >= end for tp, end in ends.items())

    def routed(self, ends: dict[TopicPartition, int]) -> bool:
        """Whether every one of ``ends`` is routed (a commit would make it durable)."""
        return all(self.loop.position(tp) >= end for tp, end in ends.items() if tp in self.loop.copies)

    def due(self, ends_waited: list[dict[TopicPartition, int]], now: float) -> bool:
        """Whether to commit now (see the module's docstring)."""
        if not self._pending():
            return False
        since = now - self.last_commit
        if not self.committer.exactly_once:
            # At-least-once, a record is visible once acknowledged, and the acknowledgements
            # say how far the copy is durable: a commit only writes that down, with the offset
            # syncs, and flushes nothing (a flush would stop the copy until every batch in
            # flight is answered: docs/performance.md, "The copier's trace").
            return since >= self.job.commit_interval_ms / 1000
        if any(self.routed(ends) and not self.reached(ends) for ends in ends_waited):
            return True
        if self.loop.caught_up:
            return since >= self.job.commit_interval_ms / 1000
        return since >= CATCH_UP_COMMIT_S

    def _pending(self) -> bool:
        if not self.committer.exactly_once:
            return any(self.loop.durable(tp) != self.positions.get(tp) for tp in self.loop.copies)
        return (any(self.loop.position(tp) != self.positions.get(tp) for tp in self.loop.copies)
                or not self.committer.producer.idle)

    def commit(self, *, last: bool = False) -> None:
        """Make everything routed so far durable (:class:`~.commit.Committer`), with the offset
        syncs once a second and at the ``last`` commit. At-least-once, but for the ``last``
        one, write down what the acknowledgements made durable, and flush nothing."""
        step = self.loop.step
        flush = last or self.committer.exactly_once
        if flush:
            positions = {tp: self.loop.position(tp) for tp in self.loop.copies}
            with step("flush"):
                self.loop.flush()  # acknowledged: only then do the syncs know where the records landed
        else:
            positions = {tp: self.loop.durable(tp) for tp in self.loop.copies}
        now = time.monotonic()
        syncs = SyncLog()
        if last or now - self.last_syncs >= SYNCS_INTERVAL_S:
            syncs = self.loop.take_syncs()
            self.last_syncs = now
        began = time.time()
        with step("commit"):
            self.committer.commit(positions, syncs, flush=flush)
        ended = time.time()
        self.loop.committed(ended)  # exactly-once: the records are visible from now
        if self.trace is not None:
            self.trace.committed(began, ended)
        self.positions = positions
        self.last_commit = time.monotonic()

    def report(self) -> TaskStats:
        """What was copied since the last report (the syncs stay, for the next commit to write)."""
        return self.loop.take_stats(with_syncs=False)

    def close(self) -> None:
        self.loop.close()
        self.committer.producer.close()
        if self.trace is not None:
            self.trace.close()
