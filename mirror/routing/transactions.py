"""Read committed: which batches of one fetched record set belong to aborted transactions.

A transactional producer's batches reach the log before anyone knows whether its
transaction commits (KIP-98): an abort leaves them there, followed by an abort marker, and
only the partition leader's index of aborted transactions says which ones to skip. A
read_committed Fetch stops at the last stable offset and lists, as ``(producer_id,
first_offset)``, every aborted transaction overlapping the fetched range (Kafka's
``collectAbortedTransactions``), including one that began before the fetch offset or goes
on past the end of the response. That list and the batches alone decide, so one fetch
needs no state from the one before.

:class:`ReadCommitted` applies the list as Kafka's consumer does (``CompletedFetch``
``nextFetchedRecord``; kafka-python's ``PartitionRecords`` is the same): before each batch
with a producer id, the transactions whose first offset is at or before the batch's last
offset make their producers *aborted*; a transactional data batch of an aborted producer is
skipped; that producer's abort marker ends its aborted transaction, so its later batches
(a next transaction, committed) are read again. Markers themselves are never data: the
router drops them.
"""

from __future__ import annotations

import heapq
from typing import Iterable

from kcodecs import Batch, ControlType, parse_control_record

__all__ = ["ReadCommitted", "is_abort_marker"]


class ReadCommitted:
    """The read_committed filter of one fetched record set. Pure, no I/O.

    Ask :meth:`is_aborted` about every batch of the record set, in log order, including
    batches the caller then leaves out for other reasons (before its fetch offset): each
    answer depends on the batches asked about before.
    """

    def __init__(self, aborted_transactions: Iterable[tuple[int, int]]):
        """``aborted_transactions``: ``(producer_id, first_offset)`` pairs from the Fetch response."""
        # A min-heap on the first offset, Kafka's PriorityQueue; the producer id breaks ties.
        self._pending = [(first_offset, producer_id) for producer_id, first_offset in aborted_transactions]
        heapq.heapify(self._pending)
        self._aborted: set[int] = set()

    def is_aborted(self, batch: Batch) -> bool:
        """Whether ``batch`` holds data of an aborted transaction, to be left out."""
        if not self._pending and not self._aborted:
            return False  # nearly every fetch: no aborted transaction in it, no header to read
        producer_id = batch.producer_id
        if producer_id < 0:
            return False  # v0/v1 or a plain producer: never part of a transaction
        while self._pending and self._pending[0][0] <= batch.last_offset:
            self._aborted.add(heapq.heappop(self._pending)[1])
        if batch.is_control:
            if producer_id in self._aborted and is_abort_marker(batch):
                self._aborted.discard(producer_id)
            return False
        return batch.is_transactional and producer_id in self._aborted


def is_abort_marker(batch: Batch) -> bool:
    """A control batch holds one marker; its key says commit or abort (Kafka's ``ControlRecordType``)."""
    first = next(iter(batch.records()), None)
    return first is not None and parse_control_record(first)[0] is ControlType.ABORT
