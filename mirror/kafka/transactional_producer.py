"""The idempotent producer, writing in transactions (KIP-98): what exactly-once mirroring uses.

Everything about batches, sequences, pipelining and retries is
:class:`~mirror.kafka.IdempotentProducer`'s; this adds the transactional id's lifecycle from
:class:`~mirror.kafka.transactions.TransactionManager`:

- the producer id and epoch come from ``InitProducerId(transactional_id)``, which fences every
  earlier producer of the id (a previous attempt of the same task) and aborts its open
  transaction; :meth:`renew` does it again for each new task attempt, so a producer kept in
  a reused worker still fences whatever ran the task since;
- a partition is registered with the coordinator (AddPartitionsToTxn) before its first batch
  of each transaction goes out, all known ones in one request (:meth:`add_partitions`);
  under transactions v2 (the cluster's finalized ``transaction.version`` 2 or more, Kafka
  4.x), Produce v12 adds it itself, as Java's producer then relies on: no request, no wait;
- :meth:`commit` waits until every batch is acknowledged, then commits. A transaction begins
  implicitly with its first partition, as in Kafka's producer.

A copy that runs on need not stop for a commit (:meth:`seal`): the transaction's batches are
sealed, and batches enqueued from then on wait here, unstamped, for the next one. Once every
sealed batch is acknowledged, EndTxn goes out on the coordinator's connection without blocking
(:meth:`~mirror.kafka.transactions.TransactionManager.send_end`); the caller's loop waits on it
with its other sockets (:meth:`connections`), reads the answer (:meth:`on_readable`), and from
then on the waiting batches are stamped (under transactions v2 with the new epoch, sequences
from 0) and sent. Meanwhile the copy fetches and routes: only sending waits, as it must, since
a batch of the next transaction may not reach the destination before the coordinator has
decided this one. :meth:`take_ended` says when a sealed transaction committed.

Sequence numbers run on across transactions within one epoch, as in Kafka. Under transactions
v2 (Kafka 4.x) every commit ends the epoch: the coordinator's answer names the next one, and
sequences start again at 0 (:meth:`TransactionManager.end`). Any failure
leaves the producer unusable (:attr:`failed`); a new one with the same transactional id
takes over, and its ``InitProducerId`` aborts what this one left open.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from kcodecs import KMirrorError

from .client import KafkaClient
from .producer import IdempotentProducer
from .pipeline import PipelinedConnection
from .transactions import PendingEnd, TransactionManager
from .types import TopicPartition

__all__ = ["TransactionalProducer"]


class TransactionalProducer(IdempotentProducer):
    """Writes ready-made v2 batches in transactions of one transactional id."""

    def __init__(self, client: KafkaClient, transactional_id: str, *, transaction_timeout_ms: int = 60_000,
                 **kwargs: Any):
        self.transaction = TransactionManager(client, transactional_id, timeout_ms=transaction_timeout_ms)
        identity = self.transaction.init_producer()
        super().__init__(client, identity=identity, transactional_id=transactional_id, **kwargs)
        self.implicit_partitions = client.feature_level("transaction.version") >= 2
        """Transactions v2: Produce v12 adds a partition to the transaction (KIP-890)."""
        self._registered: set[TopicPartition] = set()
        self._sealed = False
        """The open transaction's batches are all enqueued (:meth:`seal`); what comes is the next one's."""
        self._next: list[tuple[TopicPartition, Any, int, Any]] = []
        """The next transaction's batches, waiting unstamped until this one ends."""
        self._next_bytes = 0
        self._ending: PendingEnd | None = None
        self._end_began = 0.0
        self._ended: list[tuple[float, float]] = []

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (a partition was registered since the last commit)."""
        return bool(self._registered)

    def renew(self) -> None:
        """Take the transactional id over again (a new epoch, sequences from 0), as a new task
        attempt must: whatever producer of the id ran before, in this process or another, is
        fenced from here on and its open transaction aborted. Only between transactions."""
        self._check_usable()
        if not self.idle or self._registered:
            raise KMirrorError("renew() in the middle of a transaction")
        self._guarded(self._reinit)

    def _reinit(self) -> None:
        self.producer_id, self.epoch = self.transaction.init_producer()
        self._restart_sequences()

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Register the partitions this transaction will write, those not yet registered, in one request."""
        self._check_usable()
        new = {tp for tp in partitions if tp not in self._registered}
        if new and not self.implicit_partitions:
            self._guarded(lambda: self.transaction.add_partitions(new))
        self._registered |= new

    def enqueue(self, tp: TopicPartition, data, records: int, token: Any = None) -> None:
        if self._sealed:
            self._check_usable()
            self._next.append((tp, data, records, token))
            self._next_bytes += len(data)
            return
        if tp not in self._registered:
            self.add_partitions([tp])
        super().enqueue(tp, data, records, token)

    # ---- the state the copy loop reads ----------------------------------------------------------

    @property
    def idle(self) -> bool:
        return super().idle and not self._sealed and not self._next

    @property
    def buffered_bytes(self) -> int:
        return super().buffered_bytes + self._next_bytes

    @property
    def ending(self) -> bool:
        """A transaction is sealed and not yet ended."""
        return self._sealed

    def connections(self) -> list[PipelinedConnection]:
        ending = [self._ending.conn] if self._ending is not None else []
        return super().connections() + ending

    def owns(self, conn: PipelinedConnection) -> bool:
        return (self._ending is not None and conn is self._ending.conn) or super().owns(conn)

    # ---- committing -------------------------------------------------------------------------------

    def seal(self) -> None:
        """This transaction has every batch it will have: end it as soon as they are all
        acknowledged, while what is enqueued from now on waits for the next one. Nothing to do
        for an empty transaction."""
        self._check_usable()
        if self._registered and not self._sealed:
            self._sealed = True

    def take_ended(self) -> list[tuple[float, float]]:
        """When (seconds since the epoch) each sealed transaction's EndTxn went out and when it
        committed, since the last call."""
        ended, self._ended = self._ended, []
        return ended

    def send_ready(self) -> None:
        super().send_ready()
        if self._sealed and self._ending is None and super().idle:
            self._guarded(self._send_end)
        elif self._ending is not None and self._ending.conn.overdue(self._clock(), self._timeout_ms / 1000):
            self._guarded(lambda: self._read_end(overdue=True))

    def on_readable(self, conn: PipelinedConnection) -> None:
        if self._ending is not None and conn is self._ending.conn:
            self._guarded(self._read_end)
            self.send_ready()  # the next transaction's batches, at once
        else:
            super().on_readable(conn)

    def commit(self) -> None:
        """Wait for every enqueued batch, then commit the transaction (nothing to do when
        empty). A sealed transaction ends first, and then the next one's batches commit too."""
        while self._sealed:
            self.poll(0.1)
        self.flush()
        if self._registered:
            self._guarded(self._end)
            self._registered.clear()

    def close(self) -> None:
        super().close()
        self.transaction.close()

    def _end(self) -> None:
        if self.transaction.end(commit=True):  # transactions v2: the next one has a new epoch
            self._adopt_epoch()

    def _adopt_epoch(self) -> None:
        self.producer_id, self.epoch = self.transaction.producer_id, self.transaction.epoch
        self._restart_sequences()

    def _send_end(self) -> None:
        self._end_began = time.time()
        self._ending = self.transaction.send_end(commit=True)
        if self._ending is None:  # not sent ahead: the blocking way, with its retries
            self._end()
            self._ended_now()

    def _read_end(self, overdue: bool = False) -> None:
        pending, self._ending = self._ending, None
        bumped = self.transaction.read_end(pending, overdue=overdue)
        if bumped is None:  # an error or a lost answer: the blocking way, with its retries
            self._end()
        elif bumped:
            self._adopt_epoch()
        self._ended_now()

    def _ended_now(self) -> None:
        """The sealed transaction committed: the next one's batches go out."""
        self._ended.append((self._end_began, time.time()))
        self._registered.clear()
        self._sealed = False
        waiting, self._next, self._next_bytes = self._next, [], 0
        for tp, data, records, token in waiting:
            self.enqueue(tp, data, records, token)

    def _guarded(self, call: Callable[[], None]) -> None:
        try:
            call()
        except KMirrorError as exc:
            raise self._fatal(exc) from None
