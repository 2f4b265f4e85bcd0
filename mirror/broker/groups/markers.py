"""Transaction markers for ``__consumer_offsets``: how the transaction coordinator tells the
group coordinator that a transaction with offsets ended.

In Kafka, AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition to the
transaction, TxnOffsetCommit appends the offsets there as transactional records, and EndTxn's
COMMIT or ABORT marker on that partition makes the group coordinator materialise or drop
them. Here there is no such topic: the partition is only a name in the transaction, and
:class:`OffsetsTopicMarkers` (the transaction coordinator's :class:`MarkerWriter`) hands its
marker to :meth:`GroupCoordinator.complete_transaction` and every other partition's to the
log partitions.
"""

from __future__ import annotations

from typing import Iterable

from ..transactions import MarkerWriter
from .coordinator import GroupCoordinator

__all__ = ["OffsetsTopicMarkers", "OFFSETS_TOPIC", "OFFSETS_TOPIC_PARTITIONS", "offsets_partition"]

OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_TOPIC_PARTITIONS = 50
"""Kafka's ``offsets.topic.num.partitions``: which partition a group maps to only matters for
telling groups apart in a transaction, but Kafka's mapping costs nothing to keep."""

TopicPartition = tuple[str, int]


def offsets_partition(group_id: str) -> TopicPartition:
    """The group's ``__consumer_offsets`` partition: ``Utils.abs(groupId.hashCode()) % 50``, as Kafka computes it."""
    return OFFSETS_TOPIC, _java_abs(_java_string_hash(group_id)) % OFFSETS_TOPIC_PARTITIONS


class OffsetsTopicMarkers:
    def __init__(self, partitions: MarkerWriter, groups: GroupCoordinator):
        self._partitions = partitions
        self._groups = groups

    def write_markers(self, partitions: Iterable[TopicPartition], producer_id: int, producer_epoch: int, *,
                      commit: bool, coordinator_epoch: int) -> None:
        partitions = list(partitions)
        data = [tp for tp in partitions if tp[0] != OFFSETS_TOPIC]
        if data:
            self._partitions.write_markers(data, producer_id, producer_epoch, commit=commit,
                                           coordinator_epoch=coordinator_epoch)
        if len(data) < len(partitions):
            self._groups.complete_transaction(producer_id, commit)


def _java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, in 32-bit two's complement."""
    utf16 = text.encode("utf-16-be")
    value = 0
    for i in range(0, len(utf16), 2):
        value = (31 * value + int.from_bytes(utf16[i:i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _java_abs(value: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` maps to 0, not to itself."""
    return 0 if value == -(1 << 31) else abs(value)
