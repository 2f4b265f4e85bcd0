"""The one commit: the order in which a copy's records become durable at the destination, the
same for a copy task of a micro-batch (:mod:`.task`, :mod:`.exactly_once`) and for a resident
copier (:mod:`.copier`).

1. The copy's records are produced and acknowledged (the caller's loop): only an
   acknowledgement says where a record landed.
2. The offset syncs, where they landed (:mod:`.offset_syncs`), for group offset translation.
3. Exactly-once: the source offsets the records reach, to the offsets topic
   (:mod:`.offsets_topic`), then EndTxn: the destination holds the records, their syncs and
   their offsets all, or none of them. At-least-once: the syncs are flushed; a copy that
   fails before is run again and writes them again.
4. The positions recorded, so the next commit's reader need not read them back.

Readers of what a transaction wrote wait, for one left open by a producer that died, as
long as :func:`open_transaction_wait_s` says: the coordinator aborts it once its timeout
passes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

from ..kafka import IdempotentProducer, TopicPartition
from ..kafka.transactional_producer import TransactionalProducer
from .offset_syncs import SyncLog, write_syncs
from .offsets_topic import CommittedOffsets, encode_offsets

__all__ = ["Committer", "open_transaction_wait_s"]


def open_transaction_wait_s(transaction_timeout_s: float) -> float:
    """How long a reader of the destination's offsets or syncs waits behind an open
    transaction: twice the producers' transaction timeout, long enough for the coordinator to
    abort one left open by a producer that died (and for the abort's markers to be written)."""
    return 2 * transaction_timeout_s


@dataclass
class Committer:
    """Commits one copy's records, in the order of the module's docstring. ``offsets`` set
    means exactly-once (``producer`` is then a :class:`TransactionalProducer`)."""

    producer: IdempotentProducer
    syncs_to: TopicPartition | None = None
    """The offset-syncs topic's partition (None: no syncs written, for copies no group follows)."""
    offsets: CommittedOffsets | None = None

    @property
    def exactly_once(self) -> bool:
        return self.offsets is not None

    def begin(self) -> dict[TopicPartition, int]:
        """Before a copy task's attempt: exactly-once, this attempt's epoch (no earlier producer
        of the task can commit after it), then what the destination says was committed
        (Kafka's read-process-write order); at-least-once, nothing is known."""
        if self.offsets is None:
            return {}
        assert isinstance(self.producer, TransactionalProducer)
        self.producer.renew()
        return self.offsets.refresh()

    def commit(self, positions: Mapping[TopicPartition, int], syncs: SyncLog, *, flush: bool = True) -> None:
        """Make durable what was produced and acknowledged so far, with ``syncs`` (where it
        landed) and, exactly-once, ``positions`` (the source offsets it reaches).

        At-least-once without ``flush``, the syncs are only enqueued: a resident copier's
        loop takes their acknowledgements with its own (they carry no token), and its last
        commit flushes."""
        if self.syncs_to is not None:
            write_syncs(self.producer, self.syncs_to, syncs)
        if self.offsets is None:
            if flush:
                self.producer.flush()
                self.producer.take_acks()  # the syncs': the next copy must not see them as its own
            return
        assert isinstance(self.producer, TransactionalProducer)
        self.producer.enqueue(self.offsets.partition, encode_offsets(positions, time.time_ns() // 1_000_000),
                              len(positions))
        self.producer.commit()
        self.producer.take_acks()  # the offsets' and syncs': the next copy must not see them as its own
        self.offsets.record(dict(positions))

    def abort(self, cause: BaseException) -> None:
        """What the producer holds belongs to a failed copy: dropped, and exactly-once its
        transaction aborted, before anything else is produced."""
        self.producer.abort(cause)
