"""Fetch (api key 1), encoded by hand: the client's request, the broker's answer, and the
client's reading of it (records as views of the response buffer, never copies).

FetchRequest, v4..13, flexible from v12 (a consumer's: no leader epochs, no rack; a full fetch,
or a fetch session's, KIP-227; kafka-python compiled its encoder on first use, a few
milliseconds of every new process's first copy). From v13 a topic is named by its topic id
(KIP-516), not its name: a fetch of a topic that was deleted, or deleted and made again under
its name, gets ``UNKNOWN_TOPIC_ID`` instead of the new topic's records at the old offsets::

    replica_id             int32    -1: a consumer
    max_wait_ms            int32
    min_bytes              int32
    max_bytes              int32
    isolation_level        int8
    session_id             int32    v7+ (0: no fetch session yet, KIP-227)
    session_epoch          int32    v7+ (-1: a full fetch without a session; 0: a full fetch
                                    that starts one; 1, 2, ...: the session's next request)
    topics                 array: topic string (v4-12) | topic_id uuid (v13)
      partitions           array:
        partition              int32
        current_leader_epoch   int32    v9+ (-1: not checked, KIP-320)
        fetch_offset           int64
        last_fetched_epoch     int32    v12+ (-1: none)
        log_start_offset       int64    v5+ (-1: a consumer's)
        partition_max_bytes    int32
    forgotten_topics_data  array    v7+: partitions the session stops fetching
      topic                string (v7-12) | topic_id uuid (v13)
      partitions           array of int32
    rack_id                string   v11+ ("": none, KIP-392)
    (v12 tagged: 0 cluster_id; not sent)

FetchResponse, v4..13, flexible from v12::

    throttle_time_ms       int32
    error_code             int16    v7+ (fetch sessions, KIP-227)
    session_id             int32    v7+
    topics                 array: topic string (v4-12) | topic_id uuid (v13)
      partitions           array:
        partition_index        int32
        error_code             int16
        high_watermark         int64
        last_stable_offset     int64
        log_start_offset       int64    v5+
        aborted_transactions   nullable array: producer_id int64 | first_offset int64
        preferred_read_replica int32    v11+ (KIP-392)
        records                nullable bytes
        (v12 tagged: 0 diverging_epoch, 1 current_leader, 2 snapshot_id; skipped here)
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from .errors import ProtocolError
from .primitives import (
    DECODE_ERRORS, ENCODE_ERRORS, INT32, Buffer, Reader, Writer, begin_request, check_version,
    consecutive_runs,
)


FETCH_API_KEY = 1
FETCH_VERSIONS = range(4, 14)
FETCH_FIRST_FLEXIBLE = 12
FETCH_TOPIC_IDS_SINCE = 13  # topics named by topic id (KIP-516)
FETCH_SESSIONS_SINCE = 7  # top-level error_code and session_id
FETCH_LOG_START_SINCE = 5
FETCH_PREFERRED_REPLICA_SINCE = 11
FETCH_RACK_SINCE = 11
FETCH_LEADER_EPOCH_SINCE = 9
CONSUMER_REPLICA_ID = -1
NO_EPOCH = -1  # current_leader_epoch, last_fetched_epoch: not known to a plain consumer
CONSUMER_LOG_START = -1  # log_start_offset: a follower's, a consumer sends -1
NO_PREFERRED_READ_REPLICA = -1  # "read from the leader" (KIP-392): the only answer we give

_FETCH_TOP = {False: struct.Struct(">i"), True: struct.Struct(">ihi")}  # by "has fetch sessions" (v7+)
_FETCH_PARTITION = {  # by "has log_start_offset" (v5+)
    False: struct.Struct(">ihqq"),  # partition_index, error_code, high_watermark, last_stable_offset
    True: struct.Struct(">ihqqq"),  # ... log_start_offset
}
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset
_FETCH_REQUEST_TOP = {  # by "has fetch sessions" (v7+)
    False: struct.Struct(">iiiib"),  # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level
    True: struct.Struct(">iiiibii"),  # ... session_id, session_epoch
}
_POSITION_V4 = struct.Struct(">iqi")  # partition, fetch_offset, partition_max_bytes
_POSITION_V5 = struct.Struct(">iqqi")  # ... log_start_offset before partition_max_bytes
_POSITION_V9 = struct.Struct(">iiqqi")  # ... current_leader_epoch after partition
_POSITION_V12 = struct.Struct(">iiqiqi")  # ... last_fetched_epoch after fetch_offset
_EMPTY = memoryview(b"")


@dataclass(frozen=True, slots=True)
class FetchPosition:
    """One partition of a fetch request: where to read from, and at most how much of it."""

    topic: str
    partition: int
    offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    topic: str
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int  # -1 before v5
    aborted_transactions: tuple[tuple[int, int], ...] | None  # (producer_id, first_offset); None when null
    records: memoryview  # a view of the response buffer (writable when it is a bytearray); empty when null


@dataclass(frozen=True, slots=True)
class FetchResponseData:
    throttle_time_ms: int
    error_code: int  # 0 before v7
    session_id: int  # 0 before v7
    partitions: list[FetchedPartition]
    topic_ids: Mapping[str, uuid.UUID] | None = None
    """From v13: the id each topic is named by on the wire (KIP-516); None before."""


# --- the client's request ------------------------------------------------------------------------------------


def encode_fetch_request(
    positions: Sequence[FetchPosition],
    *,
    version: int,
    correlation_id: int,
    client_id: str | None,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation_level: int,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: Sequence[tuple[str, int]] = (),
    topic_ids: Mapping[str, uuid.UUID] | None = None,
) -> list[bytes]:
    """A consumer's fetch, framed, as a one-piece list for ``socket.sendmsg``: a full fetch by
    default, or a fetch session's request (``session_id``, ``session_epoch``, and the
    ``forgotten`` (topic, partition) pairs it stops fetching; v7+, KIP-227). Partitions of one
    topic are grouped under it in first-seen order, as :func:`~.produce.encode_produce_request`
    groups them. Versions 4..13; v13 names each topic by its id in ``topic_ids``."""
    check_version("Fetch", version, FETCH_VERSIONS)
    name = _topic_key(version, topic_ids, "Fetch")
    topics: dict[str, list[FetchPosition]] = {}
    for position in positions:
        topics.setdefault(position.topic, []).append(position)
    flexible, sessions = version >= FETCH_FIRST_FLEXIBLE, version >= FETCH_SESSIONS_SINCE
    if not sessions and (session_id, session_epoch, tuple(forgotten)) != (0, -1, ()):
        raise ProtocolError(f"Fetch v{version} has no fetch sessions (v{FETCH_SESSIONS_SINCE}+)")
    try:
        out = begin_request(FETCH_API_KEY, version, correlation_id, client_id, flexible)
        top = (CONSUMER_REPLICA_ID, max_wait_ms, min_bytes, max_bytes, isolation_level)
        out.buf += _FETCH_REQUEST_TOP[sessions].pack(*top, *((session_id, session_epoch) if sessions else ()))
        out.length(len(topics), INT32)
        for topic, parts in topics.items():
            name(out, topic)
            out.length(len(parts), INT32)
            for p in parts:
                out.buf += _packed_position(p, version)
                out.tags()
            out.tags()
        if sessions:
            dropped: dict[str, list[int]] = {}
            for topic, partition in forgotten:
                dropped.setdefault(topic, []).append(partition)
            out.length(len(dropped), INT32)
            for topic, indexes in dropped.items():
                name(out, topic)
                out.length(len(indexes), INT32)
                for index in indexes:
                    out.buf += INT32.pack(index)
                out.tags()
        if version >= FETCH_RACK_SINCE:
            out.string("")
        out.tags()
    except ENCODE_ERRORS as exc:
        raise ProtocolError(f"cannot encode Fetch v{version}: {exc}") from exc
    return out.frame()


def _topic_key(version: int, topic_ids: Mapping[str, uuid.UUID] | None, api: str) -> Callable[[Writer, str], None]:
    """How a topic is written in this version: its name (v4-12), or its id (v13)."""
    if version < FETCH_TOPIC_IDS_SINCE:
        return Writer.string

    def topic_id(out: Writer, topic: str) -> None:
        if topic_ids is None:
            raise ProtocolError(f"{api} v{version} names topics by id: no topic ids given")
        known = topic_ids.get(topic)
        if known is None:
            raise ProtocolError(f"{api} v{version} names topics by id: none given for topic {topic!r}")
        out.buf += known.bytes

    return topic_id


def _packed_position(p: FetchPosition, version: int) -> bytes:
    """One partition of a fetch request, with the optional fields its version has (see the
    module docstring)."""
    if version < FETCH_LOG_START_SINCE:
        return _POSITION_V4.pack(p.partition, p.offset, p.max_bytes)
    if version < FETCH_LEADER_EPOCH_SINCE:
        return _POSITION_V5.pack(p.partition, p.offset, CONSUMER_LOG_START, p.max_bytes)
    if version < FETCH_FIRST_FLEXIBLE:
        return _POSITION_V9.pack(p.partition, NO_EPOCH, p.offset, CONSUMER_LOG_START, p.max_bytes)
    return _POSITION_V12.pack(p.partition, NO_EPOCH, p.offset, NO_EPOCH, CONSUMER_LOG_START, p.max_bytes)


# --- the broker's response -----------------------------------------------------------------------------------


def encode_fetch_response(response: FetchResponseData, *, version: int, correlation_id: int) -> list[bytes | memoryview]:
    """Framed (size prefix + response header v0, or v1 with tagged fields from v12) + body, as a
    list of buffers; records are the partitions' own views, not copied. v13 names each topic by
    its id in ``response.topic_ids``.

    Consecutive partitions of one topic share a topic entry, as Kafka's ``FetchResponse.toMessage``
    groups them, so a decoded response encodes back to the same bytes.
    """
    check_version("Fetch", version, FETCH_VERSIONS)
    name = _topic_key(version, response.topic_ids, "Fetch response")
    sessions, log_start = version >= FETCH_SESSIONS_SINCE, version >= FETCH_LOG_START_SINCE
    out = Writer(version >= FETCH_FIRST_FLEXIBLE)
    try:
        out.buf += INT32.pack(correlation_id)
        out.tags()
        if sessions:
            out.buf += _FETCH_TOP[True].pack(response.throttle_time_ms, response.error_code, response.session_id)
        else:
            out.buf += _FETCH_TOP[False].pack(response.throttle_time_ms)
        preferred_replica = version >= FETCH_PREFERRED_REPLICA_SINCE

        def partition(p: FetchedPartition) -> None:
            fixed = (p.partition, p.error_code, p.high_watermark, p.last_stable_offset)
            out.buf += _FETCH_PARTITION[log_start].pack(*fixed, *((p.log_start_offset,) if log_start else ()))
            _encode_aborted(out, p.aborted_transactions)
            if preferred_replica:
                out.buf += INT32.pack(NO_PREFERRED_READ_REPLICA)
            out.borrowed(p.records)

        runs = consecutive_runs(response.partitions)
        out.length(len(runs), INT32)
        for topic, parts in runs:
            name(out, topic)
            out.length(len(parts), INT32)
            for part in parts:
                partition(part)
                out.tags()
            out.tags()
        out.tags()
    except ENCODE_ERRORS as exc:
        raise ProtocolError(f"cannot encode Fetch response v{version}: {exc}") from exc
    return out.frame()


def _encode_aborted(out: Writer, aborted: tuple[tuple[int, int], ...] | None) -> None:
    if aborted is None:
        out.length(None, INT32)
        return
    out.length(len(aborted), INT32)
    for producer_id, first_offset in aborted:
        out.buf += _ABORTED.pack(producer_id, first_offset)
        out.tags()


def decode_fetch_response(body: Buffer, version: int,
                          topic_names: Mapping[uuid.UUID, str] | None = None) -> FetchResponseData:
    """Body of a Fetch response (after the response header), versions 4..13. Records are views
    into ``body``, never copies. v13 names topics by id: ``topic_names`` gives the names of the
    ids the request sent (an answer about another id is a :class:`ProtocolError`)."""
    check_version("Fetch", version, FETCH_VERSIONS)
    by_id = version >= FETCH_TOPIC_IDS_SINCE
    if by_id and topic_names is None:
        raise ProtocolError(f"Fetch response v{version} names topics by id: no topic names given")
    reader = Reader(body, flexible=version >= FETCH_FIRST_FLEXIBLE)
    log_start, preferred_replica = version >= FETCH_LOG_START_SINCE, version >= FETCH_PREFERRED_REPLICA_SINCE
    partition_layout = _FETCH_PARTITION[log_start]
    try:
        if version >= FETCH_SESSIONS_SINCE:
            throttle_time_ms, error_code, session_id = reader.fixed(_FETCH_TOP[True])
        else:
            (throttle_time_ms,), error_code, session_id = reader.fixed(_FETCH_TOP[False]), 0, 0

        def partition(topic: str) -> FetchedPartition:
            fixed = reader.fixed(partition_layout)
            aborted = _decode_aborted(reader)
            if preferred_replica:
                reader.fixed(INT32)
            n = reader.length(INT32)
            records = _EMPTY if n is None else reader.take(n)
            index, error, high_watermark, last_stable = fixed[:4]
            start = fixed[4] if log_start else -1
            return FetchedPartition(topic, index, error, high_watermark, last_stable, start, aborted, records)

        topic_ids = None
        if by_id:
            partitions, topic_ids = [], {}
            for _ in range(reader.count("topics")):
                raw = bytes(reader.take(16))
                if len(raw) != 16:
                    raise ProtocolError(f"Fetch response v{version}: a topic id cut short at byte {reader.pos}")
                topic_id = uuid.UUID(bytes=raw)
                if topic_id not in topic_names:
                    raise ProtocolError(f"Fetch response v{version} answers about topic id {topic_id}, "
                                        f"which the request did not name")
                topic = topic_names[topic_id]
                topic_ids[topic] = topic_id
                for _ in range(reader.count("partitions")):
                    partitions.append(partition(topic))
                    reader.tags()
                reader.tags()
        else:
            partitions = reader.topics(partition)
        reader.end()
    except DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed Fetch response v{version} at byte {reader.pos}: {exc}") from exc
    return FetchResponseData(throttle_time_ms, error_code, session_id, partitions, topic_ids)


def _decode_aborted(reader: Reader) -> tuple[tuple[int, int], ...] | None:
    n = reader.length(INT32)
    if n is None:
        return None
    aborted = []
    for _ in range(n):
        aborted.append(reader.fixed(_ABORTED))
        reader.tags()
    return tuple(aborted)
