"""What a copy is asked (:class:`CopyRequest`, one range of a source partition) and what it
reports (:class:`RangeStats` per range, :class:`TaskStats` per task): the engine's side of
what crosses to and from Spark's tasks and resident copiers."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..kafka import TopicPartition
from ..routing import RouteCounters
from .failures import TaskFailure
from .latency import Invisible, LatencyHistogram
from .offset_syncs import SyncLog

__all__ = ["CopyRequest", "RangeStats", "TaskStats"]


@dataclass(frozen=True)
class CopyRequest:
    """One micro-batch row: copy ``[start, end)`` of ``tp``."""

    tp: TopicPartition
    start: int
    end: int
    floor: int = -1
    """The job's starting offset in ``tp`` (at most ``start``), -1 if not known: the records
    below it in the batch that holds it are not copied (:class:`~.fetched_set.FetchedSet`)."""
    topic_id: str | None = None
    """The id of the source topic the plan means (KIP-516), None from a cluster without ids: the
    copy fetches that topic by it, so a topic made again under the name is not copied from
    these offsets (:class:`~mirror.kafka.TopicIdGoneError`)."""

    destination_id: str | None = None
    """The id of the destination topic the range is copied into, as the job's route has it
    (None: not known): a commit into a destination topic since lost is not this copy's."""

    def of_another_topic_than(self, other: "CopyRequest") -> bool:
        """Whether ``other`` is of another topic under the same name, at the source or at the
        destination (both ids known, and not the same): a topic deleted and made again since."""
        return any(None not in (mine, theirs) and mine != theirs
                   for mine, theirs in ((self.topic_id, other.topic_id), (self.destination_id, other.destination_id)))


@dataclass
class RangeStats:
    """What one range's copy did; pickled back to the driver by ``collect()``."""

    tp: TopicPartition
    start: int
    end: int
    high_watermark: int = -1
    counters: RouteCounters = field(default_factory=RouteCounters)
    lost_records: int = 0
    produced_batches: int = 0
    produced_bytes: int = 0
    already_committed: bool = False
    """Exactly-once replay: an earlier attempt committed the whole range, nothing was copied."""
    max_timestamp: int = -1
    """The newest source timestamp (ms) among the batches produced, -1 if none: the record age metric."""
    gone: bool = False
    """The source topic was deleted, or made again, during the copy: it ended before ``end``
    (:attr:`~.range_copy.RangeCopy.gone`)."""
    topic_id: str | None = None
    """The source topic's id, as the range was planned (:attr:`CopyRequest.topic_id`)."""

    @property
    def lag(self) -> int:
        """Offsets at the source not yet copied after this range (at fetch time)."""
        return max(0, self.high_watermark - self.end)


@dataclass
class TaskStats:
    """What one task (a group of ranges copied together) did, and how long it took."""

    ranges: list[RangeStats]
    seconds: float = 0.0
    peak_held_bytes: int = 0
    """The most bytes of fetch buffers and rebuilt batches held at once (bounded by ``max_buffer_bytes``)."""
    failure: TaskFailure | None = None
    """Set when the task failed on an outage or a permanent error (:mod:`.failures`): the
    driver decides what follows, and ``ranges`` is empty."""
    syncs: SyncLog = field(default_factory=SyncLog)
    """Where each acknowledged batch's records landed (:mod:`.offset_syncs`)."""
    latency: LatencyHistogram = field(default_factory=LatencyHistogram)
    """Replication latency of each batch made visible (:mod:`.latency`)."""
    invisible: Invisible = field(default_factory=Invisible)
    """Exactly-once, from :func:`~.copy.copy_ranges`: batches acknowledged in the transaction its
    caller commits, counted into :attr:`latency` then."""
