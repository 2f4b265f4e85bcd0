"""Committed offsets, and the transactional ones waiting for their transaction to end
(Kafka's ``OffsetMetadataManager`` stores), in memory; the coordinator persists every change
first.

Each stored offset carries ``sequence``, its position in the order of commits (the record
offset in Kafka's ``__consumer_offsets``): when a transaction commits, its offsets replace
the committed ones only if they were committed after them, so a plain commit made while the
transaction was open is not undone by it (``replayEndTransactionMarker``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

__all__ = ["OffsetAndMetadata", "OffsetStore", "TopicPartition"]

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    """The partition leader epoch the consumer saw (-1: none), returned as given (OffsetCommit v6+)."""
    metadata: str
    commit_ms: int
    sequence: int


class OffsetStore:
    def __init__(self) -> None:
        self._committed: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self._pending: dict[int, dict[str, dict[TopicPartition, OffsetAndMetadata]]] = {}  # producer id -> group -> ...

    def committed(self, group_id: str) -> dict[TopicPartition, OffsetAndMetadata]:
        return dict(self._committed.get(group_id, {}))

    def get(self, group_id: str, partition: TopicPartition) -> OffsetAndMetadata | None:
        return self._committed.get(group_id, {}).get(partition)

    def groups(self) -> set[str]:
        """Groups with committed or pending offsets."""
        return set(self._committed) | {group for by_group in self._pending.values() for group in by_group}

    def has_pending(self, group_id: str, partition: TopicPartition) -> bool:
        return any(partition in by_group.get(group_id, {}) for by_group in self._pending.values())

    def has_pending_transaction(self, producer_id: int) -> bool:
        return producer_id in self._pending

    def commit(self, group_id: str, partition: TopicPartition, offset: OffsetAndMetadata) -> None:
        self._committed.setdefault(group_id, {})[partition] = offset

    def commit_pending(self, producer_id: int, group_id: str, partition: TopicPartition,
                       offset: OffsetAndMetadata) -> None:
        self._pending.setdefault(producer_id, {}).setdefault(group_id, {})[partition] = offset

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended: its pending offsets become committed, or are dropped."""
        pending = self._pending.pop(producer_id, {})
        if not commit:
            return
        for group_id, offsets in pending.items():
            for partition, offset in offsets.items():
                current = self.get(group_id, partition)
                if current is None or offset.sequence > current.sequence:
                    self.commit(group_id, partition, offset)

    def delete_group(self, group_id: str) -> None:
        self._committed.pop(group_id, None)
        for producer_id in list(self._pending):
            self._pending[producer_id].pop(group_id, None)
            if not self._pending[producer_id]:
                del self._pending[producer_id]

    def groups_of_topic(self, topic: str) -> set[str]:
        """The groups with a committed or pending offset of ``topic``."""
        return {group for _, group, (name, _), _ in self.snapshot() if name == topic}

    def delete_topic(self, topic: str) -> None:
        """Every group's committed and pending offsets of ``topic``'s partitions dropped."""
        for by_group in [self._committed, *self._pending.values()]:
            for group_id, offsets in list(by_group.items()):
                for partition in [p for p in offsets if p[0] == topic]:
                    del offsets[partition]
                if not offsets:
                    del by_group[group_id]
        for producer_id in [pid for pid, by_group in self._pending.items() if not by_group]:
            del self._pending[producer_id]

    def snapshot(self) -> Iterator[tuple[int, str, TopicPartition, OffsetAndMetadata]]:
        """Every stored offset as ``(producer_id or -1, group, partition, offset)``, in commit order."""
        entries = [(-1, group, partition, offset)
                   for group, offsets in self._committed.items() for partition, offset in offsets.items()]
        entries += [(producer_id, group, partition, offset)
                    for producer_id, by_group in self._pending.items()
                    for group, offsets in by_group.items() for partition, offset in offsets.items()]
        return iter(sorted(entries, key=lambda entry: entry[3].sequence))
