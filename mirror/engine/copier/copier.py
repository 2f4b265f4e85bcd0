"""The copy of a resident copier: its loop over ranges that never end, and its commits.

It turns a :class:`~mirror.engine.copy.CopyLoop` whose ranges never end
(:data:`~mirror.engine.copy.TAIL`): fetches are long polls, so a record is fetched as soon as
the source has it, routed and produced at once. Then, exactly-once, the records and the source
offsets they reach commit in one destination transaction, as a copy task's do; at-least-once,
the acknowledgements say how far the copy is durable. When to commit, and what, is the
commit's own business (:class:`~mirror.engine.commit.LoopCommits`).
"""

from __future__ import annotations

from dataclasses import replace

from ..clients import client_for
from ..commit import LoopCommits
from ..copy import TAIL, CopyLoop
from ..job import CopyJob
from ..ranges import CopyRequest, TaskStats
from ..trace import CopierTrace
from .messages import Lease

__all__ = ["Copier", "TAIL_WAIT_MS"]

TAIL_WAIT_MS = 500
"""A caught-up fetch waits this long for new records at the source (it returns as soon as one comes)."""


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
        self.commits = LoopCommits(self.committer, self.loop, job.commit_interval_ms, self.trace)

    def take(self, lease: Lease) -> None:
        """The lease's ranges: new partitions are followed from their range's start, or from what
        the destination says was committed, whichever is later; known ones go on. A partition
        of a topic made again (another topic id), or of a copy whose topic went, is a new one."""
        self.job = lease.job
        self.loop.routes.update(lease.job.routes)
        copies = self.loop.copies
        new = [request for request in lease.ranges
               if request.tp not in copies or copies[request.tp].gone
               or request.of_another_topic_than(copies[request.tp].request)]
        # What the destination holds, read from the end of the offsets topic (start-up stays
        # short however long the job has run): the next transaction goes on from there.
        committed = self.committer.committed(new) if new else {}
        for request in new:
            start = max(committed.get(request.tp, request.start), request.start)
            self.loop.assign(replace(request, start=start, end=TAIL))
            self.commits.positions[request.tp] = start

    def report(self) -> TaskStats:
        """What was copied since the last report (the syncs stay, for the next commit to write)."""
        return self.loop.take_stats(with_syncs=False, changed_only=True)

    def close(self) -> None:
        self.loop.close()
        self.committer.producer.close()
        if self.trace is not None:
            self.trace.close()
