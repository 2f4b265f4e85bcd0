"""Idempotent produce (KIP-98, seed 002): per producer id and partition, sequence numbers.

Mirrors Kafka's ``ProducerStateManager``/``ProducerAppendInfo`` for a single leader:

- a retried duplicate of one of the producer's last five batches (a producer keeps at most
  five requests in flight) is acknowledged with its original offsets and not written again;
- any other sequence but the next one gets OUT_OF_ORDER_SEQUENCE_NUMBER, so a batch that
  follows a lost one is refused until the lost one is resent;
- an old epoch gets INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0;
- a producer this partition has no state for may start at any sequence (Kafka 2.5+,
  KIP-360): its state may have been lost to retention, or it is continuing after a restart
  that this broker survived with its log but, without snapshots, rebuilt from it.

The state is rebuilt from the log's batch headers when the partition loads
(:meth:`ProducerStateTable.rebuilt`), as Kafka's log does when it has no snapshot, so a
retry that straddles a broker restart is still recognised as a duplicate.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from kcodecs import Batch, TimestampType

from .errors import ApiError, kerr
from .validator import last_sequence

__all__ = ["ProducerStateTable", "BatchMetadata"]

NO_PRODUCER_ID = -1
RETAINED_BATCHES = 5
"""Kafka keeps the metadata of each producer's last 5 batches (max.in.flight for idempotence)."""


@dataclass(frozen=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    log_append_time: int


@dataclass
class _ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))


class ProducerStateTable:
    """Sequence state of one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}

    @classmethod
    def rebuilt(cls, batches: Iterable[Batch]) -> "ProducerStateTable":
        """The state after ``batches`` (a partition's log, oldest first, headers only)."""
        table = cls()
        for batch in batches:
            if batch.magic >= 2 and batch.producer_id != NO_PRODUCER_ID:
                append_time = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else -1
                table.record(batch.producer_id, batch.producer_epoch, BatchMetadata(
                    batch.base_sequence, last_sequence(batch), batch.base_offset, batch.last_offset, append_time))
        return table

    def check(self, producer_id: int, epoch: int, first_sequence: int, last_sequence: int) -> BatchMetadata | None:
        """Return the original metadata for a duplicate, None for a new in-order batch, or raise."""
        if producer_id == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(producer_id)
        if entry is None:
            return None  # unknown producer: any sequence (KIP-360)
        if epoch > entry.epoch:
            if first_sequence != 0:
                raise ApiError(kerr.OutOfOrderSequenceNumberError,
                               f"producer {producer_id} epoch {epoch} must start at sequence 0, got {first_sequence}")
            return None
        if epoch < entry.epoch:
            raise ApiError(kerr.InvalidProducerEpochError,
                           f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}")
        for meta in entry.batches:
            if (meta.first_sequence, meta.last_sequence) == (first_sequence, last_sequence):
                return meta
        expected = (entry.batches[-1].last_sequence + 1) % (1 << 31) if entry.batches else 0
        if first_sequence != expected:
            raise ApiError(kerr.OutOfOrderSequenceNumberError,
                           f"producer {producer_id} sent sequence {first_sequence}, expected {expected}")
        return None

    def record(self, producer_id: int, epoch: int, meta: BatchMetadata) -> None:
        """Remember an appended batch; call only after :meth:`check` accepted it and the append succeeded."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self._producers[producer_id] = _ProducerEntry(epoch)
        entry.batches.append(meta)
