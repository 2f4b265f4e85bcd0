"""What one Spark task runs: its rows of the micro-batch, copied at the configured delivery guarantee."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterable, Iterator, Literal, Mapping, Sequence

from kcodecs import KMirrorError

from ..config import ClusterConfig, RetryConfig
from ..kafka import TopicPartition
from ..logs import configure_spark_process
from .clients import client_for, committed_offsets_for, producer_for, transactional_producer_for
from .copy import DEFAULT_MAX_BUFFER_BYTES, CopyRequest, TaskStats, copy_ranges
from .exactly_once import copy_exactly_once, transactional_id
from .failures import TaskFailure, verdict
from .lease import lease, release
from .offset_syncs import offset_syncs_topic, write_syncs
from .offsets_topic import offsets_topic
from .topics import TopicRoute

__all__ = ["CopyJob", "Delivery"]

log = logging.getLogger(__name__)

Delivery = Literal["exactly-once", "at-least-once"]


@dataclass(frozen=True)
class CopyJob:
    """What an executor needs to copy a micro-batch's rows; small, pickled into each task."""

    source: ClusterConfig
    destination: ClusterConfig
    retry: RetryConfig
    routes: Mapping[str, TopicRoute]
    fetch_max_bytes: int
    max_buffer_bytes: int = DEFAULT_MAX_BUFFER_BYTES
    max_in_flight: int = 5
    on_data_loss: Literal["fail", "skip-to-earliest"] = "fail"
    delivery: Delivery = "at-least-once"
    job: str = "kmirror"
    """Names the offsets topic and the transactional ids (exactly-once)."""
    transaction_timeout_ms: int = 60_000
    run_id: str = ""
    """One per start of the job: the driver fenced every task's transactional id when it
    started, so producers a reused Python worker kept from an earlier run are stale."""
    lease_s: float = 0.0
    """0: each task copies its ranges itself. Otherwise a task leases them to the resident
    copier of its index (:mod:`.lease`) for this long, and that copier goes on copying
    between micro-batches."""
    commit_interval_ms: int = 20
    """A resident copier that has caught up commits this often (:mod:`.copier`)."""

    def copy_rows(self, rows: Iterable) -> Iterator[TaskStats]:
        """``mapPartitions`` body over the source's rows ``(topic, partition, start_offset,
        end_offset, task, floor)``: :meth:`copy_tasks` of the tasks among them (one, as the
        source plans it)."""
        groups: dict[int, list[CopyRequest]] = {}
        for topic, partition, start, end, task, floor in rows:
            groups.setdefault(task, []).append(CopyRequest(TopicPartition(topic, partition), start, end, floor))
        return self.copy_tasks(sorted(groups.items()))

    def copy_tasks(self, tasks: Iterable[tuple[int, Sequence[CopyRequest]]]) -> Iterator[TaskStats]:
        """``mapPartitions`` body: each ``(task, requests)`` copied together, one
        :class:`TaskStats` each. An outage or a permanent error comes back as the stats'
        :attr:`~TaskStats.failure` for the driver to act on (:mod:`.failures`)."""
        configure_spark_process(logging.WARNING)  # an executor's Python worker
        for task, requests in tasks:
            if self.lease_s > 0:
                yield lease(self, task, list(requests), self.lease_s)  # failures come as data already
                continue
            try:
                yield self.copy(task, list(requests))
            except KMirrorError as exc:
                if verdict(exc) == "other":
                    raise  # Spark runs the task again (spark.task.maxFailures)
                log.debug("copy task %d failed", task, exc_info=True)
                yield TaskStats([], failure=TaskFailure.of(task, exc))

    def release_tasks(self, tasks: Iterable[int]) -> Iterator[TaskStats]:
        """``mapPartitions`` body at the job's end: each copier of ``tasks`` on this executor
        commits what it copied, reports it and exits (:func:`~.lease.release`)."""
        configure_spark_process(logging.WARNING)
        for task in tasks:
            yield release(self, task) or TaskStats([])

    def copy(self, task: int, requests: list[CopyRequest]) -> TaskStats:
        source = client_for(self.source, self.retry)
        options = dict(fetch_max_bytes=self.fetch_max_bytes, max_buffer_bytes=self.max_buffer_bytes,
                       on_data_loss=self.on_data_loss)
        syncs_to = TopicPartition(offset_syncs_topic(self.job), 0)
        if self.delivery == "at-least-once":
            producer = producer_for(self.destination, self.retry, self.max_in_flight)
            stats = copy_ranges(requests, self.routes, source, producer, **options)
            # After the data: a crash in between leaves the micro-batch uncommitted in Spark's
            # checkpoint, so its replay copies it again and records where that copy went.
            write_syncs(producer, syncs_to, stats.syncs)
            producer.flush()
            producer.take_acks()
            return stats
        producer = transactional_producer_for(self.destination, self.retry, self.max_in_flight,
                                              transactional_id(self.job, task), self.transaction_timeout_ms,
                                              self.run_id)
        # Long enough for a transaction left open by a dead attempt to time out.
        offsets = committed_offsets_for(self.destination, self.retry, offsets_topic(self.job),
                                        max_wait_s=2 * self.transaction_timeout_ms / 1000)
        return copy_exactly_once(requests, self.routes, source, producer, offsets, syncs_to=syncs_to, **options)
