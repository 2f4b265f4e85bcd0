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
- :meth:`commit` waits until every batch is acknowledged, then commits. A transaction begins
  implicitly with its first partition, as in Kafka's producer.

Sequence numbers run on across transactions within one epoch, as in Kafka. Under transactions
v2 (Kafka 4.x) every commit ends the epoch: the coordinator's answer names the next one, and
sequences start again at 0 (:meth:`TransactionManager.end`). Any failure
leaves the producer unusable (:attr:`failed`); a new one with the same transactional id
takes over, and its ``InitProducerId`` aborts what this one left open.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from kcodecs import KMirrorError

from .client import KafkaClient
from .producer import IdempotentProducer
from .transactions import TransactionManager
from .types import TopicPartition

__all__ = ["TransactionalProducer"]


class TransactionalProducer(IdempotentProducer):
    """Writes ready-made v2 batches in transactions of one transactional id."""

    def __init__(self, client: KafkaClient, transactional_id: str, *, transaction_timeout_ms: int = 60_000,
                 **kwargs: Any):
        self.transaction = TransactionManager(client, transactional_id, timeout_ms=transaction_timeout_ms)
        identity = self.transaction.init_producer()
        super().__init__(client, identity=identity, transactional_id=transactional_id, **kwargs)
        self._registered: set[TopicPartition] = set()

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
        if new:
            self._guarded(lambda: self.transaction.add_partitions(new))
            self._registered |= new

    def enqueue(self, tp: TopicPartition, data, records: int, token: Any = None) -> None:
        if tp not in self._registered:
            self.add_partitions([tp])
        super().enqueue(tp, data, records, token)

    def commit(self) -> None:
        """Wait for every enqueued batch, then commit the transaction (nothing to do when empty)."""
        self.flush()
        if self._registered:
            self._guarded(self._end)
            self._registered.clear()

    def _end(self) -> None:
        if self.transaction.end(commit=True):  # transactions v2: the next one has a new epoch
            self.producer_id, self.epoch = self.transaction.producer_id, self.transaction.epoch
            self._restart_sequences()

    def _guarded(self, call: Callable[[], None]) -> None:
        try:
            call()
        except KMirrorError as exc:
            raise self._fatal(exc) from None
