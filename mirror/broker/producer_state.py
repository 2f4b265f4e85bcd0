"""Idempotent produce (KIP-98, seed 002): per producer id and partition, sequence numbers.

Mirrors Kafka's ``ProducerStateManager``/``ProducerAppendInfo`` for a single leader:
a retried duplicate of one of the producer's last five batches is acknowledged with its
original offsets and not written again; a gap gets OUT_OF_ORDER_SEQUENCE_NUMBER; an old
epoch gets INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .errors import ApiError, kerr

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

    def check(self, producer_id: int, epoch: int, first_sequence: int, last_sequence: int) -> BatchMetadata | None:
        """Return the original metadata for a duplicate, None for a new in-order batch, or raise."""
        if producer_id == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
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
