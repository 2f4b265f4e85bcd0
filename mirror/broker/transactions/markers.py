"""Writing a transaction's COMMIT or ABORT markers to its partitions.

In Kafka the coordinator sends ``WriteTxnMarkers`` to each partition's leader; on one node it
calls the partitions directly. :class:`MarkerWriter` is the seam: the coordinator depends on
it, :class:`PartitionMarkers` is the broker's, tests pass their own to fail on purpose.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Iterable, Protocol

from ..errors import ApiError, kerr

if TYPE_CHECKING:
    from ..topics import Partition

__all__ = ["MarkerWriter", "PartitionMarkers"]

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class MarkerWriter(Protocol):
    def write_markers(self, partitions: Iterable[TopicPartition], producer_id: int, producer_epoch: int, *,
                      commit: bool, coordinator_epoch: int) -> None:
        """Write one marker per partition, or raise having written some: the coordinator then
        writes them all again later, which is harmless (a marker for a producer with no open
        transaction closes nothing, as in Kafka)."""


class PartitionMarkers:
    """Markers through the broker's own partitions (``Partition.write_marker``)."""

    def __init__(self, partition: Callable[[str, int], "Partition"], clock: Callable[[], int],
                 on_written: Callable[[], None]):
        self._partition = partition  # TopicStore.partition: raises UNKNOWN_TOPIC_OR_PARTITION
        self._clock = clock
        self._on_written = on_written

    def write_markers(self, partitions: Iterable[TopicPartition], producer_id: int, producer_epoch: int, *,
                      commit: bool, coordinator_epoch: int) -> None:
        try:
            for topic, index in sorted(partitions):
                try:
                    self._partition(topic, index).write_marker(producer_id, producer_epoch, commit=commit,
                                                               coordinator_epoch=coordinator_epoch, now_ms=self._clock())
                except ApiError as exc:
                    # What Kafka's TransactionMarkerRequestCompletionHandler gives up on: the
                    # partition is gone, or a newer epoch already closed the transaction there.
                    if exc.error not in (kerr.UnknownTopicOrPartitionError, kerr.InvalidProducerEpochError):
                        raise
                    log.warning("no %s marker for producer %d in %s-%d: %s",
                                "COMMIT" if commit else "ABORT", producer_id, topic, index, exc.message)
        finally:
            self._on_written()  # the LSO may have moved: wake read_committed long polls
