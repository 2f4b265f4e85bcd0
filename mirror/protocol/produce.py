"""Produce (api key 0), encoded by hand: the client's request and the broker's answer.

ProduceRequest, v3..12, flexible from v9 (v4-v8 change only what a broker may answer;
v10-v12 only add response fields)::

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

The client encodes requests and reads plain responses (:func:`decode_plain_produce_response`;
any other it leaves to kafka-python); the broker decodes requests and encodes responses.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Sequence

from .errors import ProtocolError
from .primitives import (
    DECODE_ERRORS, ENCODE_ERRORS, INT32, INT64, Buffer, Reader, Writer, begin_request,
    check_version, consecutive_runs,
)


PRODUCE_API_KEY = 0
PRODUCE_VERSIONS = range(3, 13)
PRODUCE_FIRST_FLEXIBLE = 9
PRODUCE_LOG_START_SINCE = 5
PRODUCE_RECORD_ERRORS_SINCE = 8  # record_errors and error_message (KIP-467)

_ACKS_TIMEOUT = struct.Struct(">hi")
_PRODUCED = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_PLAIN_PRODUCED = struct.Struct(">ihqqqBBB")
"""A flexible Produce response's partition with nothing optional in it: partition_index,
error_code, base_offset, log_append_time_ms, log_start_offset, then three one-byte fields:
record_errors (1: empty), error_message (0: null), tagged fields (0: none)."""
_PLAIN_TAIL = (1, 0, 0)


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


def is_flexible_produce(version: int) -> bool:
    """Whether Produce ``version`` uses the compact encodings and request header v2 (KIP-482)."""
    return version >= PRODUCE_FIRST_FLEXIBLE


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
    check_version("Produce", version, PRODUCE_VERSIONS)
    topics: dict[str, list[ProducePartition]] = {}
    for part in partitions:
        topics.setdefault(part.topic, []).append(part)
    try:
        out = begin_request(PRODUCE_API_KEY, version, correlation_id, client_id, is_flexible_produce(version))
        out.string(transactional_id)
        out.buf += _ACKS_TIMEOUT.pack(acks, timeout_ms)

        def partition(part: ProducePartition) -> None:
            out.buf += INT32.pack(part.partition)
            out.borrowed(part.records)

        out.topics(list(topics.items()), partition)
        out.tags()
    except ENCODE_ERRORS as exc:
        raise ProtocolError(f"cannot encode Produce v{version}: {exc}") from exc
    return out.frame()


def decode_produce_request(body: Buffer, version: int) -> ProduceRequestData:
    """Body of a Produce request (after the request header), versions 3..12. Records are views
    into ``body``; a null record set is ``None``."""
    check_version("Produce", version, PRODUCE_VERSIONS)
    reader = Reader(body, flexible=is_flexible_produce(version))
    try:
        transactional_id = reader.string()
        acks, timeout_ms = reader.fixed(_ACKS_TIMEOUT)

        def partition(topic: str) -> ProducePartition:
            (index,) = reader.fixed(INT32)
            n = reader.length(INT32)
            return ProducePartition(topic, index, None if n is None else reader.take(n))

        partitions = reader.topics(partition)
        reader.end()
    except DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed Produce request v{version} at byte {reader.pos}: {exc}") from exc
    return ProduceRequestData(transactional_id, acks, timeout_ms, partitions)


def encode_produce_response(response: ProduceResponseData, *, version: int, correlation_id: int) -> list[bytes]:
    """Framed (size prefix + response header v0, or v1 from v9) + body, versions 3..12, as a
    one-piece list. Consecutive partitions of one topic share a topic entry. Kafka-python's
    encoder builds an object per partition and costs tens of microseconds per request, which at
    16 KiB batches was a tenth of the broker's time per batch."""
    check_version("Produce", version, PRODUCE_VERSIONS)
    out = Writer(is_flexible_produce(version))
    log_start, errors = version >= PRODUCE_LOG_START_SINCE, version >= PRODUCE_RECORD_ERRORS_SINCE
    try:
        out.buf += INT32.pack(correlation_id)
        out.tags()

        def partition(p: ProducedPartition) -> None:
            out.buf += _PRODUCED.pack(p.partition, p.error_code, p.base_offset, p.log_append_time_ms)
            if log_start:
                out.buf += INT64.pack(p.log_start_offset)
            if errors:
                out.length(0, INT32)  # record_errors: none (we refuse whole batches)
                out.string(p.error_message)

        out.topics(consecutive_runs(response.partitions), partition)
        out.buf += INT32.pack(response.throttle_time_ms)
        out.tags()
    except ENCODE_ERRORS as exc:
        raise ProtocolError(f"cannot encode Produce response v{version}: {exc}") from exc
    return out.frame()


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
        throttle_time_ms = INT32.unpack_from(view, pos)[0]
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    if pos + 5 != size or view[pos + 4] != 0:  # the response's tagged fields, then nothing
        return None
    return ProduceResponseData(partitions, throttle_time_ms)
