"""The mirror's client for one cluster: metadata, leader routing, raw fetch and raw produce.

Record sets go in and out as the bytes the broker stores (magic 2 only: Fetch v4+, Produce
v3+); parsing them is kcodecs' job. Requests are kafka-python's schemas, framed by
:class:`KafkaConnection`, one connection per broker, opened lazily and reopened after a
failure. Each connection negotiates API versions once (:mod:`.broker_connection`).

Failures are retried with tenacity (bounded exponential backoff, :class:`RetryPolicy`):
broken or refused connections and the error codes Kafka calls retriable. Leader errors
(``invalid_metadata`` in kafka.errors, InvalidMetadataException in Kafka) drop the cached
leaders, so the next attempt routes with fresh metadata. Everything else raises at once.

Produce keeps at most one request in flight per partition, as Kafka's producer does with
``max.in.flight.requests.per.connection=1``, so a retry can never reorder a partition. It
is not idempotent: a batch whose acknowledgement was lost is sent again (at-least-once).

Not thread-safe: use one client per thread.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence, TypeVar
from uuid import UUID

import kafka.errors as kerr
import tenacity
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from kcodecs import KMirrorError

from .broker_connection import BrokerConnection, Sent
from .connection import ConnectionFailedError, ProtocolError
from .errors import BrokerApiError, ClusterUnreachableError, OffsetOutOfRangeError, UnknownTopicError
from .security import PLAINTEXT, Security, client_context
from .topic_creation import create_topics
from .types import FetchedData, NewTopic, TopicListing, TopicPartition

__all__ = ["KafkaClient", "RetryPolicy", "is_retriable", "READ_UNCOMMITTED", "READ_COMMITTED"]

log = logging.getLogger(__name__)

T = TypeVar("T")
Batch = bytes | bytearray | memoryview

_TIMESTAMPS = {"earliest": -2, "latest": -1}  # ListOffsets' EARLIEST_TIMESTAMP and LATEST_TIMESTAMP
READ_UNCOMMITTED = 0
"""Kafka's ``IsolationLevel``: read up to the high watermark, transactions open or aborted included."""
READ_COMMITTED = 1
"""Read up to the last stable offset, where a Fetch also lists the aborted transactions (KIP-98)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Tries per operation, with exponential backoff ``initial * 2**n`` capped at ``max``."""

    attempts: int = 8
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 5.0


class KafkaClient:
    """A blocking client for one cluster: metadata, leader routing, raw fetch and produce."""

    def __init__(self, bootstrap: str | Sequence[str], *, client_id: str = "kmirror",
                 request_timeout_s: float = 30.0, retry: RetryPolicy = RetryPolicy(),
                 security: Security = PLAINTEXT) -> None:
        parts = bootstrap.split(",") if isinstance(bootstrap, str) else bootstrap
        self._bootstrap = [address.strip() for address in parts if address.strip()]
        if not self._bootstrap:
            raise ValueError(f"no bootstrap address in {bootstrap!r}")
        self.bootstrap = ",".join(self._bootstrap)
        self._client_id = client_id
        self._timeout_s = request_timeout_s
        self._timeout_ms = int(request_timeout_s * 1000)
        self._retry = retry
        self._sasl = security.sasl
        self._tls = client_context(security.tls) if security.tls is not None else None  # one per client: files read once
        self._brokers: dict[str, BrokerConnection] = {}  # open connections by address
        self._nodes: dict[int, str] = {}  # node id -> address, from Metadata
        self._leaders: dict[TopicPartition, int] = {}
        self._partition_counts: dict[str, int] = {}
        self._topic_ids: dict[str, UUID] = {}
        """Each topic's id as the last metadata that listed it gave it (Metadata v10+, KIP-516)."""
        self._cluster_id: str | None = None

    # ---- public API -------------------------------------------------------------------------

    def topics(self) -> dict[str, int]:
        """Topic name -> partition count, from fresh metadata; internal topics left out."""
        return {name: listing.partitions for name, listing in self.listings().items()}

    def listings(self) -> dict[str, TopicListing]:
        """Topic name -> its partition count and id, from fresh metadata; internal topics left out."""
        response = self.retrying("list topics", lambda: self._refresh(None))
        return {t.name: TopicListing(len(t.partitions), _topic_id(t)) for t in response.topics
                if t.error_code == 0 and not t.is_internal}

    def list_offsets(self, partitions: Iterable[TopicPartition], which: Literal["earliest", "latest"] | int, *,
                     isolation_level: int = READ_UNCOMMITTED) -> dict[TopicPartition, int]:
        """The log start (earliest) or log end (latest) of each partition. The log end is the high
        watermark under :data:`READ_UNCOMMITTED` and the last stable offset under
        :data:`READ_COMMITTED`: where a read_committed fetch stops while a transaction is open
        (ListOffsets v2+; older brokers have no transactions, their two ends are one).

        ``which`` may also be a time, in milliseconds since the epoch: the offset of each
        partition's first record stamped at or after it (the broker's time index, seed 001),
        or the log end where no record is that recent, as Kafka's consumer ``offsetsForTimes``
        then ``seekToEnd`` would."""
        if isinstance(which, bool) or not (which in _TIMESTAMPS or (isinstance(which, int) and which >= 0)):
            raise ValueError(f"which must be 'earliest', 'latest' or a time in ms since the epoch, not {which!r}")
        timestamp = _TIMESTAMPS[which] if isinstance(which, str) else which
        wanted = list(dict.fromkeys(partitions))
        found: dict[TopicPartition, int] = {}

        def attempt() -> None:
            routes = self._route([tp for tp in wanted if tp not in found])
            requests = {address: _list_offsets_request(tps, timestamp, isolation_level, self._timeout_ms)
                        for address, tps in routes.items()}
            errors: list[KMirrorError] = []
            for address, response in self._scatter(requests).items():
                if isinstance(response, KMirrorError):
                    errors.append(self._lost(response, routes[address]))
                    continue
                for topic in response.topics:
                    for part in topic.partitions:
                        tp = TopicPartition(topic.name, part.partition_index)
                        if part.error_code:
                            errors.append(self._partition_error("ListOffsets", tp, part.error_code))
                        else:
                            found[tp] = part.offset
            _raise_first(errors)
            _check_answered("ListOffsets", routes, found)

        if wanted:
            self.retrying(f"list {which} offsets", attempt)
        past_the_end = [tp for tp in wanted if found[tp] < 0]  # by time: no record that recent
        if past_the_end:
            found.update(self.list_offsets(past_the_end, "latest", isolation_level=isolation_level))
        return {tp: found[tp] for tp in wanted}

    def fetch(self, tp: TopicPartition, offset: int, *, max_bytes: int, max_wait_ms: int = 100,
              isolation_level: int = READ_UNCOMMITTED) -> FetchedData:
        """Up to ``max_bytes`` of ``tp`` from ``offset``, raw (KIP-74: at least one whole batch).
        At the log end the broker holds the request up to ``max_wait_ms``, then answers empty.
        Under :data:`READ_COMMITTED` the data ends at the last stable offset and comes with the
        aborted transactions it overlaps."""
        request = _fetch_request(tp, offset, max_bytes, max_wait_ms, isolation_level)

        def attempt() -> FetchedData:
            (address,) = self._route([tp])
            (response,) = self._scatter({address: request}).values()
            if isinstance(response, KMirrorError):
                raise self._lost(response, [tp])
            if response.error_code:  # v7+: request-level errors (fetch sessions)
                raise BrokerApiError.from_code("Fetch", response.error_code, tp)
            part = _only_partition(response.responses, tp, address)
            if part.error_code == kerr.OffsetOutOfRangeError.errno:
                raise OffsetOutOfRangeError(tp, offset, log_start_offset=part.log_start_offset,
                                            high_watermark=part.high_watermark)
            if part.error_code:
                raise self._partition_error("Fetch", tp, part.error_code)
            return FetchedData(part.records or b"", part.high_watermark, part.log_start_offset,
                               part.last_stable_offset,
                               tuple((a.producer_id, a.first_offset) for a in part.aborted_transactions or ()))

        return self.retrying(f"fetch {tp} at offset {offset}", attempt)

    def produce(self, batches: Sequence[tuple[TopicPartition, Batch]], *, acks: int = -1,
                timeout_ms: int = 30_000) -> list[int]:
        """Append each batch to its partition; return the base offsets, in input order.

        A plain producer, not an idempotent one: the batches go out as they are (no producer id,
        no sequence numbers), so a retry after a response was lost can write a batch twice. That
        is fine for what this serves: small writes where a duplicate does no harm, namely the
        demo's source data (:mod:`mirror.demo.fill`), tests that put records on a topic, and the
        provenance record (:mod:`mirror.engine.provenance`: a compacted topic keyed by topic
        name, where a second copy of a record says the same thing). It is not the data plane's
        producer: the copy must neither duplicate nor reorder a partition across retries, and it
        keeps several requests in flight per broker. That is
        :class:`~mirror.kafka.producer.IdempotentProducer`, and for exactly-once
        :class:`~mirror.kafka.transactional_producer.TransactionalProducer`.

        Each round sends the oldest unsent batch of every partition, one request per leader, all
        leaders at once. A partition that fails keeps its batch at the head of its queue, so its
        order survives the retry. With ``acks=0`` the broker does not answer and the offsets are -1.
        """
        queues: dict[TopicPartition, deque[int]] = {}
        for index, (tp, _data) in enumerate(batches):
            queues.setdefault(tp, deque()).append(index)
        offsets = [-1] * len(batches)

        def round_() -> None:
            routes = self._route(list(queues))
            requests = {address: _produce_request({tp: batches[queues[tp][0]][1] for tp in tps}, acks, timeout_ms)
                        for address, tps in routes.items()}
            if acks == 0:
                self._send_only(requests)
                for tp in list(queues):
                    _pop_head(queues, tp)
                return
            sent = {tp for tps in routes.values() for tp in tps}
            done: dict[TopicPartition, int] = {}
            errors: list[KMirrorError] = []
            for address, response in self._scatter(requests).items():
                if isinstance(response, KMirrorError):
                    errors.append(self._lost(response, routes[address]))
                    continue
                for topic in response.responses:
                    for part in topic.partition_responses:
                        tp = TopicPartition(topic.name, part.index)
                        if part.error_code:
                            errors.append(self._partition_error("Produce", tp, part.error_code, part.error_message))
                        elif tp in sent and tp not in done:
                            done[tp] = offsets[_pop_head(queues, tp)] = part.base_offset
            _raise_first(errors)
            _check_answered("Produce", routes, done)

        while queues:
            self.retrying("produce", round_)
        return offsets

    def create_topics(self, topics: Sequence[NewTopic]) -> set[str]:
        """Create the topics (an existing one is fine), in requests the controller accepts, and
        wait until metadata shows their leaders; the names that existed already. Raises
        :class:`~.topic_creation.TopicCreationError` naming every topic that could not be made
        (:mod:`.topic_creation`)."""
        return create_topics(self, topics)

    def led_topics(self, names: Sequence[str]) -> set[str]:
        """Those of ``names`` whose every partition has a leader, from fresh metadata."""
        response = self._refresh(list(names))
        return {t.name for t in response.topics if t.error_code == 0 and t.partitions
                and all(p.leader_id >= 0 for p in t.partitions)}

    def cluster_id(self) -> str:
        """The cluster's ``cluster.id`` (Metadata v2+): the same whichever address reaches it."""
        if self._cluster_id is None:
            self.retrying("describe cluster", lambda: self._refresh([]))
        if not self._cluster_id:
            raise ProtocolError(f"{self.bootstrap}: the cluster did not say its id (Metadata older than v2)")
        return self._cluster_id

    def brokers(self) -> dict[int, str]:
        """Node id -> address of every broker, from fresh metadata."""
        self.retrying("list brokers", lambda: self._refresh([]))
        return dict(self._nodes)

    def known_brokers(self) -> frozenset[str]:
        """The addresses of the cluster's brokers as far as this client knows them, asking none
        (an error's broker address tells which cluster failed, even while it is down)."""
        return frozenset(self._bootstrap) | frozenset(self._nodes.values())

    def init_producer_id(self) -> tuple[int, int]:
        """A new producer id and epoch for an idempotent producer (KIP-98; no transactional id)."""
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
                                        producer_epoch=-1)

        def attempt() -> tuple[int, int]:
            response = self._call_any(request)
            if response.error_code:
                raise BrokerApiError.from_code("InitProducerId", response.error_code)
            return response.producer_id, response.producer_epoch

        return self.retrying("init producer id", attempt)

    # ---- for the data plane (mirror.kafka.producer, mirror.kafka.fetcher) --------------------

    def leaders(self, partitions: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
        """The partitions grouped by their leader's address, from cached metadata (refreshed
        for partitions whose leader is unknown). Raises a retriable :class:`BrokerApiError`
        for a partition without a leader, :class:`UnknownTopicError` for an unknown topic."""
        return self._route(list(partitions))

    def fresh_topic_id(self, topic: str) -> UUID | None:
        """``topic``'s id as fresh metadata lists it; None where metadata does not list the topic
        (deleted), or gives no ids."""
        response = self.retrying(f"look up topic {topic}", lambda: self._refresh([topic]))
        listed = [t for t in response.topics if t.name == topic and t.error_code == 0]
        return _topic_id(listed[0]) if listed else None

    def topic_id(self, topic: str) -> UUID | None:
        """``topic``'s id as the last metadata that listed it gave it (metadata is read for a
        topic's first :meth:`leaders`); None from a cluster without ids, or before any listing."""
        return self._topic_ids.get(topic)

    def forget_leaders(self, partitions: Iterable[TopicPartition]) -> None:
        """Drop cached leaders (after NOT_LEADER or a lost connection): the next
        :meth:`leaders` reads fresh metadata, as Kafka's NetworkClient does on such errors."""
        for tp in partitions:
            self._leaders.pop(tp, None)

    def connect(self, address: str) -> BrokerConnection:
        """A new connection of the caller's own, versions negotiated; pipelined traffic needs
        one that no other request shares, since responses come back in request order."""
        return BrokerConnection(address, client_id=self._client_id, timeout_s=self._timeout_s, tls=self._tls,
                                sasl=self._sasl)

    def feature_level(self, name: str) -> int:
        """The cluster's finalized level of feature ``name`` (KIP-584: ``transaction.version``,
        ...), as the first broker that answers says it; 0 where none is finalized (brokers
        before Kafka 3.x's features, or a feature they do not have)."""
        if not self._brokers:
            self.retrying("read the cluster's features", lambda: self._refresh([]))
        return next(iter(self._brokers.values())).features.get(name, 0)

    def call(self, request, *, address: str | None = None):
        """One request, not retried: to ``address``, or to any broker that answers; its response,
        or the :class:`KMirrorError` it failed with (for callers with retry rules of their own,
        such as the transaction coordinator's)."""
        if address is None:
            return self._call_any(request)
        (response,) = self._scatter({address: request}).values()
        if isinstance(response, KMirrorError):
            raise response
        return response

    @property
    def retry(self) -> RetryPolicy:
        return self._retry

    @property
    def request_timeout_s(self) -> float:
        return self._timeout_s

    def close(self) -> None:
        for broker in self._brokers.values():
            broker.close()
        self._brokers.clear()

    def __enter__(self) -> "KafkaClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- retries ----------------------------------------------------------------------------

    def retrying(self, operation: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` under the retry policy; connection failures that outlast it become
        :class:`ClusterUnreachableError`. Public: the admin, ACL, group and transaction calls
        built on this client retry their own requests through it."""
        policy = self._retry

        def note(state: tenacity.RetryCallState) -> None:
            # DEBUG: a retry that works is routine, and one that runs out raises; the job logs
            # an outage it waits out itself, one line per step (mirror.spark.outage).
            log.debug("%s: attempt %d of %d failed, retrying in %.2f s: %s", operation, state.attempt_number,
                      policy.attempts, state.upcoming_sleep, state.outcome and state.outcome.exception())

        retrier = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(policy.attempts),
            wait=tenacity.wait_exponential(multiplier=policy.initial_backoff_s, max=policy.max_backoff_s),
            retry=tenacity.retry_if_exception(is_retriable),
            before_sleep=note,
            reraise=True,
        )
        try:
            return retrier(attempt)
        except ConnectionFailedError as exc:
            raise ClusterUnreachableError(self.bootstrap, f"{operation}: {exc}") from exc
        except BrokerApiError as exc:
            if exc.cluster is None:
                exc.cluster = self.bootstrap
            raise

    # ---- metadata and routing ---------------------------------------------------------------

    def _refresh(self, topics: list[str] | None):
        """Metadata for ``topics`` (None: all of them); updates brokers, controller and leaders."""
        names = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
        response = self._call_any(MetadataRequest(topics=names, allow_auto_topic_creation=False,
                                                  include_topic_authorized_operations=False))
        self._nodes = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
        self._cluster_id = getattr(response, "cluster_id", None) or self._cluster_id
        answered = {topic.name for topic in response.topics}
        self._leaders = {tp: node for tp, node in self._leaders.items() if tp.topic not in answered and node in self._nodes}
        for topic in response.topics:
            if topic.error_code:
                self._partition_counts.pop(topic.name, None)
                continue
            self._partition_counts[topic.name] = len(topic.partitions)
            topic_id = _topic_id(topic)
            if topic_id is not None:
                self._topic_ids[topic.name] = topic_id
            for part in topic.partitions:
                if part.leader_id >= 0 and part.leader_id in self._nodes:
                    self._leaders[TopicPartition(topic.name, part.partition_index)] = part.leader_id
        return response

    def _route(self, partitions: list[TopicPartition]) -> dict[str, list[TopicPartition]]:
        """Group partitions by their leader's address, refreshing metadata for unknown leaders."""
        missing = sorted({tp.topic for tp in partitions if tp not in self._leaders})
        if missing:
            self._refresh(missing)
        routes: dict[str, list[TopicPartition]] = defaultdict(list)
        for tp in partitions:
            node = self._leaders.get(tp)
            if node is None:
                if tp.topic not in self._partition_counts:
                    raise UnknownTopicError(tp.topic)
                code = (kerr.UnknownTopicOrPartitionError if tp.partition >= self._partition_counts[tp.topic]
                        else kerr.LeaderNotAvailableError).errno
                raise BrokerApiError.from_code("Metadata", code, tp)
            routes[self._nodes[node]].append(tp)
        return routes

    def _partition_error(self, api: str, tp: TopicPartition, code: int, detail: str | None = None) -> BrokerApiError:
        """The error for one partition's error code; a leader error also drops its cached leader."""
        if kerr.for_code(code).invalid_metadata:
            self._leaders.pop(tp, None)
        return BrokerApiError.from_code(api, code, tp, detail=detail)

    def _lost(self, error: KMirrorError, partitions: list[TopicPartition]) -> KMirrorError:
        """A request that got no response: its leader may have moved, so forget the partitions'
        leaders (Kafka's NetworkClient requests a metadata update on disconnect)."""
        for tp in partitions:
            self._leaders.pop(tp, None)
        return error

    # ---- connections ------------------------------------------------------------------------

    def _broker(self, address: str) -> BrokerConnection:
        broker = self._brokers.get(address)
        if broker is None:
            broker = self._brokers[address] = self.connect(address)
        return broker

    def _drop(self, address: str) -> None:
        broker = self._brokers.pop(address, None)
        if broker is not None:
            broker.close()

    def _call_any(self, request, *, prefer: str | None = None):
        """``request`` to the first broker that answers: ``prefer``, open connections, known
        brokers, then the bootstrap list."""
        addresses = list(dict.fromkeys(a for a in (prefer, *self._brokers, *self._nodes.values(), *self._bootstrap) if a))
        for address in addresses:  # never empty: the bootstrap list is not
            (response,) = self._scatter({address: request}).values()
            if not isinstance(response, ConnectionFailedError) or address == addresses[-1]:
                break
        if isinstance(response, KMirrorError):
            raise response
        return response

    def _scatter(self, requests: dict[str, Any]) -> dict[str, Any]:
        """Send every request, then read every response, so brokers work on them in parallel.
        A request that fails gets its error in place of a response (never raised here, so no
        connection is left with an unread response); a broken connection is dropped."""
        sent: dict[str, tuple[BrokerConnection, Sent]] = {}
        results: dict[str, Any] = {}
        try:
            for address, request in requests.items():
                try:
                    broker = self._broker(address)
                    sent[address] = (broker, broker.send(request))
                except KMirrorError as exc:
                    results[address] = self._failed(address, exc)
            for address, (broker, pending) in sent.items():
                try:
                    results[address] = broker.receive(pending)
                except KMirrorError as exc:
                    results[address] = self._failed(address, exc)
        except BaseException:  # a bad argument kafka-python cannot encode, or an interrupt
            for address in sent.keys() - results.keys():
                self._drop(address)  # its response would answer the next request
            raise
        return results

    def _send_only(self, requests: dict[str, Any]) -> None:
        """Requests with no response (Produce with acks=0)."""
        for address, request in requests.items():
            try:
                self._broker(address).send(request)
            except KMirrorError as exc:
                raise self._failed(address, exc)

    def _failed(self, address: str, error: KMirrorError) -> KMirrorError:
        if isinstance(error, (ConnectionFailedError, ProtocolError)):
            self._drop(address)
        return error


# ---- requests ---------------------------------------------------------------------------------


def _produce_request(batches: dict[TopicPartition, Batch], acks: int, timeout_ms: int) -> ProduceRequest:
    by_topic: dict[str, list] = defaultdict(list)
    for tp, data in batches.items():
        by_topic[tp.topic].append(ProduceRequest.TopicProduceData.PartitionProduceData(index=tp.partition, records=data))
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=parts) for topic, parts in by_topic.items()])


def _fetch_request(tp: TopicPartition, offset: int, max_bytes: int, max_wait_ms: int,
                   isolation_level: int) -> FetchRequest:
    # A full fetch every time: session id 0, epoch -1 (no KIP-227 fetch session).
    partition = FetchRequest.FetchTopic.FetchPartition(partition=tp.partition, fetch_offset=offset,
                                                       log_start_offset=-1, partition_max_bytes=max_bytes)
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=max_bytes,
                        isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id="",
                        forgotten_topics_data=[],
                        topics=[FetchRequest.FetchTopic(topic=tp.topic, partitions=[partition])])


def _list_offsets_request(partitions: list[TopicPartition], timestamp: int, isolation_level: int,
                          timeout_ms: int) -> ListOffsetsRequest:
    topic_class = ListOffsetsRequest.ListOffsetsTopic
    by_topic: dict[str, list] = defaultdict(list)
    for tp in partitions:
        by_topic[tp.topic].append(topic_class.ListOffsetsPartition(partition_index=tp.partition, timestamp=timestamp,
                                                                   current_leader_epoch=-1))
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, timeout_ms=timeout_ms,
                              topics=[topic_class(name=topic, partitions=parts) for topic, parts in by_topic.items()])


# ---- helpers ----------------------------------------------------------------------------------


def _topic_id(topic) -> UUID | None:
    """A Metadata topic's id; None before v10, and for the zero id a cluster without ids sends."""
    topic_id = getattr(topic, "topic_id", None)
    return topic_id if topic_id is not None and topic_id.int else None


def is_retriable(exc: BaseException) -> bool:
    """Worth another try: a broken or refused connection, or an error code Kafka calls retriable."""
    if isinstance(exc, ConnectionFailedError):
        return True
    return isinstance(exc, BrokerApiError) and exc.retriable


def _raise_first(errors: list[KMirrorError]) -> None:
    """Raise a non-retriable error if there is one (no point retrying the rest), else the first."""
    if errors:
        raise next((e for e in errors if not is_retriable(e)), errors[0])


def _pop_head(queues: dict[TopicPartition, deque[int]], tp: TopicPartition) -> int:
    index = queues[tp].popleft()
    if not queues[tp]:
        del queues[tp]
    return index


def _check_answered(api: str, routes: dict[str, list[TopicPartition]], answered: dict[TopicPartition, int]) -> None:
    for address, tps in routes.items():
        missing = [str(tp) for tp in tps if tp not in answered]
        if missing:
            raise ProtocolError(f"{address}: {api} response without {', '.join(missing)}")


def _only_partition(topics: list, tp: TopicPartition, address: str):
    for topic in topics:
        for part in topic.partitions:
            if topic.topic == tp.topic and part.partition_index == tp.partition:
                return part
    raise ProtocolError(f"{address}: fetch response without {tp}")
