"""Producer state of a partition (KIP-98, seed 002): sequence numbers and open transactions.

Mirrors Kafka's ``ProducerStateManager``/``ProducerAppendInfo`` for a single leader.

Idempotence:

- a retried duplicate of one of the producer's last five batches (a producer keeps at most
  five requests in flight) is acknowledged with its original offsets and not written again;
- any other sequence but the next one gets OUT_OF_ORDER_SEQUENCE_NUMBER, so a batch that
  follows a lost one is refused until the lost one is resent;
- an old epoch gets INVALID_PRODUCER_EPOCH; a new epoch must start at sequence 0;
- a producer this partition has no state for may start at any sequence (Kafka 2.5+,
  KIP-360): its state may have been lost to retention, or it is continuing after a restart
  that this broker survived with its log but, without snapshots, rebuilt from it.

Transactions:

- a producer's first transactional batch opens its transaction here at that batch's first
  offset; a non-transactional batch from it while that is open gets INVALID_TXN_STATE;
- a COMMIT or ABORT marker closes it. A marker from an older producer epoch is refused
  (INVALID_PRODUCER_EPOCH: the coordinator fenced that producer), one from an older
  coordinator epoch too (TRANSACTION_COORDINATOR_FENCED); a marker with a newer epoch moves
  the producer to it (the coordinator bumped it to fence a zombie), so its old batches are
  refused from then on;
- the first unstable offset is the smallest first offset of the open transactions; the
  partition's last stable offset (LSO) is that, or the log end offset when none is open;
- an abort yields an :class:`AbortedTxn` for the segment's transaction index, stamped with
  the LSO right after it (``ProducerStateManager.lastStableOffset``).

The state is rebuilt from the log's batch headers (and each marker's one control record)
when the partition loads, :meth:`ProducerStateTable.replay` per batch, as Kafka's log does
when it has no snapshot: a retry that straddles a broker restart is still recognised as a
duplicate, and an open transaction is still open.

Expiry (Kafka's ``producer.id.expiration.ms``, KIP-854): a producer without an open
transaction that has written nothing here for that long is forgotten
(:meth:`ProducerStateTable.expire`), so a broker that runs for weeks under mirrors that each
restart with a new producer id does not keep every id it ever saw. Its next batch, if any,
is taken at any sequence, as from any producer this partition has no state for. Kafka times
a producer by its last batch's max timestamp; here it is the broker's clock at its last
append or marker, because a mirror writes batches that keep their source's (CreateTime)
timestamps, which may be days old, and would otherwise be forgotten while it is still
writing. Producers rebuilt from the log at load are timed from the first expiry check after
it: their append times are not in the log.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import kcodecs
from kcodecs import Batch, ControlType, KcodecsError, TimestampType

from .errors import ApiError, kerr
from .log import AbortedTxn
from .validator import last_sequence

__all__ = ["ProducerStateTable", "BatchMetadata", "LastRecord"]

NO_PRODUCER_ID = -1
RETAINED_BATCHES = 5
"""Kafka keeps the metadata of each producer's last 5 batches (max.in.flight for idempotence)."""


class BatchMetadata(NamedTuple):
    """One retained batch of a producer. Immutable; a NamedTuple, as one is built per appended
    batch and a frozen dataclass costs several times as much to build."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    log_append_time: int


@dataclass(frozen=True)
class LastRecord:
    last_data_offset: int | None
    epoch: int


@dataclass
class _ProducerEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))
    coordinator_epoch: int = -1
    txn_first_offset: int | None = None
    """First offset of this producer's open transaction in this partition, if one is open."""
    last_activity_ms: int | None = None
    """Broker time of its last append or marker here; None when rebuilt from the log and not seen since."""


class ProducerStateTable:
    """Sequence and transaction state of one partition."""

    def __init__(self) -> None:
        self._producers: dict[int, _ProducerEntry] = {}
        self._ongoing: dict[int, int] = {}
        """First offset -> producer id of each open transaction. Transactions open at growing
        offsets, so insertion order is offset order and the first key is the smallest."""

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction; None when none is open."""
        return next(iter(self._ongoing), None)

    def last_records(self) -> dict[int, "LastRecord"]:
        """Per producer, what the log cleaner must keep so this state can be rebuilt from the
        log: the last offset of its last data batch (None after an epoch bump by a marker)
        and its epoch (Kafka's ``lastRecordsOfActiveProducers``)."""
        return {pid: LastRecord(entry.batches[-1].last_offset if entry.batches else None, entry.epoch)
                for pid, entry in self._producers.items()}

    # -- data batches -------------------------------------------------------------------------

    def check(self, producer_id: int, epoch: int, first_sequence: int, last_sequence: int, *,
              transactional: bool = False) -> BatchMetadata | None:
        """Return the original metadata for a duplicate, None for a new in-order batch, or raise."""
        if producer_id == NO_PRODUCER_ID:
            return None
        entry = self._producers.get(producer_id)
        if entry is None:
            return None  # unknown producer: any sequence (KIP-360)
        if epoch < entry.epoch:
            raise ApiError(kerr.InvalidProducerEpochError,
                           f"producer {producer_id} epoch {epoch} is older than the current epoch {entry.epoch}")
        if epoch > entry.epoch:
            if first_sequence != 0:
                raise ApiError(kerr.OutOfOrderSequenceNumberError,
                               f"producer {producer_id} epoch {epoch} must start at sequence 0, got {first_sequence}")
        else:
            for meta in entry.batches:
                if (meta.first_sequence, meta.last_sequence) == (first_sequence, last_sequence):
                    return meta
            expected = (entry.batches[-1].last_sequence + 1) % (1 << 31) if entry.batches else 0
            if first_sequence != expected:
                raise ApiError(kerr.OutOfOrderSequenceNumberError,
                               f"producer {producer_id} sent sequence {first_sequence}, expected {expected}")
        # A new epoch does not close a transaction: only a marker does (ProducerAppendInfo.appendDataBatch).
        if entry.txn_first_offset is not None and not transactional:
            raise ApiError(kerr.InvalidTxnStateError,
                           f"producer {producer_id} sent a non-transactional batch inside its open transaction")
        return None

    def in_transaction(self, producer_id: int, epoch: int) -> bool:
        """Whether this producer has a transaction open here at ``epoch`` (Kafka's
        ``UnifiedLog.hasOngoingTransaction``): its first batch was verified with the
        coordinator, and only a marker, written by the coordinator, closes it."""
        entry = self._producers.get(producer_id)
        return entry is not None and entry.txn_first_offset is not None and entry.epoch == epoch

    def record(self, producer_id: int, epoch: int, meta: BatchMetadata, *, now_ms: int | None,
               transactional: bool = False) -> None:
        """Remember an appended batch; call only after :meth:`check` accepted it and the append
        succeeded (``now_ms``: the broker's time of the append; None when replaying the log)."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _ProducerEntry(epoch)
        elif epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(meta)
        entry.last_activity_ms = now_ms
        if transactional and entry.txn_first_offset is None:
            entry.txn_first_offset = meta.first_offset
            self._ongoing[meta.first_offset] = producer_id

    # -- markers -------------------------------------------------------------------------------

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Refuse a marker from a fenced producer epoch or coordinator epoch (``appendEndTxnMarker``)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise ApiError(kerr.InvalidProducerEpochError,
                           f"marker for producer {producer_id} has epoch {epoch}, older than its epoch {entry.epoch} here")
        if coordinator_epoch < entry.coordinator_epoch:
            raise ApiError(kerr.TransactionCoordinatorFencedError,
                           f"marker for producer {producer_id} from coordinator epoch {coordinator_epoch},"
                           f" older than {entry.coordinator_epoch}")

    def aborted_by(self, producer_id: int, marker_offset: int) -> AbortedTxn | None:
        """The index entry an ABORT marker at ``marker_offset`` would add, or None if the producer
        has no open transaction here. Pure: the caller writes the entry, then :meth:`record_marker`."""
        entry = self._producers.get(producer_id)
        if entry is None or entry.txn_first_offset is None:
            return None
        others = (first for first, pid in self._ongoing.items() if pid != producer_id)
        return AbortedTxn(producer_id, entry.txn_first_offset, marker_offset, next(others, marker_offset + 1))

    def record_marker(self, producer_id: int, epoch: int, coordinator_epoch: int, *, now_ms: int | None) -> None:
        """Close the producer's open transaction (if any) and adopt the marker's epochs
        (``now_ms`` as for :meth:`record`)."""
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = _ProducerEntry(epoch)
        elif epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()  # Kafka's maybeUpdateProducerEpoch: the new epoch starts at sequence 0
        entry.coordinator_epoch = coordinator_epoch
        entry.last_activity_ms = now_ms
        if entry.txn_first_offset is not None:
            del self._ongoing[entry.txn_first_offset]
            entry.txn_first_offset = None

    # -- expiry --------------------------------------------------------------------------------

    def expire(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget the producers idle for ``expiration_ms`` with no transaction open here (Kafka's
        ``removeExpiredProducers``); return their ids. One rebuilt from the log starts its idle
        time now."""
        expired = []
        for producer_id, entry in self._producers.items():
            if entry.last_activity_ms is None:
                entry.last_activity_ms = now_ms
            elif entry.txn_first_offset is None and now_ms - entry.last_activity_ms >= expiration_ms:
                expired.append(producer_id)
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    def __len__(self) -> int:
        """Producers with state here."""
        return len(self._producers)

    # -- loading -------------------------------------------------------------------------------

    def replay(self, batch: Batch) -> AbortedTxn | None:
        """Apply one stored batch (oldest first, on load); return the abort it indexes, if any."""
        if batch.magic < 2 or batch.producer_id == NO_PRODUCER_ID:
            return None
        producer_id, epoch = batch.producer_id, batch.producer_epoch
        if batch.is_control:
            marker = _marker(batch)
            if marker is None:
                return None
            kind, coordinator_epoch = marker
            aborted = self.aborted_by(producer_id, batch.base_offset) if kind is ControlType.ABORT else None
            self.record_marker(producer_id, epoch, coordinator_epoch, now_ms=None)
            return aborted
        append_time = batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME else -1
        self.record(producer_id, epoch, BatchMetadata(
            batch.base_sequence, last_sequence(batch), batch.base_offset, batch.last_offset, append_time,
        ), now_ms=None, transactional=batch.is_transactional)
        return None


def _marker(batch: Batch) -> tuple[ControlType, int] | None:
    """``(type, coordinator epoch)`` of a transaction marker; None for a control batch that is
    empty (what Kafka's cleaner leaves of a marker) or not a COMMIT/ABORT (KRaft's control records)."""
    try:
        record = next(iter(batch.records()), None)
        return None if record is None else kcodecs.parse_control_record(record)
    except KcodecsError:
        return None
