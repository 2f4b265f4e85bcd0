"""The client side of a Kafka transaction (KIP-98, seed 002): Kafka's ``TransactionManager``.

A transactional producer talks to its *transaction coordinator*, the broker that
FindCoordinator names for its transactional id:

1. ``InitProducerId(transactional_id)`` gets the producer id and a new epoch. The coordinator
   aborts whatever transaction the id still had open and fences every older epoch: a zombie
   of an earlier attempt can neither produce nor commit any more (``PRODUCER_FENCED``).
2. ``AddPartitionsToTxn`` registers each partition before the first batch goes to it, so the
   coordinator knows where to write the commit or abort markers.
3. Produce requests carry the transactional id and batches the transactional bit.
4. ``EndTxn(committed)`` commits or aborts: the coordinator writes a marker to every
   registered partition, and read_committed consumers see the records from then on.

Transactions v2 (KIP-890, Kafka 4.0's default ``transaction.version=2``): a coordinator that
answers EndTxn v5 bumps the producer's epoch at the end of every transaction, and returns the
new producer id and epoch. The next transaction must use them, with sequences from 0, or its
first request is ``PRODUCER_FENCED``; so :meth:`TransactionManager.end` adopts them. A v4 and
older answer (Kafka 3.x, the embedded broker) keeps the epoch, as transactions v1 do.

Retries follow Kafka's producer: COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR look the
coordinator up again, COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS (the previous
transaction's markers are still being written) wait and retry, the latter every 20 ms on
AddPartitionsToTxn as Java's producer does; a fenced or invalid epoch is
:class:`ProducerFencedError`; every other error code is a :class:`TransactionError`. A retried
``EndTxn`` whose first answer was lost is answered as done by the coordinator.
"""

from __future__ import annotations

import logging
import time
from typing import Iterable

import kafka.errors as kerr
from kafka.protocol.producer import AddPartitionsToTxnRequest, EndTxnRequest, EndTxnResponse, InitProducerIdRequest

from kcodecs import KMirrorError

from .client import KafkaClient
from .coordinators import FIND_AGAIN, TRANSACTION, Coordinator
from .errors import BrokerApiError
from .pipeline import PipelinedConnection
from .types import TopicPartition

__all__ = ["TransactionManager", "TransactionError", "ProducerFencedError", "PendingEnd"]

log = logging.getLogger(__name__)

_FENCED = (kerr.ProducerFencedError.errno, kerr.InvalidProducerEpochError.errno)
_CONCURRENT = kerr.ConcurrentTransactionsError.errno
MARKERS_PENDING_BACKOFF_S = 0.02
"""The wait before asking again when the coordinator answers a transaction's first
AddPartitionsToTxn with CONCURRENT_TRANSACTIONS: the previous transaction's markers are still
being written, which on Kafka takes milliseconds after EndTxn returned. Java's producer waits 20
ms there (``ADD_PARTITIONS_RETRY_BACKOFF_MS``), not its 100 ms ``retry.backoff.ms``; with the
client's exponential backoff (0.1, 0.2, 0.4 s) a copier committing every 20 ms met it after
most commits and waited out backoffs far longer than the markers take, which then dominated
replication latency on real Kafka (figures: docs/performance.md, "Replication latency")."""


class _MarkersPending(Exception):
    """CONCURRENT_TRANSACTIONS on AddPartitionsToTxn: retried at :data:`MARKERS_PENDING_BACKOFF_S`,
    outside the client's backoff."""


class TransactionError(BrokerApiError):
    """The coordinator refused a transactional request in a way retrying cannot mend; the
    transaction is lost (its records are aborted or will be, when it times out)."""


class ProducerFencedError(TransactionError):
    """A newer producer with the same transactional id took over (a newer attempt of the same
    task): this one must stop, and whatever it had not committed is aborted."""


class PendingEnd:
    """An EndTxn sent and not yet answered (:meth:`TransactionManager.send_end`): its
    connection, for the caller's loop to wait on with its other sockets, and the request."""

    def __init__(self, conn: PipelinedConnection, request: EndTxnRequest):
        self.conn = conn
        self.request = request


class TransactionManager:
    """One transactional id's conversation with its coordinator."""

    def __init__(self, client: KafkaClient, transactional_id: str, *, timeout_ms: int):
        if not transactional_id:
            raise ValueError("a transactional id must not be empty")
        self._client = client
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self._coordinator = Coordinator(client, transactional_id, TRANSACTION)
        self.producer_id = -1
        self.epoch = -1
        self._end_conn: PipelinedConnection | None = None
        """The connection EndTxn goes ahead on (:meth:`send_end`), kept from one to the next."""

    def init_producer(self) -> tuple[int, int]:
        """Our producer id and a new epoch; fences earlier producers of this id and aborts
        their open transaction."""
        request = InitProducerIdRequest(transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
                                        producer_id=-1, producer_epoch=-1)

        def read(response) -> tuple[int, int]:
            self._check("InitProducerId", response.error_code)
            return response.producer_id, response.producer_epoch

        self.producer_id, self.epoch = self._client.retrying(f"init transactional producer {self.transactional_id}",
                                                             lambda: self._coordinator.call(request, read))
        log.debug("transactional id %s: producer %d epoch %d", self.transactional_id, self.producer_id, self.epoch)
        return self.producer_id, self.epoch

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Register ``partitions`` in the open transaction (one request for all of them)."""
        wanted = sorted(set(partitions), key=lambda tp: (tp.topic, tp.partition))
        if not wanted:
            return
        by_topic: dict[str, list[int]] = {}
        for tp in wanted:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[topic(name=name, partitions=parts) for name, parts in by_topic.items()])

        def read(response) -> None:
            codes = [(TopicPartition(t.name, p.partition_index), p.partition_error_code)
                     for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]
            if any(code == _CONCURRENT for _, code in codes):
                raise _MarkersPending()
            # OPERATION_NOT_ATTEMPTED marks the partitions left alone because another one failed.
            failed = [(tp, code) for tp, code in codes if code not in (0, kerr.OperationNotAttemptedError.errno)]
            for tp, code in failed:
                self._check("AddPartitionsToTxn", code, tp)
            if any(code for _, code in codes):
                raise BrokerApiError.from_code("AddPartitionsToTxn", kerr.OperationNotAttemptedError.errno)

        operation = f"add {len(wanted)} partitions to transaction {self.transactional_id}"
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            try:
                return self._client.retrying(operation, lambda: self._coordinator.call(request, read))
            except _MarkersPending:
                if time.monotonic() >= deadline:
                    raise BrokerApiError.from_code("AddPartitionsToTxn", _CONCURRENT,
                                                   detail=f"transactional id {self.transactional_id!r}") from None
                time.sleep(MARKERS_PENDING_BACKOFF_S)

    def end(self, commit: bool) -> bool:
        """Commit or abort the open transaction; returns once the coordinator has decided.

        True when the coordinator bumped the epoch (transactions v2): :attr:`producer_id` and
        :attr:`epoch` are then the new ones, and every partition's sequence starts again at 0."""
        request = EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                producer_epoch=self.epoch, committed=commit)

        def read(response) -> tuple[int, int] | None:
            self._check("EndTxn", response.error_code)
            # v5 carries the identity for the next transaction (-1 where a coordinator did not bump).
            if getattr(response, "producer_epoch", -1) >= 0 and getattr(response, "producer_id", -1) >= 0:
                return response.producer_id, response.producer_epoch
            return None

        bumped = self._client.retrying(f"{'commit' if commit else 'abort'} transaction {self.transactional_id}",
                                       lambda: self._coordinator.call(request, read))
        return bumped is not None and self._adopt(*bumped)

    def send_end(self, commit: bool) -> PendingEnd | None:
        """Send EndTxn without waiting for its answer, on a connection of its own to the
        coordinator (kept for the next one): the caller goes on copying and reads the answer
        with :meth:`read_end` once the connection is readable. None when it could not be sent
        (no coordinator known and none found, a lost connection): the caller then ends the
        transaction with :meth:`end`, which retries as Kafka's producer does."""
        request = EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                producer_epoch=self.epoch, committed=commit)
        try:
            conn = self._end_connection()
            conn.send_encoded(EndTxnRequest, lambda cid, version: [_framed(request, cid, version, conn)], None)
        except KMirrorError as exc:
            log.debug("transactional id %s: EndTxn not sent ahead (%s); ending it the blocking way",
                      self.transactional_id, exc)
            self._drop_end_connection()
            return None
        return PendingEnd(conn, request)

    def read_end(self, pending: PendingEnd, *, overdue: bool = False) -> bool | None:
        """The answer to :meth:`send_end`'s EndTxn: as :meth:`end` returns (True: transactions
        v2 bumped the epoch), or None when the answer was an error or never came (the
        connection lost, or ``overdue``: unanswered for a request timeout): the caller then
        ends the transaction with :meth:`end`, which a coordinator that did end it answers as
        done."""
        if overdue:
            self._drop_end_connection()
            return None
        try:
            sent, body = pending.conn.receive(EndTxnResponse)
            response = EndTxnResponse.decode(body, version=sent.version)
        except KMirrorError as exc:
            log.debug("transactional id %s: EndTxn's answer lost (%s)", self.transactional_id, exc)
            self._drop_end_connection()
            return None
        except Exception as exc:  # kafka-python raises assorted errors on bad bytes
            log.debug("transactional id %s: EndTxn's answer undecodable (%r)", self.transactional_id, exc)
            self._drop_end_connection()
            return None
        if response.error_code:
            error = kerr.for_code(response.error_code)
            if response.error_code in _FENCED or not error.retriable:
                self._check("EndTxn", response.error_code)  # raises
            if response.error_code in FIND_AGAIN:
                self._drop_end_connection()
            return None
        return self._adopt(getattr(response, "producer_id", -1), getattr(response, "producer_epoch", -1))

    def close(self) -> None:
        self._drop_end_connection()

    # ---- internals ----------------------------------------------------------------------------

    def _end_connection(self) -> PipelinedConnection:
        if self._end_conn is None or self._end_conn.closed:
            address = self._coordinator.address()
            self._end_conn = PipelinedConnection(self._client.connect(address), 1)
        return self._end_conn

    def _drop_end_connection(self) -> None:
        if self._end_conn is not None:
            self._end_conn.abandon()
            self._end_conn = None
        self._coordinator.forget()

    def _adopt(self, producer_id: int, epoch: int) -> bool:
        """An EndTxn answer's identity for the next transaction (v5: -1 where the coordinator did
        not bump, and v4 and older say none): True when it is a new one (transactions v2)."""
        if producer_id < 0 or epoch < 0 or (producer_id, epoch) == (self.producer_id, self.epoch):
            return False
        log.debug("transactional id %s: transaction ended, producer %d epoch %d -> producer %d epoch %d (v2)",
                  self.transactional_id, self.producer_id, self.epoch, producer_id, epoch)
        self.producer_id, self.epoch = producer_id, epoch
        return True

    def _check(self, api: str, code: int, tp: TopicPartition | None = None) -> None:
        if not code:
            return
        error = kerr.for_code(code)
        detail = f"transactional id {self.transactional_id!r}, producer {self.producer_id} epoch {self.epoch}"
        if code in _FENCED:
            raise ProducerFencedError(api, error.message, code, False, tp, detail=detail)
        if error.retriable:
            raise BrokerApiError.from_code(api, code, tp, detail=detail)
        raise TransactionError(api, error.message, code, False, tp, detail=detail)


def _framed(request: EndTxnRequest, correlation_id: int, version: int, conn: PipelinedConnection) -> bytes:
    """``request`` framed as ``version`` with its header, by kafka-python's schema (a request a
    transaction, not a record, so not the hot path's own codec)."""
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id=conn.broker.conn.client_id)
    return request.encode(header=True, framed=True)
