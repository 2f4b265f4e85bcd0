"""The destination side of the data plane: an idempotent producer of ready-made batches,
pipelined up to five requests per connection (KIP-98, Kafka's ``RecordAccumulator`` + ``Sender``).

The mirror's batches are already built (forwarded source bytes, or rebuilt ones), so there is
no accumulator of records here, only of batches: :meth:`IdempotentProducer.enqueue` gives a
batch the producer's id, epoch and the partition's next sequence number by an in-place header
patch (:func:`kcodecs.stamp_v2`, CRC recomputed once, with the rest of what a producer's
batch carries: base offset 0, no leader epoch, CreateTime), and the batch keeps those bytes
until it is acknowledged. Each request carries the oldest unsent batch of every partition led
by one broker (a Produce request holds one batch per partition), and each connection carries
up to ``max_in_flight`` requests.

Why retries can neither reorder nor duplicate a partition (within one producer id): the
destination keeps the last five sequence ranges of each producer and partition. A batch sent
again with the sequence it had is acknowledged with its first offset and not written again;
a batch whose predecessor is missing is refused with OUT_OF_ORDER_SEQUENCE_NUMBER. So when a
batch fails (a retriable error, a lost connection, a request that timed out), the producer
waits until every later batch of that partition has its answer too, then sends them all again
in sequence order, as Kafka's ``Sender`` re-enqueues them (``RecordAccumulator.reenqueue``
keeps sequence order). A later batch can be acknowledged after an earlier one failed (a
timeout after the write): the broker took it in sequence, so the earlier one is in the log
and its resend is answered as a duplicate.

Except where the destination has no sequence state for the producer on a partition yet: Kafka
then takes a batch at *any* sequence (``ProducerStateManager``: state lost to retention must
not block a producer). On a topic just created, the first batch can be refused with
NOT_LEADER_OR_FOLLOWER while the next one, a moment later, finds the partition ready and is
written as the producer's first; the first one's resend is then out of order (found on Kafka
4.4 by the bench filling new topics, issue 35). So a partition has one batch in flight until
the destination has acknowledged one of ours, and up to ``max_in_flight`` after.

Error codes, as Kafka's producer reads them (``Sender.completeBatch``, ``TransactionManager``):

==============================  =============================================================
DUPLICATE_SEQUENCE_NUMBER       already written: success, first offset unknown (-1)
OUT_OF_ORDER_SEQUENCE_NUMBER    after an earlier batch of the partition failed: retried with
                                it; for the oldest unacknowledged batch: fatal
                                (:class:`ProducerSequenceError`), the destination lost data
UNKNOWN_PRODUCER_ID             the destination has no state for our id, so it cannot tell a
                                duplicate: fatal (:class:`ProducerSequenceError`). Kafka 2.5+
                                (KIP-360) bumps the epoch and resets sequences where it can
                                prove nothing was lost; a mirror gets a new producer on restart
PRODUCER_FENCED,                a newer producer took our transactional id over: fatal
INVALID_PRODUCER_EPOCH          (:class:`~mirror.kafka.transactions.ProducerFencedError`)
retriable codes, lost           retried as above, with backoff, up to ``retry.attempts`` in a
connections, timeouts           row without progress
anything else                   fatal: :class:`~mirror.kafka.BrokerApiError`
==============================  =============================================================

A fatal error leaves the producer unusable (:attr:`IdempotentProducer.failed`): its
unacknowledged batches may or may not be written, so a new producer (a new id) must take over.

Not thread-safe. Driven by :meth:`send_ready` / :meth:`on_readable` from one loop, or by
:meth:`flush` alone.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import kafka.errors as kerr
from kafka.protocol.producer import ProduceRequest, ProduceResponse

import kcodecs
from kcodecs import KMirrorError

from ..protocol import (ProducedPartition, ProducePartition, ProduceResponseData, decode_plain_produce_response,
                        encode_produce_request)
from .backoff import Backoff
from .client import KafkaClient, is_retriable
from .connection import ConnectionFailedError, ProtocolError
from .errors import BrokerApiError
from .pipeline import PipelinedConnection, wait_readable
from .transactions import ProducerFencedError
from .types import TopicPartition

__all__ = ["IdempotentProducer", "Enqueued", "ProducerSequenceError", "MAX_IN_FLIGHT"]

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 5
"""Kafka's limit for an idempotent producer: brokers remember five batches per producer and partition."""
_SEQUENCE_SPAN = 1 << 31  # sequences wrap at Int32.MAX (DefaultRecordBatch.incrementSequence)


class ProducerSequenceError(KMirrorError):
    """The destination refused a batch's producer state in a way no retry can mend: records of
    ``tp`` from ``sequence`` on may be lost or duplicated if the producer went on."""

    def __init__(self, tp: TopicPartition, sequence: int, error_name: str, detail: str | None = None):
        super().__init__(f"Produce for {tp}: {error_name} at sequence {sequence}"
                         + (f": {detail}" if detail else "") + "; the producer stops")
        self.tp, self.sequence, self.error_name, self.detail = tp, sequence, error_name, detail


@dataclass(eq=False, slots=True)
class Enqueued:
    """One enqueued batch, held by the producer until the destination writes it, and then
    handed back by :meth:`IdempotentProducer.take_acks` with :attr:`base_offset` set. One
    object serves both roles: a mirror makes one per forwarded batch (slots, not frozen:
    cheaper to build)."""

    part: _Partition
    """Its partition's own state, found without a lookup when its answer comes."""
    data: bytearray | memoryview
    sequence: int
    token: Any
    """Whatever the caller passed to :meth:`IdempotentProducer.enqueue`."""
    base_offset: int = -1
    """Once acknowledged, its first offset at the destination; -1 also when a retry found it
    already written (DUPLICATE_SEQUENCE_NUMBER) and the broker did not say where."""

    @property
    def tp(self) -> TopicPartition:
        return self.part.tp


@dataclass(eq=False)
class _Partition:
    """One destination partition's batches: waiting, in flight (in sequence order), failed."""

    tp: TopicPartition
    next_sequence: int = 0
    pending: deque[Enqueued] = field(default_factory=deque)
    in_flight: deque[Enqueued] = field(default_factory=deque)
    failed: list[Enqueued] = field(default_factory=list)
    connection: PipelinedConnection | None = None
    backoff: Backoff = field(default_factory=Backoff)
    known: bool = False
    """The destination acknowledged a batch of this producer id here, so it holds our sequence
    state and refuses a batch out of order (see the module's docstring)."""

    def sendable(self, now: float) -> bool:
        limit = MAX_IN_FLIGHT if self.known else 1
        return bool(self.pending) and not self.failed and self.backoff.ready(now) and len(self.in_flight) < limit


class IdempotentProducer:
    """Writes ready-made v2 batches to one cluster, idempotently, with pipelined requests."""

    def __init__(self, client: KafkaClient, *, max_in_flight: int = MAX_IN_FLIGHT, timeout_ms: int = 30_000,
                 clock: Callable[[], float] = time.monotonic, identity: tuple[int, int] | None = None,
                 transactional_id: str | None = None):
        """``identity`` is the producer id and epoch to stamp (default: a new one from
        InitProducerId); with ``transactional_id``, batches carry the transactional bit and
        requests the id (:class:`~mirror.kafka.transactional_producer.TransactionalProducer`)."""
        if not 1 <= max_in_flight <= MAX_IN_FLIGHT:
            raise ValueError(f"max_in_flight must be from 1 to {MAX_IN_FLIGHT} for an idempotent producer, not {max_in_flight}")
        self._client = client
        self._max_in_flight = max_in_flight
        self._timeout_ms = timeout_ms
        self._clock = clock
        self._partitions: dict[TopicPartition, _Partition] = {}
        self._queued: dict[TopicPartition, _Partition] = {}
        """Partitions with batches not yet sent (and some with none left, dropped at the next
        :meth:`send_ready`): what a turn looks at, not every partition ever written to (a
        copier of 10,000 partitions walked them all twice a turn)."""
        self._connections: dict[str, PipelinedConnection] = {}
        self._acks: list[Enqueued] = []
        self._buffered = 0
        self.transactional_id = transactional_id
        self.on_send: Callable[[list], None] | None = None
        """Called with the tokens of each Produce request's batches as it goes out (a latency
        trace's hook; None: nothing called)."""
        self.producer_id, self.epoch = identity if identity is not None else client.init_producer_id()
        self.failed: KMirrorError | None = None
        log.debug("idempotent producer %d epoch %d for %s", self.producer_id, self.epoch, client.bootstrap)

    # ---- the caller's side ------------------------------------------------------------------

    @property
    def buffered_bytes(self) -> int:
        """Bytes of batches enqueued and not yet acknowledged."""
        return self._buffered

    @property
    def idle(self) -> bool:
        """Nothing waiting, nothing in flight."""
        return self._buffered == 0

    def enqueue(self, tp: TopicPartition, data: bytearray | memoryview, records: int, token: Any = None) -> None:
        """Take one v2 batch of ``records`` records for ``tp``, made in place what a Kafka
        producer sends: our producer state, base offset 0 and no leader epoch (the broker
        assigns both, KIP-31), CreateTime and no delete horizon (a broker stamps
        LogAppendTime where its topic asks; the horizon is for a log cleaner to set). The
        buffer must stay untouched until :meth:`take_acks` hands it back."""
        self._check_usable()
        part = self._partitions.get(tp)
        if part is None:
            part = self._partitions[tp] = _Partition(tp)
        kcodecs.stamp_v2(data, base_offset=0, partition_leader_epoch=kcodecs.NO_PARTITION_LEADER_EPOCH,
                         clear_delete_horizon=True, producer_state=(self.producer_id, self.epoch, part.next_sequence),
                         transactional=self.transactional_id is not None)
        part.pending.append(Enqueued(part, data, part.next_sequence, token))
        self._queued[tp] = part
        part.next_sequence = (part.next_sequence + records) % _SEQUENCE_SPAN
        self._buffered += len(data)

    def _restart_sequences(self) -> None:
        """Every partition's next batch starts at sequence 0 (a new epoch, KIP-98); only when idle."""
        for part in self._partitions.values():
            part.next_sequence = 0

    def queued(self, tp: TopicPartition) -> int:
        """Batches of ``tp`` enqueued and not yet sent: they wait for a place among its requests
        in flight, or for a backoff to end."""
        part = self._partitions.get(tp)
        return 0 if part is None else len(part.pending) + len(part.failed)

    def take_acks(self) -> list[Enqueued]:
        """Acknowledgements since the last call, in the order they came."""
        acks, self._acks = self._acks, []
        return acks

    def connections(self) -> list[PipelinedConnection]:
        """Connections with answers owed, for the caller's :func:`wait_readable`."""
        return [conn for conn in self._connections.values() if conn.in_flight]

    def owns(self, conn: PipelinedConnection) -> bool:
        return self._connections.get(conn.address) is conn

    def next_deadline(self) -> float | None:
        """When a backoff ends or a request times out, whichever is first (None: nothing pending)."""
        times = [p.backoff.retry_at for p in self._queued.values() if p.pending and not p.in_flight]
        times += [sent + self._timeout_ms / 1000 for conn in self._connections.values()
                  if (sent := conn.oldest_sent_at()) is not None]
        return min(times, default=None)

    def flush(self) -> None:
        """Send everything enqueued and wait until all of it is acknowledged (or raise)."""
        while not self.idle:
            self.poll(0.1)

    def poll(self, timeout_s: float) -> None:
        """Send what can go, then handle the answers that arrive within ``timeout_s``."""
        self.send_ready()
        deadline = self.next_deadline()
        if deadline is not None:
            timeout_s = max(0.0, min(timeout_s, deadline - self._clock()))
        for conn in wait_readable(self.connections(), timeout_s):
            self.on_readable(conn)

    def abort(self, cause: BaseException) -> None:
        """Give up on everything not yet acknowledged (its caller failed); the producer is unusable after."""
        if self.failed is None:
            self._fatal(KMirrorError(f"aborted: {cause!r}"))

    def close(self) -> None:
        for conn in self._connections.values():
            conn.abandon()
        self._connections.clear()

    # ---- sending ------------------------------------------------------------------------------

    def send_ready(self) -> None:
        """Send requests for every partition that has a batch due, up to the in-flight limits."""
        self._check_usable()
        now = self._clock()
        self._expire(now)
        for tp in [tp for tp, part in self._queued.items() if not part.pending]:
            del self._queued[tp]
        due = [part for part in self._queued.values() if part.sendable(now)]
        if not due:
            return
        try:
            routes = self._client.leaders([part.tp for part in due])
        except KMirrorError as exc:
            self._unroutable(due, exc, now)
            return
        for address, tps in routes.items():
            parts = [self._partitions[tp] for tp in tps]
            conn = self._connection(address, parts, now)
            while conn is not None and conn.can_send():
                batches = [batch for part in parts if (batch := self._take(part, conn, now)) is not None]
                if not batches:
                    break
                self._send(conn, batches)

    def _take(self, part: _Partition, conn: PipelinedConnection, now: float) -> Enqueued | None:
        """The partition's next batch for ``conn``; none while its earlier batches are in
        flight on another connection (a moved leader), so order holds across the move."""
        if not part.sendable(now) or (part.in_flight and part.connection is not conn):
            return None
        batch = part.pending.popleft()
        part.in_flight.append(batch)
        part.connection = conn
        return batch

    def _send(self, conn: PipelinedConnection, batches: list[Enqueued]) -> None:
        partitions = [ProducePartition(b.part.tp.topic, b.part.tp.partition, b.data) for b in batches]

        def encode(correlation_id: int, version: int):
            return encode_produce_request(partitions, version=version, correlation_id=correlation_id,
                                          client_id=conn.broker.conn.client_id, acks=-1, timeout_ms=self._timeout_ms,
                                          transactional_id=self.transactional_id)

        try:
            conn.send_encoded(ProduceRequest, encode, batches)
            if self.on_send is not None:
                self.on_send([batch.token for batch in batches])
        except (ConnectionFailedError, ProtocolError) as exc:
            # Sent in part or not at all: this request's batches and every earlier one are in doubt.
            self._connection_lost(conn, exc, extra=batches)
        except BrokerApiError as exc:  # no Produce version both sides speak
            raise self._fatal(exc)

    def _connection(self, address: str, parts: list[_Partition], now: float) -> PipelinedConnection | None:
        conn = self._connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        try:
            conn = self._connections[address] = PipelinedConnection(self._client.connect(address), self._max_in_flight,
                                                                    clock=self._clock)
        except KMirrorError as exc:
            self._client.forget_leaders(part.tp for part in parts)
            self._unroutable(parts, exc, now)
            return None
        return conn

    def _unroutable(self, parts: list[_Partition], exc: KMirrorError, now: float) -> None:
        """No leader for some partition (metadata lags a move or a new topic): all wait."""
        if not is_retriable(exc):
            raise self._fatal(exc)
        for part in parts:
            self._retry_later(part.backoff, exc, now, f"produce to {part.tp}")

    # ---- answers ------------------------------------------------------------------------------

    def on_readable(self, conn: PipelinedConnection) -> None:
        """Read and handle the oldest answer on ``conn``."""
        try:
            pending, body = conn.receive(ProduceResponse)
            response = decode_plain_produce_response(body, pending.version)
            if response is None:
                response = _from_kafka_python(ProduceResponse.decode(body, version=pending.version))
        except (ConnectionFailedError, ProtocolError) as exc:
            self._connection_lost(conn, exc)
            return
        except Exception as exc:  # kafka-python raises assorted errors on bad bytes
            self._connection_lost(conn, ProtocolError(f"{conn.address}: undecodable ProduceResponse: {exc!r}"))
            return
        answers = {(part.topic, part.partition): part for part in response.partitions}
        now = self._clock()
        for batch in pending.context:
            tp = batch.part.tp
            answer = answers.get((tp.topic, tp.partition))
            if answer is None:
                self._fail(batch, ProtocolError(f"{conn.address}: Produce response without {batch.tp}"), now)
            else:
                self._answer(batch, answer.error_code, answer.base_offset, answer.error_message, now)

    def _answer(self, batch: Enqueued, code: int, base_offset: int, message: str | None, now: float) -> None:
        part = batch.part
        if code == 0 or code == kerr.DuplicateSequenceNumberError.errno:
            self._acked(part, batch, base_offset if code == 0 else -1)
            return
        error = BrokerApiError.from_code("Produce", code, batch.tp, detail=message)
        if code == kerr.OutOfOrderSequenceNumberError.errno and part.failed:
            self._fail(batch, error, now)  # the gap is an earlier batch of ours that failed; resent with it
        elif code in (kerr.ProducerFencedError.errno, kerr.InvalidProducerEpochError.errno):
            raise self._fatal(ProducerFencedError("Produce", error.error_name, code, False, batch.tp, detail=message))
        elif code in (kerr.OutOfOrderSequenceNumberError.errno, kerr.UnknownProducerIdError.errno):
            raise self._fatal(ProducerSequenceError(batch.tp, batch.sequence, error.error_name, message))
        elif error.retriable:
            if kerr.for_code(code).invalid_metadata:
                self._client.forget_leaders([batch.tp])
            self._fail(batch, error, now)
        else:
            raise self._fatal(error)

    def _acked(self, part: _Partition, batch: Enqueued, base_offset: int) -> None:
        # An earlier batch may have failed after all while this one succeeded (a timeout after
        # the write): the broker took this one in sequence, so that one was written first, and
        # resending it is answered as a duplicate.
        part.in_flight.remove(batch)
        part.known = True
        part.backoff.succeeded()
        self._buffered -= len(batch.data)
        batch.base_offset = base_offset
        self._acks.append(batch)
        if part.failed and not part.in_flight:
            self._requeue_failed(part)  # the failed ones waited for this answer only

    def _fail(self, batch: Enqueued, error: KMirrorError, now: float) -> None:
        """A retriable failure: once nothing of the partition is in flight, resend its failed
        batches first, in sequence order, after a backoff."""
        part = batch.part
        part.in_flight.remove(batch)
        part.failed.append(batch)
        if part.in_flight:
            return
        resent, first = len(part.failed), part.failed[0].sequence
        self._requeue_failed(part)
        self._retry_later(part.backoff, error, now, f"produce to {part.tp}")
        log.debug("produce to %s failed (%s); resending %d batch(es) from sequence %d in %.2f s", part.tp, error,
                  resent, first, max(0.0, part.backoff.retry_at - now))

    def _requeue_failed(self, part: _Partition) -> None:
        """The partition's failed batches go first again, once nothing of it is in flight. In
        sequence order already: a partition's batches are in flight on one connection at a
        time, and its answers (or their loss) come in the order the requests went."""
        part.pending.extendleft(reversed(part.failed))
        part.failed.clear()
        self._queued[part.tp] = part

    def _connection_lost(self, conn: PipelinedConnection, error: KMirrorError, extra: Iterable[Enqueued] = ()) -> None:
        """Every request in flight on ``conn`` is in doubt: retry all of their batches."""
        lost = [batch for pending in conn.abandon() for batch in pending.context]
        lost += list(extra)
        self._connections.pop(conn.address, None)
        self._client.forget_leaders({batch.tp for batch in lost})
        now = self._clock()
        for batch in lost:
            self._fail(batch, error, now)

    def _expire(self, now: float) -> None:
        """A request unanswered for ``timeout_ms`` counts as lost, with its connection."""
        limit = self._timeout_ms / 1000
        for conn in list(self._connections.values()):
            if conn.overdue(now, limit):
                self._connection_lost(conn, ConnectionFailedError(conn.address, f"no answer to a produce request in {limit:g} s"))

    # ---- failure --------------------------------------------------------------------------------

    def _retry_later(self, backoff: Backoff, error: KMirrorError, now: float, what: str) -> None:
        try:
            backoff.failed(error, self._client.retry, now, bootstrap=self._client.bootstrap, what=what)
        except KMirrorError as exc:
            raise self._fatal(exc) from None

    def _fatal(self, error: KMirrorError) -> KMirrorError:
        """Mark the producer unusable and return ``error`` for raising."""
        self.failed = error
        self.close()
        return error

    def _check_usable(self) -> None:
        if self.failed is not None:
            raise KMirrorError(f"the producer stopped after an earlier error: {self.failed}")


def _from_kafka_python(response) -> ProduceResponseData:
    """kafka-python's decoding of a Produce response that is not plain (record errors, error
    messages, tagged fields, classic versions) in the shape :func:`decode_plain_produce_response` gives."""
    return ProduceResponseData([
        ProducedPartition(topic.name, part.index, part.error_code, part.base_offset,
                          getattr(part, "log_append_time_ms", -1), getattr(part, "log_start_offset", -1),
                          getattr(part, "error_message", None))
        for topic in response.responses for part in topic.partition_responses],
        response.throttle_time_ms)
