"""Which batches of a cleaned section belong to aborted transactions, and which transaction
markers no longer guard any data (Kafka's ``CleanedTransactionMetadata``).

Fed every batch in offset order. Aborted transactions come from the transaction index
(:meth:`PartitionLog.collect_aborted_txns`), sorted by first offset; a data batch of a
producer whose aborted transaction has started (and whose marker has not been read yet) is
aborted: the cleaner drops it. A marker may go only once no batch of its transaction was
seen in this pass: a COMMIT while committed batches remain would be needed to close their
transaction when the state is rebuilt, an ABORT while aborted batches remain (they are
dropped in this same pass) keeps its index entry, written to the cleaned segment.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable

import kcodecs
from kcodecs import ControlType, KcodecsError, V2Batch

from ..log.txn_index import AbortedTxn, TransactionIndex

__all__ = ["CleanedTransactions"]


@dataclass
class _OngoingAbort:
    txn: AbortedTxn
    batches_seen: bool = False


class CleanedTransactions:
    def __init__(self, aborted: Iterable[AbortedTxn]):
        self._pending = deque(sorted(aborted, key=lambda txn: txn.first_offset))
        self._aborting: dict[int, _OngoingAbort] = {}
        self._committing: set[int] = set()
        self.index: TransactionIndex | None = None
        """The cleaned segment's transaction index, where kept ABORT markers are recorded."""

    def _start_aborts_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            self._aborting[txn.producer_id] = _OngoingAbort(txn)

    def is_aborted(self, batch: V2Batch) -> bool:
        """Read a data batch; True if it belongs to an aborted transaction (Kafka's ``onBatchRead``)."""
        self._start_aborts_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        ongoing = self._aborting.get(batch.producer_id)
        if ongoing is not None:
            ongoing.batches_seen = True
            return True
        self._committing.add(batch.producer_id)
        return False

    def marker_is_spent(self, batch: V2Batch) -> bool:
        """Read a control batch; True if it guards no batch left in the log (``onControlBatchRead``)."""
        self._start_aborts_up_to(batch.last_offset)
        try:
            record = next(iter(batch.records()), None)
            kind = None if record is None else kcodecs.parse_control_record(record)[0]
        except KcodecsError:
            return False  # not a marker this broker understands: keep it
        if record is None:
            return True  # an empty control batch: an earlier clean already removed the marker
        producer_id = batch.producer_id
        if kind is ControlType.ABORT:
            ongoing = self._aborting.pop(producer_id, None)
            if ongoing is not None and ongoing.batches_seen:
                if self.index is not None:
                    self.index.append(ongoing.txn)
                return False
            return True
        if kind is ControlType.COMMIT:
            if producer_id in self._committing:
                self._committing.discard(producer_id)
                return False
            return True
        return False
