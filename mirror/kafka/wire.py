"""Produce and Fetch encoded by hand, so record sets cross this layer as views, never copies.

Every other API goes through kafka-python's generated schemas (``kafka.protocol``), which
copy each record set into the message and again into its encoding. On the hot path that is
most of the CPU, so these two messages are written down here once, field by field, and
tested byte for byte against kafka-python at every version (``tests/kafka/test_wire.py``).
Encoders return a list of buffers for ``socket.sendmsg`` (scatter-gather): small ``bytes``
pieces interleaved with the callers' own record buffers. Decoders return record sets as
``memoryview`` slices of the buffer they were given.

Primitive encodings (Kafka's ``protocol.types``; "flexible" versions, KIP-482, switch to the
compact forms and end every struct with tagged fields)::

    type             classic                        flexible
    string           int16 length + utf-8           uvarint(length + 1) + utf-8
    nullable string  int16 length, -1 = null        uvarint(length + 1), 0 = null
    array            int32 count (-1 = null)        uvarint(count + 1) (0 = null)
    bytes / records  int32 length, -1 = null        uvarint(length + 1), 0 = null
    tagged fields    (none)                         uvarint count, then (uvarint tag, uvarint size, data)*

Request header (v1; v2 for flexible requests adds tagged fields after client_id, which
stays a classic nullable string in both)::

    api_key int16 | api_version int16 | correlation_id int32 | client_id nullable string

Response header: correlation_id int32 (v0); v1, for flexible responses, adds tagged fields.

ProduceRequest (api key 0), v3..12, flexible from v9 (v4-v8 change only what a broker may
answer; v10-v12 only add response fields)::

    transactional_id  nullable string
    acks              int16
    timeout_ms        int32
    topics            array: name string
                             partitions array: index int32 | records nullable bytes

ProduceResponse, v3..12, flexible from v9 (the broker's answer, one per produced batch: at
16 KiB batches kafka-python's encoder was a tenth of the embedded broker's time)::

    topics                 array: name string
      partitions           array:
        index                  int32
        error_code             int16
        base_offset            int64
        log_append_time_ms     int64
        log_start_offset       int64    v5+
        record_errors          array    v8+ (always empty here: whole batches are refused)
        error_message          nullable string  v8+
    throttle_time_ms       int32

FetchRequest (api key 1), v4..12, flexible from v12 (a consumer's full fetch: no fetch
session, no leader epochs, no rack; kafka-python compiled its encoder on first use, a few
milliseconds of every new process's first copy)::

    replica_id             int32    -1: a consumer
    max_wait_ms            int32
    min_bytes              int32
    max_bytes              int32
    isolation_level        int8
    session_id             int32    v7+ (0: no fetch session, KIP-227)
    session_epoch          int32    v7+ (-1: a full fetch)
    topics                 array: topic string
      partitions           array:
        partition              int32
        current_leader_epoch   int32    v9+ (-1: not checked, KIP-320)
        fetch_offset           int64
        last_fetched_epoch     int32    v12+ (-1: none)
        log_start_offset       int64    v5+ (-1: a consumer's)
        partition_max_bytes    int32
    forgotten_topics_data  array    v7+ (always empty: no session)
    rack_id                string   v11+ ("": none, KIP-392)
    (v12 tagged: 0 cluster_id; not sent)

FetchResponse (api key 1), v4..12, flexible from v12::

    throttle_time_ms       int32
    error_code             int16    v7+ (fetch sessions, KIP-227)
    session_id             int32    v7+
    topics                 array: topic string
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

Anything malformed or truncated raises :class:`~mirror.kafka.ProtocolError`, never
``struct.error`` or ``IndexError``; so does a body with bytes left over after its last
field, which can only mean it was framed or versioned wrongly.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

from .connection import ProtocolError

__all__ = [
    "ProducePartition",
    "ProduceRequestData",
    "FetchedPartition",
    "FetchResponseData",
    "RequestHeader",
    "ProducedPartition",
    "ProduceResponseData",
    "encode_produce_request",
    "encode_produce_response",
    "decode_produce_request",
    "encode_fetch_response",
    "encode_fetch_request",
    "FetchPosition",
    "decode_fetch_response",
    "decode_plain_produce_response",
    "decode_request_header",
    "is_flexible_produce",
    "is_flexible_fetch",
    "PRODUCE_VERSIONS",
    "FETCH_VERSIONS",
]

Buffer = bytes | bytearray | memoryview

PRODUCE_API_KEY = 0
PRODUCE_VERSIONS = range(3, 13)
PRODUCE_FIRST_FLEXIBLE = 9
FETCH_API_KEY = 1
FETCH_VERSIONS = range(4, 13)
FETCH_FIRST_FLEXIBLE = 12
FETCH_SESSIONS_SINCE = 7  # top-level error_code and session_id
FETCH_LOG_START_SINCE = 5
FETCH_PREFERRED_REPLICA_SINCE = 11
FETCH_RACK_SINCE = 11
FETCH_LEADER_EPOCH_SINCE = 9
CONSUMER_REPLICA_ID = -1
NO_EPOCH = -1  # current_leader_epoch, last_fetched_epoch: not known to a plain consumer
CONSUMER_LOG_START = -1  # log_start_offset: a follower's, a consumer sends -1
NO_PREFERRED_READ_REPLICA = -1  # "read from the leader" (KIP-392): the only answer we give
NULL_LENGTH = -1  # classic encodings' null string, array and bytes
MAX_UVARINT_BYTES = 5  # lengths and tags are unsigned 32-bit (Kafka's ByteUtils.readUnsignedVarint)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_HEADER_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT64 = struct.Struct(">q")
_PRODUCED = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
PRODUCE_LOG_START_SINCE = 5
PRODUCE_RECORD_ERRORS_SINCE = 8  # record_errors and error_message (KIP-467)
_PLAIN_PRODUCED = struct.Struct(">ihqqqBBB")
"""A flexible Produce response's partition with nothing optional in it: partition_index,
error_code, base_offset, log_append_time_ms, log_start_offset, then three one-byte fields:
record_errors (1: empty), error_message (0: null), tagged fields (0: none)."""
_PLAIN_TAIL = (1, 0, 0)
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
_NO_TAGS = b"\x00"  # an empty tagged-field section: what we write, never anything else
_EMPTY = memoryview(b"")


@dataclass(slots=True)
class ProducePartition:
    """One partition of a produce request.

    ``records`` is one v2 batch (or more), never copied by the encoder. A decoded request
    gives ``None`` for a null record set, which the encoder writes back as null. Built for
    every batch sent or received, so not frozen: a frozen dataclass costs three times as much
    to build.
    """

    topic: str
    partition: int
    records: bytes | bytearray | memoryview | None


@dataclass(frozen=True, slots=True)
class ProduceRequestData:
    """A decoded produce request body; every partition's records are views of the request buffer."""

    transactional_id: str | None
    acks: int
    timeout_ms: int
    partitions: list[ProducePartition]


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


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int
    """Bytes the header takes: the body starts here."""


@dataclass(slots=True)
class ProducedPartition:
    """The broker's answer for one partition of a produce request."""

    topic: str
    partition: int
    error_code: int = 0
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ProduceResponseData:
    partitions: list[ProducedPartition]
    throttle_time_ms: int = 0


# --- encoding ------------------------------------------------------------------------------------------------


class _Out:
    """Accumulates small fields in one bytearray; a borrowed buffer cuts it into a piece of its
    own. Counts the bytes of the pieces as they come, for the frame's size prefix."""

    __slots__ = ("pieces", "buf", "flexible", "size")

    def __init__(self, flexible: bool):
        self.pieces: list[Buffer] = [b""]  # [0] becomes the frame size, known at the end
        self.buf = bytearray()
        self.flexible = flexible
        self.size = 0
        """Bytes in ``pieces`` (the size prefix aside)."""

    def uvarint(self, value: int) -> None:
        while value > 0x7F:
            self.buf.append((value & 0x7F) | 0x80)
            value >>= 7
        self.buf.append(value)

    def length(self, n: int | None, classic: struct.Struct) -> None:
        """A string, array or bytes length (``None`` = null) in this message's encoding."""
        if self.flexible:
            self.uvarint(0 if n is None else n + 1)
        else:
            self.buf += classic.pack(NULL_LENGTH if n is None else n)

    def string(self, value: str | None) -> None:
        data = None if value is None else value.encode()
        self.length(None if data is None else len(data), _INT16)
        if data is not None:
            self.buf += data

    def tags(self) -> None:
        if self.flexible:
            self.buf += _NO_TAGS

    def borrowed(self, records: Buffer | None) -> None:
        """A nullable bytes field whose data is the caller's buffer, placed in the list as it is."""
        if records is None:
            self.length(None, _INT32)
            return
        n = records.nbytes if isinstance(records, memoryview) else len(records)
        self.length(n, _INT32)
        buf = self.buf
        self.pieces += (bytes(buf), records)
        self.size += len(buf) + n
        buf.clear()

    def frame(self) -> list[Buffer]:
        buf = self.buf
        if buf:
            self.pieces.append(bytes(buf))
        self.pieces[0] = _INT32.pack(self.size + len(buf))
        return self.pieces


def _request_header(api_key: int, version: int, correlation_id: int, client_id: str | None, flexible: bool) -> _Out:
    """A request under way, its header written: v1, or v2 with tagged fields for a
    ``flexible`` version, in whose encoding the body goes on. Bad values raise what the
    caller's encoder turns into :class:`ProtocolError`."""
    out = _Out(flexible=False)  # client_id stays a classic string in header v2 (KIP-482)
    out.buf += _HEADER_PREFIX.pack(api_key, version, correlation_id)
    out.string(client_id)
    out.flexible = flexible
    out.tags()
    return out


def encode_produce_request(
    partitions: Sequence[ProducePartition],
    *,
    version: int,
    correlation_id: int,
    client_id: str | None,
    acks: int,
    timeout_ms: int,
    transactional_id: str | None = None,
) -> list[bytes | memoryview]:
    """The whole framed request (4-byte size prefix, request header v1 or v2, body) as a list of
    buffers for ``socket.sendmsg``: small bytes pieces interleaved with the callers' record
    buffers, which are not copied. Partitions of one topic are grouped under it in first-seen
    order (topics are a map in Kafka's ``ProduceRequest``). Versions 3..12."""
    _check_version("Produce", version, PRODUCE_VERSIONS)
    topics: dict[str, list[ProducePartition]] = {}
    for part in partitions:
        topics.setdefault(part.topic, []).append(part)
    try:
        out = _request_header(PRODUCE_API_KEY, version, correlation_id, client_id, version >= PRODUCE_FIRST_FLEXIBLE)
        out.string(transactional_id)
        out.buf += _ACKS_TIMEOUT.pack(acks, timeout_ms)
        out.length(len(topics), _INT32)
        for name, parts in topics.items():
            out.string(name)
            out.length(len(parts), _INT32)
            for part in parts:
                out.buf += _INT32.pack(part.partition)
                out.borrowed(part.records)
                out.tags()
            out.tags()
        out.tags()
    except (struct.error, UnicodeEncodeError, AttributeError) as exc:
        raise ProtocolError(f"cannot encode Produce v{version}: {exc}") from exc
    return out.frame()


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
) -> list[bytes]:
    """A consumer's full fetch (no fetch session: see the module docstring), framed, as a
    one-piece list for ``socket.sendmsg``. Partitions of one topic are grouped under it in
    first-seen order, as :func:`encode_produce_request` groups them. Versions 4..12."""
    _check_version("Fetch", version, FETCH_VERSIONS)
    topics: dict[str, list[FetchPosition]] = {}
    for position in positions:
        topics.setdefault(position.topic, []).append(position)
    flexible, sessions = version >= FETCH_FIRST_FLEXIBLE, version >= FETCH_SESSIONS_SINCE
    try:
        out = _request_header(FETCH_API_KEY, version, correlation_id, client_id, flexible)
        top = (CONSUMER_REPLICA_ID, max_wait_ms, min_bytes, max_bytes, isolation_level)
        out.buf += _FETCH_REQUEST_TOP[sessions].pack(*top, *((0, -1) if sessions else ()))
        out.length(len(topics), _INT32)
        for name, parts in topics.items():
            out.string(name)
            out.length(len(parts), _INT32)
            for p in parts:
                out.buf += _packed_position(p, version)
                out.tags()
            out.tags()
        if sessions:
            out.length(0, _INT32)  # forgotten_topics_data
        if version >= FETCH_RACK_SINCE:
            out.string("")
        out.tags()
    except (struct.error, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise ProtocolError(f"cannot encode Fetch v{version}: {exc}") from exc
    return out.frame()


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


def encode_produce_response(response: ProduceResponseData, *, version: int, correlation_id: int) -> list[bytes]:
    """Framed (size prefix + response header v0, or v1 from v9) + body, versions 3..12, as a
    one-piece list. Consecutive partitions of one topic share a topic entry. Kafka-python's
    encoder builds an object per partition and costs tens of microseconds per request, which at
    16 KiB batches was a tenth of the broker's time per batch."""
    _check_version("Produce", version, PRODUCE_VERSIONS)
    out = _Out(is_flexible_produce(version))
    log_start, errors = version >= PRODUCE_LOG_START_SINCE, version >= PRODUCE_RECORD_ERRORS_SINCE
    try:
        out.buf += _INT32.pack(correlation_id)
        out.tags()
        runs = _consecutive_runs(response.partitions)
        out.length(len(runs), _INT32)
        for topic, parts in runs:
            out.string(topic)
            out.length(len(parts), _INT32)
            for p in parts:
                out.buf += _PRODUCED.pack(p.partition, p.error_code, p.base_offset, p.log_append_time_ms)
                if log_start:
                    out.buf += _INT64.pack(p.log_start_offset)
                if errors:
                    out.length(0, _INT32)  # record_errors: none (we refuse whole batches)
                    out.string(p.error_message)
                out.tags()
            out.tags()
        out.buf += _INT32.pack(response.throttle_time_ms)
        out.tags()
    except (struct.error, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise ProtocolError(f"cannot encode Produce response v{version}: {exc}") from exc
    return out.frame()


def encode_fetch_response(response: FetchResponseData, *, version: int, correlation_id: int) -> list[bytes | memoryview]:
    """Framed (size prefix + response header v0, or v1 with tagged fields from v12) + body, as a
    list of buffers; records are the partitions' own views, not copied.

    Consecutive partitions of one topic share a topic entry, as Kafka's ``FetchResponse.toMessage``
    groups them, so a decoded response encodes back to the same bytes.
    """
    _check_version("Fetch", version, FETCH_VERSIONS)
    flexible = version >= FETCH_FIRST_FLEXIBLE
    sessions, log_start = version >= FETCH_SESSIONS_SINCE, version >= FETCH_LOG_START_SINCE
    out = _Out(flexible)
    try:
        out.buf += _INT32.pack(correlation_id)
        out.tags()
        if sessions:
            out.buf += _FETCH_TOP[True].pack(response.throttle_time_ms, response.error_code, response.session_id)
        else:
            out.buf += _FETCH_TOP[False].pack(response.throttle_time_ms)
        runs = _consecutive_runs(response.partitions)
        out.length(len(runs), _INT32)
        for topic, parts in runs:
            out.string(topic)
            out.length(len(parts), _INT32)
            for p in parts:
                fixed = (p.partition, p.error_code, p.high_watermark, p.last_stable_offset)
                out.buf += _FETCH_PARTITION[log_start].pack(*fixed, *((p.log_start_offset,) if log_start else ()))
                _encode_aborted(out, p.aborted_transactions)
                if version >= FETCH_PREFERRED_REPLICA_SINCE:
                    out.buf += _INT32.pack(NO_PREFERRED_READ_REPLICA)
                out.borrowed(p.records)
                out.tags()
            out.tags()
        out.tags()
    except (struct.error, UnicodeEncodeError, AttributeError, TypeError) as exc:
        raise ProtocolError(f"cannot encode Fetch response v{version}: {exc}") from exc
    return out.frame()


def _encode_aborted(out: _Out, aborted: tuple[tuple[int, int], ...] | None) -> None:
    if aborted is None:
        out.length(None, _INT32)
        return
    out.length(len(aborted), _INT32)
    for producer_id, first_offset in aborted:
        out.buf += _ABORTED.pack(producer_id, first_offset)
        out.tags()


def _consecutive_runs(partitions: Sequence) -> list[tuple[str, list]]:
    runs: list[tuple[str, list]] = []
    for part in partitions:
        if not runs or runs[-1][0] != part.topic:
            runs.append((part.topic, []))
        runs[-1][1].append(part)
    return runs


def is_flexible_produce(version: int) -> bool:
    """Whether Produce ``version`` uses the compact encodings and request header v2 (KIP-482)."""
    return version >= PRODUCE_FIRST_FLEXIBLE


def is_flexible_fetch(version: int) -> bool:
    """Whether Fetch ``version`` uses the compact encodings and response header v1 (KIP-482)."""
    return version >= FETCH_FIRST_FLEXIBLE


def _check_version(api: str, version: int, versions: range) -> None:
    if version not in versions:
        raise ProtocolError(f"{api} v{version} is not hand-encoded here (v{versions[0]}..{versions[-1]} are)")


# --- decoding ------------------------------------------------------------------------------------------------


class _In:
    """A cursor over a view. Short reads surface as ``struct.error`` or ``IndexError``, which the
    public decoders turn into :class:`ProtocolError` at their boundary."""

    __slots__ = ("view", "pos", "flexible")

    def __init__(self, data: Buffer, flexible: bool):
        view = memoryview(data)
        self.view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self.pos = 0
        self.flexible = flexible

    def fixed(self, layout: struct.Struct) -> tuple:
        values = layout.unpack_from(self.view, self.pos)
        self.pos += layout.size
        return values

    def uvarint(self) -> int:
        first = self.view[self.pos]
        if first < 0x80:  # one byte: nearly every length and tag count, so it skips the loop
            self.pos += 1
            return first
        value = 0
        for shift in range(0, 7 * MAX_UVARINT_BYTES, 7):
            byte = self.view[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
        raise ProtocolError(f"unsigned varint longer than {MAX_UVARINT_BYTES} bytes at {self.pos}")

    def length(self, classic: struct.Struct) -> int | None:
        """A string, array or bytes length; ``None`` when null."""
        n = self.uvarint() - 1 if self.flexible else self.fixed(classic)[0]
        if n == NULL_LENGTH:
            return None
        if not 0 <= n <= len(self.view) - self.pos:  # every element takes a byte at least
            raise ProtocolError(f"length {n} at {self.pos} runs past the {len(self.view)}-byte body")
        return n

    def take(self, n: int) -> memoryview:
        data = self.view[self.pos : self.pos + n]
        self.pos += n
        return data

    def string(self) -> str | None:
        n = self.length(_INT16)
        return None if n is None else str(self.take(n), "utf-8")

    def name(self, what: str) -> str:
        value = self.string()
        if value is None:
            raise ProtocolError(f"null {what} at {self.pos}")
        return value

    def count(self, what: str) -> int:
        n = self.length(_INT32)
        if n is None:
            raise ProtocolError(f"null {what} array at {self.pos}")
        return n

    def tags(self) -> None:
        """Skip a tagged-field section: none of the tags these messages define is needed here."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                size = self.uvarint()
                if size > len(self.view) - self.pos:
                    raise ProtocolError(f"tagged field of {size} bytes at {self.pos} runs past the body")
                self.pos += size

    def end(self) -> None:
        if self.pos != len(self.view):
            raise ProtocolError(f"{len(self.view) - self.pos} bytes left over after the last field")


def decode_request_header(frame: Buffer, *, flexible: bool) -> RequestHeader:
    """Request header v1, or v2 when ``flexible`` (the API's flexible versions), at the start of
    ``frame`` (after the size prefix). Kafka-python's own header decoder copies the whole frame."""
    reader = _In(frame, flexible=False)  # client_id is a classic string even in v2 (KIP-482)
    try:
        api_key, api_version, correlation_id = reader.fixed(_HEADER_PREFIX)
        client_id = reader.string()
        reader.flexible = flexible
        reader.tags()
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed request header: {exc}") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id, reader.pos)


def decode_produce_request(body: Buffer, version: int) -> ProduceRequestData:
    """Body of a Produce request (after the request header), versions 3..12. Records are views
    into ``body``; a null record set is ``None``."""
    _check_version("Produce", version, PRODUCE_VERSIONS)
    reader = _In(body, flexible=version >= PRODUCE_FIRST_FLEXIBLE)
    try:
        transactional_id = reader.string()
        acks, timeout_ms = reader.fixed(_ACKS_TIMEOUT)
        partitions = []
        for _ in range(reader.count("topics")):
            topic = reader.name("topic name")
            for _ in range(reader.count("partitions")):
                (index,) = reader.fixed(_INT32)
                n = reader.length(_INT32)
                partitions.append(ProducePartition(topic, index, None if n is None else reader.take(n)))
                reader.tags()
            reader.tags()
        reader.tags()
        reader.end()
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed Produce request v{version} at byte {reader.pos}: {exc}") from exc
    return ProduceRequestData(transactional_id, acks, timeout_ms, partitions)


def decode_fetch_response(body: Buffer, version: int) -> FetchResponseData:
    """Body of a Fetch response (after the response header), versions 4..12. Records are views
    into ``body``, never copies."""
    _check_version("Fetch", version, FETCH_VERSIONS)
    reader = _In(body, flexible=version >= FETCH_FIRST_FLEXIBLE)
    log_start, preferred_replica = version >= FETCH_LOG_START_SINCE, version >= FETCH_PREFERRED_REPLICA_SINCE
    partition_layout = _FETCH_PARTITION[log_start]
    try:
        if version >= FETCH_SESSIONS_SINCE:
            throttle_time_ms, error_code, session_id = reader.fixed(_FETCH_TOP[True])
        else:
            (throttle_time_ms,), error_code, session_id = reader.fixed(_FETCH_TOP[False]), 0, 0
        partitions = []
        for _ in range(reader.count("topics")):
            topic = reader.name("topic name")
            for _ in range(reader.count("partitions")):
                fixed = reader.fixed(partition_layout)
                aborted = _decode_aborted(reader)
                if preferred_replica:
                    reader.fixed(_INT32)
                n = reader.length(_INT32)
                records = _EMPTY if n is None else reader.take(n)
                reader.tags()
                partition, error, high_watermark, last_stable = fixed[:4]
                start = fixed[4] if log_start else -1
                partitions.append(FetchedPartition(topic, partition, error, high_watermark, last_stable, start,
                                                   aborted, records))
            reader.tags()
        reader.tags()
        reader.end()
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed Fetch response v{version} at byte {reader.pos}: {exc}") from exc
    return FetchResponseData(throttle_time_ms, error_code, session_id, partitions)


def _decode_aborted(reader: _In) -> tuple[tuple[int, int], ...] | None:
    n = reader.length(_INT32)
    if n is None:
        return None
    aborted = []
    for _ in range(n):
        aborted.append(reader.fixed(_ABORTED))
        reader.tags()
    return tuple(aborted)


def decode_plain_produce_response(body: Buffer, version: int) -> ProduceResponseData | None:
    """A flexible Produce response (v9+, after its header) in its usual shape, read with one
    ``struct`` call per topic; ``None`` for any other: an earlier version, a partition with
    record errors, an error message or tagged fields (v10+'s leader hints come with errors),
    a count or name too long for a one-byte length, or bytes that do not parse. kafka-python's
    decoder reads those, and reports what is wrong with a malformed one.

    Nearly every answer a mirror gets is plain. A four-partition answer and the producer's
    table of it cost 3.4 us this way, 6 with kafka-python's generated decoder and its objects
    (docs/performance.md, "Produce answers read in one call")."""
    if version < PRODUCE_FIRST_FLEXIBLE:
        return None
    view = memoryview(body)
    size = len(view)
    partitions: list[ProducedPartition] = []
    try:
        topics, pos = view[0] - 1, 1
        if not 0 <= topics < 0x7F:
            return None
        for _ in range(topics):
            name_size = view[pos] - 1
            name_end = pos + 1 + name_size
            count = view[name_end] - 1
            if not (0 <= name_size < 0x7F and 0 <= count < 0x7F):
                return None
            name = str(view[pos + 1:name_end], "utf-8")
            pos, end = name_end + 1, name_end + 1 + _PLAIN_PRODUCED.size * count
            if end > size:
                return None
            for fields in _PLAIN_PRODUCED.iter_unpack(view[pos:end]):
                if fields[5:] != _PLAIN_TAIL:
                    return None
                partitions.append(ProducedPartition(name, fields[0], fields[1], fields[2], fields[3], fields[4]))
            if view[end] != 0:  # the topic's tagged fields
                return None
            pos = end + 1
        throttle_time_ms = _INT32.unpack_from(view, pos)[0]
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    if pos + 5 != size or view[pos + 4] != 0:  # the response's tagged fields, then nothing
        return None
    return ProduceResponseData(partitions, throttle_time_ms)
