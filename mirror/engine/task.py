"""What one copy task runs: its ranges of the micro-batch, copied at the job's delivery
guarantee, by the task itself or by the resident copier of its index.

The engine's side of the boundary with Spark: it takes a :class:`~.job.CopyJob` and the
engine's own requests; decoding what Spark hands a task, and the Python worker's logging, are
:mod:`mirror.spark.tasks`'s.
"""

from __future__ import annotations

import logging
from typing import Sequence

from kcodecs import KMirrorError

from .clients import client_for
from .copier import lease, release
from .copy import copy_ranges
from .ranges import CopyRequest, TaskStats
from .exactly_once import copy_exactly_once
from .failures import TaskFailure
from .job import CopyJob

__all__ = ["copy_task", "release_task", "copy_in_task"]

log = logging.getLogger(__name__)


def copy_task(job: CopyJob, task: int, requests: Sequence[CopyRequest]) -> TaskStats:
    """One task's ranges copied, by the task itself or, with a lease, by the resident copier of
    its index. Every kmirror error, whatever its verdict, comes back as the stats'
    :attr:`~TaskStats.failure` (:mod:`.failures`): the driver alone decides what runs again.
    Only an error that is not kmirror's (a bug) raises."""
    try:
        if job.lease_s > 0:
            return lease(job, task, list(requests), job.lease_s)
        return copy_in_task(job, task, list(requests))
    except KMirrorError as exc:
        log.debug("copy task %d failed", task, exc_info=True)
        return TaskStats([], failure=TaskFailure.of(task, exc))


def release_task(job: CopyJob, task: int) -> TaskStats:
    """At the job's end: the copier of ``task`` on this machine, if any, commits what it copied,
    reports it and exits (:func:`~.copier.release`)."""
    return release(job, task) or TaskStats([])


def copy_in_task(job: CopyJob, task: int, requests: list[CopyRequest]) -> TaskStats:
    """The ranges copied by this process, committed as :meth:`~.job.CopyJob.committer` says."""
    source = client_for(job.source, job.retry)
    options = dict(fetch_max_bytes=job.fetch_max_bytes, max_buffer_bytes=job.max_buffer_bytes,
                   on_data_loss=job.on_data_loss)
    committer = job.committer(task)
    if committer.exactly_once:
        return copy_exactly_once(requests, job.routes, source, committer, **options)
    committer.committed(requests)  # at-least-once, nothing: the requests' topic ids, for the syncs
    stats = copy_ranges(requests, job.routes, source, committer.producer, **options)
    # After the data: a crash in between leaves the micro-batch uncommitted in Spark's
    # checkpoint, so its replay copies it again and records where that copy went.
    committer.commit({}, stats.syncs)
    return stats
