"""One transactional id's state and its legal transitions (Kafka's ``TransactionMetadata``).

Every transition is a pure function from one frozen :class:`TxnMetadata` to the next; the
coordinator persists the result before it replaces the old one, so what clients are told is
always on disk first. Kafka keeps a mutable object with a *pending* state to the same end;
here a transition is prepared, persisted and applied within one request, never interleaved.

States, with Kafka's ids (``TransactionState.fromId``)::

    Empty(0) --AddPartitions--> Ongoing(1) --EndTxn(commit)--> PrepareCommit(2) --markers--> CompleteCommit(4)
                                    |       --EndTxn(abort) / fence / timeout--> PrepareAbort(3) --markers--> CompleteAbort(5)
    Empty, CompleteCommit, CompleteAbort --InitProducerId--> Empty (epoch bumped)

Kafka's ``PrepareEpochFence`` and ``Dead`` are not needed: a fence goes straight to
PrepareAbort with the bumped epoch (Kafka passes through PrepareEpochFence only while the
abort is in flight), and an id that expires (:meth:`TxnMetadata.expired`) is dropped once
its tombstone is persisted (Kafka holds it as pending Dead until the tombstone is written).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

__all__ = ["TxnState", "TxnMetadata", "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "is_epoch_exhausted"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_MAX_EPOCH = (1 << 15) - 1

TopicPartition = tuple[str, int]


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's ``TransactionMetadata.isEpochExhausted``: the last epoch is kept for fencing."""
    return epoch >= _MAX_EPOCH - 1


class TxnState(enum.Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")

    @property
    def kafka_name(self) -> str:
        return self.value[1]

    @classmethod
    def named(cls, name: str) -> "TxnState":
        for state in cls:
            if state.kafka_name == name:
                return state
        raise ValueError(f"unknown transaction state {name!r}")

    @property
    def in_doubt(self) -> bool:
        """Decided and persisted, markers possibly not all written."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def idle(self) -> bool:
        """No transaction: InitProducerId may bump the epoch, AddPartitions may start one."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_VALID_PREVIOUS = {
    TxnState.EMPTY: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.ONGOING: {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
}


class IllegalTransition(Exception):
    """A coordinator bug, never a client's error: the coordinator checks states before it moves."""


@dataclass(frozen=True)
class TxnMetadata:
    """What Kafka's ``TransactionLogValue`` stores for a transactional id, plus the id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_update_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    """The id before the last rotation, so a retried InitProducerId after one is recognised."""
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    """The epoch before the last client-requested bump (KIP-360), so its retry is recognised."""
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_ms: int = -1
    next_producer_id: int = NO_PRODUCER_ID
    """Transactions v2: the producer id the next transaction gets, when this one's end bumped
    the last epoch there is (Kafka's ``nextProducerId``); taken up at completion."""

    @classmethod
    def new(cls, transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int) -> "TxnMetadata":
        """A fresh id: no epoch yet, so the first InitProducerId gives epoch 0."""
        return cls(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY, now_ms)

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def expired(self, now_ms: int, expiration_ms: int) -> bool:
        """Kafka's ``TransactionStateManager.shouldExpire``: no transaction (the states of
        ``TransactionState.isExpirationAllowed``) and no transition for ``transactional.id.expiration.ms``.
        An Ongoing or in-doubt transaction keeps its id, however old."""
        return self.state.idle and self.last_update_ms <= now_ms - expiration_ms

    def timed_out(self, now_ms: int) -> bool:
        """Kafka's ``timedOutTransactions``: an Ongoing transaction started longer ago than its timeout."""
        return self.state is TxnState.ONGOING and self.txn_start_ms + self.timeout_ms < now_ms

    # -- transitions (Kafka's prepare* methods) ----------------------------------------------

    def bump_epoch(self, timeout_ms: int, epoch: int, last_epoch: int, now_ms: int) -> "TxnMetadata":
        """InitProducerId on an idle id: the given epoch, no partitions (``prepareIncrementProducerEpoch``)."""
        return self._to(TxnState.EMPTY, now_ms, producer_epoch=epoch, last_producer_epoch=last_epoch,
                        timeout_ms=timeout_ms, partitions=frozenset(), txn_start_ms=-1,
                        previous_producer_id=self.producer_id)

    def rotate_producer_id(self, producer_id: int, timeout_ms: int, last_epoch: int, now_ms: int) -> "TxnMetadata":
        """Epochs exhausted: a new producer id at epoch 0 (``prepareProducerIdRotation``)."""
        return self._to(TxnState.EMPTY, now_ms, producer_id=producer_id, producer_epoch=0,
                        last_producer_epoch=last_epoch, timeout_ms=timeout_ms, partitions=frozenset(),
                        txn_start_ms=-1, previous_producer_id=self.producer_id)

    def add_partitions(self, partitions: frozenset[TopicPartition], now_ms: int) -> "TxnMetadata":
        """The transaction starts with its first partitions (``prepareAddPartitions``)."""
        start = now_ms if self.state.idle else self.txn_start_ms
        return self._to(TxnState.ONGOING, now_ms, partitions=self.partitions | partitions, txn_start_ms=start)

    def prepare_end(self, commit: bool, now_ms: int, *, bump: bool = False,
                    next_producer_id: int = NO_PRODUCER_ID) -> "TxnMetadata":
        """The client's decision, persisted before any marker is written (``prepareAbortOrCommit``).

        ``bump`` (transactions v2, EndTxn v5): the markers carry the next epoch, which fences
        the transaction's own epoch, and the next transaction runs in it; when this epoch is the
        last but one, the markers take the last one and ``next_producer_id`` follows at epoch 0."""
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if not bump:
            return self._to(state, now_ms)
        return self._to(state, now_ms, producer_epoch=self.producer_epoch + 1,
                        last_producer_epoch=self.producer_epoch, next_producer_id=next_producer_id)

    @property
    def next_identity(self) -> tuple[int, int]:
        """The producer id and epoch of this id's next transaction."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch

    def fence(self, now_ms: int) -> "TxnMetadata":
        """Abort an ongoing transaction under a bumped epoch, so its producer's writes and
        EndTxn are refused from now on (``prepareFenceProducerEpoch``, then PrepareAbort)."""
        if self.producer_epoch >= _MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence epoch {self.producer_epoch}")
        return self._to(TxnState.PREPARE_ABORT, now_ms, producer_epoch=self.producer_epoch + 1,
                        last_producer_epoch=NO_PRODUCER_EPOCH)

    def complete(self, now_ms: int) -> "TxnMetadata":
        """Every marker is written (``prepareComplete``)."""
        done = TxnState.COMPLETE_COMMIT if self.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        if self.next_producer_id != NO_PRODUCER_ID:  # transactions v2 ran out of epochs: rotate
            return self._to(done, now_ms, partitions=frozenset(), producer_id=self.next_producer_id, producer_epoch=0,
                            previous_producer_id=self.producer_id, next_producer_id=NO_PRODUCER_ID)
        return self._to(done, now_ms, partitions=frozenset())

    def _to(self, state: TxnState, now_ms: int, **changes) -> "TxnMetadata":
        if self.state not in _VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} cannot become {state.kafka_name}")
        return replace(self, state=state, last_update_ms=now_ms, **changes)
