"""What an executor needs to copy: :class:`CopyJob`, built on the driver from the configuration
(:meth:`CopyJob.from_config`), small, and pickled into each Spark task (and handed to resident
copiers in their leases, as data: :mod:`.copier.messages`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

from ..config import ClusterConfig, MirrorConfig, RetryConfig
from ..kafka import TopicPartition
from .clients import committed_offsets_for, producer_for, transactional_producer_for
from .commit import Committer, open_transaction_wait_s
from .copy import DEFAULT_MAX_BUFFER_BYTES
from .exactly_once import transactional_id
from .offset_syncs import offset_syncs_topic
from .offsets_topic import offsets_topic
from .topics import TopicRoute

__all__ = ["CopyJob", "Delivery"]

Delivery = Literal["exactly-once", "at-least-once"]


@dataclass(frozen=True)
class CopyJob:
    """What an executor needs to copy a micro-batch's ranges; small, pickled into each task."""

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
    copier of its index (:mod:`.copier`) for this long, and that copier goes on copying
    between micro-batches."""
    commit_interval_ms: int = 20
    """A resident copier that has caught up commits this often (:mod:`.copier`)."""

    @classmethod
    def from_config(cls, config: MirrorConfig, routes: Mapping[str, TopicRoute], *, run_id: str,
                    lease_s: float = 0.0) -> "CopyJob":
        """The job of ``config``'s copy over ``routes``, for the run ``run_id``."""
        clusters, limits, delivery = config.clusters, config.limits, config.delivery
        return cls(source=clusters.source, destination=clusters.destination, retry=limits.retry, routes=routes,
                   fetch_max_bytes=limits.fetch_max_bytes, max_buffer_bytes=limits.max_buffer_bytes,
                   max_in_flight=limits.max_in_flight, on_data_loss=delivery.on_data_loss, delivery=delivery.mode,
                   job=config.job_name, transaction_timeout_ms=int(delivery.transaction_timeout_s * 1000),
                   run_id=run_id, lease_s=lease_s, commit_interval_ms=delivery.commit_interval_ms)

    def committer(self, task: int) -> Committer:
        """Task ``task``'s commits, with this process's producer for it (kept across the
        micro-batches a reused Python worker runs, :mod:`.clients`)."""
        syncs_to = TopicPartition(offset_syncs_topic(self.job), 0)
        if self.delivery == "at-least-once":
            return Committer(producer_for(self.destination, self.retry, self.max_in_flight), syncs_to)
        producer = transactional_producer_for(self.destination, self.retry, self.max_in_flight,
                                              transactional_id(self.job, task), self.transaction_timeout_ms,
                                              self.run_id)
        offsets = committed_offsets_for(self.destination, self.retry, offsets_topic(self.job),
                                        max_wait_s=open_transaction_wait_s(self.transaction_timeout_ms / 1000))
        return Committer(producer, syncs_to, offsets)
