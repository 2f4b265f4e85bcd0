"""The source side of the data plane: one Fetch per leader for all the partitions it leads,
answers decoded without copying the record sets (Kafka's consumer ``Fetcher``), into
buffers the caller may pass for reuse (:mod:`.frames`).

Each leader has one fetch in flight, covering every partition the caller wants from it that
is not already being fetched; across a WAN, more (:data:`FETCH_TURN_S`). A broker fills a
response in request order, each partition up to ``partition_max_bytes`` and all up to
``max_bytes``, and only the first partition is sure to get a whole batch (KIP-74). So each
partition may take an equal share of ``max_bytes`` (a response then carries some of every
partition, and the producer a batch of each per request), and the partitions that got no
whole batch for longest go first: every fetch moves the most starved one on, whatever else
the caller asks for at the time (Kafka's fetch sessions likewise move partitions that
returned data to the end). Record sets come back as writable views of the response's own
buffer, so the caller can rewrite batches in place and produce them as they are.

Per-partition outcomes are :class:`FetchedData`, :class:`OffsetOutOfRangeError` (the
caller decides between failing and skipping, ``--on-data-loss``) or :class:`TopicIdGoneError`
(the topic is not the one fetched any more; the caller stops its copy). Retriable errors (leader
moves, a lost connection, a broker that stopped answering) are retried here, per partition,
with backoff; others raise.

Read committed (KIP-98), a partition answers nothing at its last stable offset while a
transaction is open there. The caller fetches it again, as Kafka's consumer polls again; a
partition stuck longer than any transaction may stay open raises
:class:`HangingTransactionError` instead of being fetched forever.

**A topic is fetched by its id** (Fetch v13, KIP-516) where the leader speaks it: the id the
caller gives (:meth:`Fetcher.identify`: the job's plan), or else the one metadata listed when
the topic was first fetched, kept from then on. A topic deleted, or deleted and made again under
its name, then answers UNKNOWN_TOPIC_ID, and the fetch settles it as :class:`TopicIdGoneError`
rather than read the new topic's records at the old topic's offsets, once fresh metadata agrees
(a leader whose metadata lags a topic just made answers so too, and is retried). A topic fetched
before that metadata stops listing for as long as the retries last (deleted, not made again) is
settled so too (:meth:`Fetcher.take_gone`), and the other topics' partitions are fetched on
meanwhile. A cluster without ids is fetched by name (v12 at most), as before.

**Idle partitions cost nothing** (KIP-227). A partition at its end (its fetch offset at the
end the last answer gave: the last stable offset read committed, else the high watermark)
waits in the leader's fetch session (:class:`~.fetch_session.FetchSession`), whose request,
one at a time on a connection of its own, long-polls for all of them and names only those
that changed; the answer carries only the partitions that have something new. A copier
following 10,000 partitions of which four move pays for the four. Partitions with a backlog,
and those that come back from routing while the session's long poll is out, are fetched
without a session as above, on the leader's other connection: a broker answers a
connection's requests in order, so a long poll there would hold them back.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import kafka.errors as kerr
from kafka.protocol.consumer import FetchRequest, FetchResponse

from kcodecs import KcodecsError, KMirrorError, iter_batches

from ..protocol import FetchPosition, decode_fetch_response, encode_fetch_request
from ..protocol.fetch import FETCH_SESSIONS_SINCE, FETCH_TOPIC_IDS_SINCE
from .backoff import Backoff
from .client import READ_COMMITTED, READ_UNCOMMITTED, KafkaClient, is_retriable
from .connection import ConnectionFailedError, ProtocolError
from .errors import BrokerApiError, HangingTransactionError, OffsetOutOfRangeError, TopicIdGoneError, UnknownTopicError
from .fetch_session import FetchSession, SessionRequest
from .frames import FrameBuffers
from .pipeline import Encoder, PipelinedConnection
from .types import FetchedData, TopicPartition

__all__ = ["Fetcher", "FetchOutcome", "READ_UNCOMMITTED", "READ_COMMITTED", "MAX_TRANSACTION_WAIT_S",
           "MAX_FETCHES_IN_FLIGHT", "FETCH_TURN_S"]

log = logging.getLogger(__name__)

MAX_TRANSACTION_WAIT_S = 16 * 60.0
"""How long a partition may stay stuck at its last stable offset: Kafka's
``transaction.max.timeout.ms`` (15 minutes by default, the longest a producer may ask for),
plus a minute for the coordinator's abort to reach the partition. A transaction open longer
will not end by itself."""

FetchOutcome = FetchedData | OffsetOutOfRangeError | TopicIdGoneError

FETCH_TURN_S = 0.025
"""About how long a fetch's answer takes to arrive from a leader nearby (a few MiB over a LAN,
read, routed): one fetch in flight per leader keeps such a leader busy. A leader whose answers
take longer, a source across a WAN, gets ``max_bytes`` in flight per this much of that time
(its :meth:`Fetcher.window`), so that the bytes in flight cover the bandwidth-delay product:
at 100 ms, five times ``max_bytes``, where one fetch would cap the copy at ``max_bytes`` a
round trip. The window is shared out as fetches of partitions no other one is fetching (one
partition has one fetch in flight, as its next one asks from where this one ends); with fewer
partitions than the window, each fetch asks for a multiple of ``max_bytes`` (its *units*), so
that two partitions far away still fill the window. The caller bounds the memory in units:
each may fill ``max_bytes`` of buffer."""
MAX_FETCHES_IN_FLIGHT = 8
SESSION_WAIT_MS = 5000
"""How long a fetch session's long poll waits at most (the broker answers as soon as any of
its partitions has something new): idle, each poll walks the session's partitions once, so a
copier following 10,000 of them pays for one walk every five seconds, not every half second.
Partitions back from routing meanwhile are fetched on the other connection, so none waits
for the poll to end."""
_LATENCY_SAMPLES = 8
"""A leader's round trip is the shortest of its last this many answers that carried records:
an answer can only be late to be read (the loop was routing), never early, so the shortest
is the nearest to the network's and the broker's own time."""


@dataclass(frozen=True)
class _Asked:
    """What one fetch asked for: partition -> offset, and how many times ``max_bytes`` it may
    fill; ``session``: the leader's fetch session's request (the offsets are every partition
    it fetches, named or held)."""

    offsets: Mapping[TopicPartition, int]
    units: int
    session: SessionRequest | None = None
    topic_ids: Mapping[str, uuid.UUID] | None = None
    """The id each topic was named by (v13), None if by name: the answer names them so too."""

    @property
    def highest(self) -> int:
        """The newest Fetch version this request may go as: v13 names topics by id only."""
        return FETCH_TOPIC_IDS_SINCE if self.topic_ids is not None else FETCH_TOPIC_IDS_SINCE - 1

    def topic_names(self) -> dict[uuid.UUID, str] | None:
        return None if self.topic_ids is None else {topic_id: name for name, topic_id in self.topic_ids.items()}


_TOPIC_ID_ERRORS = frozenset({kerr.UnknownTopicIdError.errno, kerr.InconsistentTopicIdError.errno})
"""A partition's topic is not the one its id named: deleted, or made again since."""

_SESSION_ERRORS = frozenset({kerr.FetchSessionIdNotFoundError.errno, kerr.InvalidFetchSessionEpochError.errno})
"""A session's request refused for the session's sake: the next one is a full fetch, at once."""


class Fetcher:
    """Fetches raw record sets of many partitions from one cluster, one request per leader."""

    def __init__(self, client: KafkaClient, *, max_bytes: int, max_wait_ms: int = 100,
                 isolation_level: int = READ_UNCOMMITTED, max_transaction_wait_s: float = MAX_TRANSACTION_WAIT_S,
                 frames: FrameBuffers | None = None, clock: Callable[[], float] = time.monotonic):
        """``frames`` are the buffers responses are read into (default: a fresh buffer for each)."""
        self._client = client
        self._frames = frames
        self._max_bytes = max_bytes
        self._max_wait_ms = max_wait_ms
        self._isolation_level = isolation_level
        self._max_transaction_wait_s = max_transaction_wait_s
        self._stuck_since: dict[TopicPartition, tuple[float, int]] = {}
        """Since when, and at which last stable offset, each partition is held by an open transaction."""
        self._clock = clock
        self._connections: dict[str, PipelinedConnection] = {}
        self._tails: dict[str, PipelinedConnection] = {}
        """Per leader, the connection of its fetch session's long polls."""
        self._sessions: dict[str, FetchSession] = {}
        self._ends: dict[TopicPartition, int] = {}
        """Each partition's end as its last answer gave it: where a fetch finds nothing new yet."""
        self._backoff: dict[TopicPartition, Backoff] = {}
        self._asking: set[TopicPartition] = set()
        self._served: dict[TopicPartition, int] = {}
        """When each partition last got a whole batch, counted in responses: the order of the next request."""
        self._responses = 0
        self._latency: dict[str, deque[float]] = {}
        """Per leader, how long its last answers that carried records took."""
        self._topic_ids: dict[str, uuid.UUID] = {}
        """The id each topic is fetched by from now on (:meth:`identify`, or its first listing)."""
        self._gone: dict[TopicPartition, TopicIdGoneError] = {}
        """Partitions whose topic metadata stopped listing, settled outside any answer (:meth:`take_gone`)."""

    def take_gone(self) -> dict[TopicPartition, TopicIdGoneError]:
        """The partitions found gone since the last call, outside a fetch's answer: their topic,
        fetched by id before, is no longer listed by metadata, however long the retries waited."""
        gone, self._gone = self._gone, {}
        return gone

    def identify(self, topic_ids: Mapping[str, uuid.UUID]) -> None:
        """Fetch each of these topics by this id (the job's plan says which topic it copies):
        a fetch then settles as :class:`TopicIdGoneError` once the name stands for another.
        A topic fetched until now by another id (the plan follows a topic made again) leaves
        every fetch session, whose leaders hold its partitions under the old id: each session's
        next request is a full one."""
        changed = {topic for topic, topic_id in topic_ids.items() if self._topic_ids.get(topic, topic_id) != topic_id}
        self._topic_ids.update(topic_ids)
        if not changed:
            return
        for session in self._sessions.values():
            session.restart()
        for known in (self._ends, self._served, self._stuck_since):
            for tp in [tp for tp in known if tp.topic in changed]:
                del known[tp]

    def fetching(self, tp: TopicPartition) -> bool:
        return tp in self._asking

    def not_fetching(self, partitions: set[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` no fetch in flight covers (a set difference: a copier's
        10,000 idle partitions are all in its session's long poll)."""
        return partitions - self._asking

    def in_flight(self) -> int:
        """Units (``max_bytes`` each) of fetches sent and not yet answered."""
        return sum(_units(conn) for conn in (*self._connections.values(), *self._tails.values()))

    def connections(self) -> list[PipelinedConnection]:
        return [conn for conn in (*self._connections.values(), *self._tails.values()) if conn.in_flight]

    def owns(self, conn: PipelinedConnection) -> bool:
        return self._connections.get(conn.address) is conn or self._tails.get(conn.address) is conn

    def next_deadline(self) -> float | None:
        """When the first partition's backoff ends (None: none is backing off)."""
        return min((b.retry_at for tp, b in self._backoff.items() if b.failures), default=None)

    def send(self, wanted: Mapping[TopicPartition, int], *, limit: int = MAX_FETCHES_IN_FLIGHT) -> int:
        """Fetch ``wanted`` (partition -> offset): to each leader, as many units as its
        :meth:`window` has room for, in as many requests as there are partitions to share them
        (at most one request per unit); at most ``limit`` units in all (the caller's memory
        bound). Partitions already being fetched or backing off wait. Returns the units sent."""
        now = self._clock()
        self._expire(now)
        ready = [tp for tp in wanted if tp not in self._asking and self._ready(tp, now)]
        if not ready:
            return 0
        try:
            routes = self._leaders(ready)
        except KMirrorError as exc:
            self._failed(ready, exc)
            return 0
        sent = 0
        for address, tps in routes.items():
            if sent < limit:
                tps, units = self._send_session(address, tps, wanted)
                sent += units
            if not tps:
                continue
            conn = self._connection(address, tps)
            room = 0 if conn is None else min(self.window(address) - _units(conn), limit - sent)
            requests = max(0, min(room, len(tps)))
            ordered = sorted(tps, key=lambda tp: self._served.get(tp, -1))
            for share in range(requests):
                offsets = {tp: wanted[tp] for tp in ordered[share::requests]}
                asked = _Asked(offsets, room // requests + (share < room % requests), topic_ids=self._ids_of(offsets))
                try:
                    conn.send_encoded(FetchRequest, self._request(asked, conn), asked, asked.highest)
                except (ConnectionFailedError, ProtocolError) as exc:
                    self._lost(conn, exc, also=asked.offsets)
                    break
                self._asking.update(asked.offsets)
                sent += asked.units
        return sent

    def window(self, address: str) -> int:
        """Units (``max_bytes`` each) that may be in flight to the leader at ``address`` (see
        :data:`FETCH_TURN_S`)."""
        took = self._latency.get(address)
        return 1 if not took else min(MAX_FETCHES_IN_FLIGHT, 1 + int(min(took) / FETCH_TURN_S))

    def widest_window(self) -> int:
        """The most units any leader may have in flight: how far ahead reading may run."""
        return max((self.window(address) for address in self._latency), default=1)

    def on_readable(self, conn: PipelinedConnection) -> dict[TopicPartition, FetchOutcome]:
        """Read the oldest answer on ``conn``; the partitions it settled (retried ones left out,
        and a session's partitions with nothing new)."""
        pending = None
        try:
            pending, body = conn.receive(FetchResponse, self._frames)
            response = decode_fetch_response(body, pending.version, pending.context.topic_names())
        except (ConnectionFailedError, ProtocolError) as exc:
            self._lost(conn, exc, also=pending.context.offsets if pending is not None else ())
            return {}
        if any(p.records for p in response.partitions) and pending.context.session is None:
            # Answers without records may have waited out max_wait_ms at the log's end, and a
            # session's long poll waits until something comes: neither says anything of the
            # round trip.
            took = self._clock() - pending.sent_at
            self._latency.setdefault(conn.address, deque(maxlen=_LATENCY_SAMPLES)).append(took)
        asked: _Asked = pending.context
        self._asking.difference_update(asked.offsets)
        self._responses += 1
        if asked.session is not None:
            self._sessions[conn.address].answered(response.error_code, response.session_id)
            if response.error_code in _SESSION_ERRORS:
                log.debug("%s: fetch session %d refused (%s); the next fetch is a full one", conn.address,
                          asked.session.session_id, kerr.for_code(response.error_code).message)
                return {}
        if response.error_code:  # v7+: the whole request failed
            self._failed(list(asked.offsets), BrokerApiError.from_code("Fetch", response.error_code))
            return {}
        answered = {(p.topic, p.partition): p for p in response.partitions}
        if asked.session is not None:
            self._check_held(asked, answered)
        settled: dict[TopicPartition, FetchOutcome] = {}
        for tp, offset in asked.offsets.items():
            part = answered.get((tp.topic, tp.partition))
            if part is None:
                if asked.session is not None:
                    continue  # held by the session, nothing new
                raise ProtocolError(f"{conn.address}: fetch response without {tp}")
            if part.error_code == kerr.OffsetOutOfRangeError.errno:
                settled[tp] = OffsetOutOfRangeError(tp, offset, log_start_offset=part.log_start_offset,
                                                    high_watermark=part.high_watermark)
            elif part.error_code in _TOPIC_ID_ERRORS:
                if self._client.fresh_topic_id(tp.topic) == asked.topic_ids[tp.topic]:
                    # Metadata still lists the topic under that id: the leader's lags (a topic just
                    # made), as Kafka's clients take it (retriable).
                    self._failed([tp], BrokerApiError.from_code("Fetch", part.error_code, tp))
                else:
                    settled[tp] = TopicIdGoneError(tp, asked.topic_ids[tp.topic], part.error_code)
            elif part.error_code:
                error = BrokerApiError.from_code("Fetch", part.error_code, tp)
                if not error.retriable:
                    raise error
                self._failed([tp], error)
            else:
                self._backoff.pop(tp, None)
                if _has_whole_batch(part.records):
                    self._served[tp] = self._responses
                settled[tp] = FetchedData(part.records, part.high_watermark, part.log_start_offset,
                                          part.last_stable_offset, part.aborted_transactions or ())
                self._ends[tp] = (part.last_stable_offset if self._isolation_level == READ_COMMITTED
                                  and part.last_stable_offset >= 0 else part.high_watermark)
                self._check_stuck(tp, offset, settled[tp])
        return settled

    def close(self) -> None:
        for conn in (*self._connections.values(), *self._tails.values()):
            conn.abandon()
        self._connections.clear()
        self._tails.clear()
        self._sessions.clear()
        self._asking.clear()

    # ---- internals ----------------------------------------------------------------------------

    def _request(self, asked: _Asked, conn: PipelinedConnection) -> Encoder:
        """A full fetch every time (no KIP-227 fetch session) of up to ``units`` times
        ``max_bytes``; each partition may take its share, the broker stops at the whole
        (KIP-74). Partitions of one topic go together, in the order of the first of them."""
        max_bytes = self._max_bytes * asked.units
        share = max(1, max_bytes // len(asked.offsets))
        positions = [FetchPosition(tp.topic, tp.partition, offset, share) for tp, offset in asked.offsets.items()]

        def encode(correlation_id: int, version: int) -> list[bytes]:
            return encode_fetch_request(positions, version=version, correlation_id=correlation_id,
                                        client_id=conn.broker.conn.client_id, max_wait_ms=self._max_wait_ms,
                                        min_bytes=1, max_bytes=max_bytes, isolation_level=self._isolation_level,
                                        topic_ids=asked.topic_ids)

        return encode

    def _send_session(self, address: str, tps: list[TopicPartition],
                      wanted: Mapping[TopicPartition, int]) -> tuple[list[TopicPartition], int]:
        """Send the leader's session request for those of ``tps`` at their end, if none is out;
        return the partitions left to fetch without a session, and the units sent (0 or 1)."""
        at_end = [tp for tp in tps if self._ends.get(tp, -1) >= 0 and wanted[tp] >= self._ends[tp]]
        session = self._sessions.setdefault(address, FetchSession())
        if not at_end or session.in_flight is not None:
            return tps, 0
        conn = self._tail(address, at_end)
        if conn is None or conn.broker.version_of(FetchRequest) < FETCH_SESSIONS_SINCE:
            return tps, 0
        # One size for every partition, so that none is named again for a change of share;
        # the request's max_bytes bounds the answer, and the broker serves the session's
        # partitions in turn (those that returned records move to the end).
        request = session.request({tp: (wanted[tp], self._max_bytes) for tp in at_end})
        offsets = {tp: wanted[tp] for tp in at_end}
        asked = _Asked(offsets, 1, request, self._ids_of([*offsets, *request.forgotten]))
        try:
            conn.send_encoded(FetchRequest, self._session_request(request, asked, conn), asked, asked.highest)
        except (ConnectionFailedError, ProtocolError) as exc:
            self._lost(conn, exc, also=asked.offsets)
            return [tp for tp in tps if tp not in asked.offsets], 0
        self._asking.update(asked.offsets)
        return [tp for tp in tps if tp not in asked.offsets], 1

    def _session_request(self, request: SessionRequest, asked: _Asked, conn: PipelinedConnection) -> Encoder:
        positions = [FetchPosition(tp.topic, tp.partition, offset, max_bytes)
                     for tp, (offset, max_bytes) in request.named.items()]

        def encode(correlation_id: int, version: int) -> list[bytes]:
            return encode_fetch_request(positions, version=version, correlation_id=correlation_id,
                                        client_id=conn.broker.conn.client_id,
                                        max_wait_ms=max(self._max_wait_ms, SESSION_WAIT_MS), min_bytes=1,
                                        max_bytes=self._max_bytes, isolation_level=self._isolation_level,
                                        session_id=request.session_id, session_epoch=request.epoch,
                                        forgotten=request.forgotten, topic_ids=asked.topic_ids)

        return encode

    def _leaders(self, tps: list[TopicPartition]) -> dict[str, list[TopicPartition]]:
        """``tps`` by leader. Those of a topic metadata does not list fail on their own (a topic
        deleted must not hold up the others' fetches): retried, or settled as gone once the
        retries are used up, for a topic fetched by id before."""
        while tps:
            try:
                return self._client.leaders(tps)
            except UnknownTopicError as exc:
                unknown = [tp for tp in tps if tp.topic == exc.topic]
                tps = [tp for tp in tps if tp.topic != exc.topic]
                self._failed(unknown, exc)
        return {}

    def _ids_of(self, tps: Iterable[TopicPartition]) -> dict[str, uuid.UUID] | None:
        """The ids to name the topics of ``tps`` by, None if one has none (a cluster without
        ids): then the request names them all by name. A topic's first id is kept."""
        ids = {}
        for topic in {tp.topic for tp in tps}:
            known = self._topic_ids.get(topic) or self._client.topic_id(topic)
            if known is None:
                return None
            ids[topic] = self._topic_ids[topic] = known
        return ids

    def _check_stuck(self, tp: TopicPartition, offset: int, fetched: FetchedData) -> None:
        """Time how long ``tp`` has been held at its last stable offset by an open transaction;
        raise once that is longer than :data:`MAX_TRANSACTION_WAIT_S`. The broker holds each
        such fetch up to ``max_wait_ms``, so waiting is no busy loop."""
        stuck = (self._isolation_level == READ_COMMITTED and not fetched.records
                 and 0 <= fetched.last_stable_offset <= offset < fetched.high_watermark)
        if not stuck:
            self._stuck_since.pop(tp, None)
            return
        if tp not in self._stuck_since:
            self._stuck_since[tp] = (self._clock(), fetched.last_stable_offset)
            log.warning("%s: waiting at offset %d for the source transaction open at offset %d to end "
                        "(high watermark %d)", tp, offset, fetched.last_stable_offset, fetched.high_watermark)
        else:
            self._raise_if_hanging(tp, offset)

    def _check_held(self, asked: _Asked, answered: Mapping[tuple[str, int], object]) -> None:
        """A session's answer leaves out a partition with nothing new, a stuck one too: its
        wait is timed all the same."""
        for tp, offset in asked.offsets.items():
            if tp in self._stuck_since and (tp.topic, tp.partition) not in answered:
                self._raise_if_hanging(tp, offset)

    def _raise_if_hanging(self, tp: TopicPartition, offset: int) -> None:
        since, last_stable = self._stuck_since[tp]
        waited = self._clock() - since
        if waited > self._max_transaction_wait_s:
            raise HangingTransactionError(tp, offset, last_stable, waited)

    def _ready(self, tp: TopicPartition, now: float) -> bool:
        backoff = self._backoff.get(tp)
        return backoff is None or backoff.ready(now)

    def _connection(self, address: str, tps: list[TopicPartition]) -> PipelinedConnection | None:
        return self._open(self._connections, address, tps, MAX_FETCHES_IN_FLIGHT)

    def _tail(self, address: str, tps: list[TopicPartition]) -> PipelinedConnection | None:
        return self._open(self._tails, address, tps, 1)

    def _open(self, connections: dict[str, PipelinedConnection], address: str, tps: list[TopicPartition],
              max_in_flight: int) -> PipelinedConnection | None:
        conn = connections.get(address)
        if conn is not None and not conn.closed:
            return conn
        try:
            conn = connections[address] = PipelinedConnection(self._client.connect(address), max_in_flight,
                                                              clock=self._clock)
        except KMirrorError as exc:
            self._failed(tps, exc)
            return None
        return conn

    def _expire(self, now: float) -> None:
        """A fetch unanswered for the request timeout past its ``max_wait_ms`` counts as lost,
        with its connection (Kafka's ``request.timeout.ms``): a leader that stopped answering
        without closing the connection (paused, or cut off without a reset) must not hold its
        partitions for ever."""
        for connections, wait_ms in ((self._connections, self._max_wait_ms),
                                     (self._tails, max(self._max_wait_ms, SESSION_WAIT_MS))):
            limit = self._client.request_timeout_s + wait_ms / 1000
            for conn in list(connections.values()):
                if conn.overdue(now, limit):
                    self._lost(conn, ConnectionFailedError(conn.address, f"no answer to a fetch in {limit:g} s"))

    def _lost(self, conn: PipelinedConnection, error: KMirrorError, also: Iterable[TopicPartition] = ()) -> None:
        """``conn`` failed: every fetch in flight on it is lost with it, and so are the partitions
        of ``also`` (a request that did not go out, or an answer taken off it that could not be
        read). All of them are fetched again after a backoff: a partition left marked as being
        fetched would never be asked for again, and its copy would stand still."""
        tps = [tp for pending in conn.abandon() for tp in pending.context.offsets]
        tps += [tp for tp in also if tp not in tps]
        if self._tails.get(conn.address) is conn:
            del self._tails[conn.address]
            self._sessions[conn.address].lost()
        elif self._connections.get(conn.address) is conn:
            del self._connections[conn.address]
        self._asking.difference_update(tps)
        self._failed(tps, error)

    def _failed(self, tps: list[TopicPartition], error: KMirrorError) -> None:
        """Retriable: back off and forget the leaders; anything else raises."""
        if not is_retriable(error):
            raise error
        self._client.forget_leaders(tps)
        now = self._clock()
        for tp in tps:
            backoff = self._backoff.setdefault(tp, Backoff())
            if (isinstance(error, UnknownTopicError) and tp.topic in self._topic_ids
                    and backoff.failures + 1 >= self._client.retry.attempts):
                # Fetched by id before, and not listed for as long as the retries waited: deleted.
                del self._backoff[tp]
                self._gone[tp] = TopicIdGoneError(tp, self._topic_ids[tp.topic], error.code)
                continue
            backoff.failed(error, self._client.retry, now, bootstrap=self._client.bootstrap, what=f"fetch {tp}")
        log.debug("fetch of %s failed (%s); retrying", ", ".join(map(str, tps)), error)


def _units(conn: PipelinedConnection) -> int:
    return sum(pending.context.units for pending in conn.in_flight)


def _has_whole_batch(records) -> bool:
    """Whether a partition's record set begins with a whole batch (beyond its share a broker
    may return the start of one only)."""
    try:
        return next(iter_batches(records), None) is not None
    except KcodecsError:
        return True  # not a starved partition but a corrupt one: the copy's routing names it
