"""Record batch format v2 (magic 2, KIP-98; Kafka's ``DefaultRecordBatch``).

Batch header, 61 bytes, big-endian::

    offset  size  field
     0      8     baseOffset            int64   offset of the first record; the broker assigns it (KIP-31)
     8      4     batchLength           int32   bytes after this field
    12      4     partitionLeaderEpoch  int32   set by the broker; outside the CRC so it can be set without one
    16      1     magic                 int8    2
    17      4     crc                   uint32  CRC-32C of bytes 21..end (attributes through the last record)
    21      2     attributes            int16   see the masks below
    23      4     lastOffsetDelta       int32   last record's offset minus baseOffset
    27      8     baseTimestamp         int64   first record's timestamp (the delete horizon when bit 6 is set)
    35      8     maxTimestamp          int64   max record timestamp, or the broker's time under LogAppendTime
    43      8     producerId            int64   -1 when not idempotent
    51      2     producerEpoch         int16
    53      4     baseSequence          int32
    57      4     recordCount           int32
    61      ...   records               possibly compressed as one block

Each record::

    length varint | attributes int8 (unused, 0) | timestampDelta varlong | offsetDelta varint
    | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value
    | headerCount varint | [headerKeyLength varint | headerKey utf-8 | headerValueLength varint | value]

Attribute bits: 0-2 codec, 3 timestamp type (1 = LogAppendTime), 4 transactional, 5 control,
6 delete horizon set (KIP-534), and bit 14 is kmirror's no-keys flag (seed 000, see
``docs/formats.md``): set by our builders when no record has a key. Kafka masks every
attribute it reads, so the bit is ignored by Java, librdkafka and kafka-python alike, and a
broker that recompresses drops it, which correctly degrades to "unknown".
"""

from __future__ import annotations

import struct
from typing import Iterator, NamedTuple, Sequence

import crc32c as _crc32c

from ._batch import Batch
from ._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from ._errors import CorruptBatchError, InvalidRecordError, UnsupportedCodecError
from ._record import Record, TimestampType, check_headers, check_int
from ._varint import read_varint, write_varint

__all__ = ["V2Batch", "V2Header", "check_v2", "build_v2", "retain_v2", "empty_v2", "NO_PARTITION_LEADER_EPOCH"]

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61, Kafka's RECORD_BATCH_OVERHEAD
_HEADER_READ = struct.Struct(">qiibIHiqqqhii")
"""HEADER as :meth:`V2Batch.header` reads it: attributes unsigned, as :attr:`V2Batch.attributes` gives them."""

BASE_OFFSET = 0
LENGTH = 8
PARTITION_LEADER_EPOCH = 12
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORD_COUNT = 57
RECORDS = 61

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
NO_KEYS_MASK = 0x4000

NO_PARTITION_LEADER_EPOCH = -1
"""Kafka's ``RecordBatch.NO_PARTITION_LEADER_EPOCH``: what a producer sends; the leader fills it in."""

INT64 = struct.Struct(">q")
INT32 = struct.Struct(">i")
INT16 = struct.Struct(">h")
UINT32 = struct.Struct(">I")
PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
_INT64_AT, _INT32_AT, _UINT16_AT = INT64.unpack_from, INT32.unpack_from, struct.Struct(">H").unpack_from
_CODECS = {codec.value: codec for codec in Compression}


def batch_crc(buf: memoryview | bytearray | bytes) -> int:
    """CRC-32C over attributes..end, as stored at :data:`CRC`."""
    return _crc32c.crc32c(memoryview(buf)[ATTRIBUTES:])


class V2Header(NamedTuple):
    """Every header field of a v2 batch, read with one unpack (:meth:`V2Batch.header`).

    A snapshot for code that reads many fields of bytes that no longer change, such as a
    broker checking a produced batch: :class:`V2Batch`'s properties read the bytes again
    on every access (one unpack each), so they see in-place patches and this does not.
    """

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @classmethod
    def read(cls, raw: memoryview | bytearray | bytes) -> V2Header:
        """The header at the start of ``raw``, in one unpack (nothing checked)."""
        return cls._make(_HEADER_READ.unpack_from(raw))

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_contiguous_offsets(self) -> bool:
        """No offset hole (none compacted away): offset deltas strictly increase (Kafka requires
        it), so n records spanning lastOffsetDelta + 1 offsets leave none."""
        return self.record_count == self.last_offset_delta + 1

    @property
    def has_no_keys_flag(self) -> bool:
        return bool(self.attributes & NO_KEYS_MASK)

    @property
    def codec_id(self) -> int:
        """The compression codec's id, as :class:`~kcodecs.Compression` values are (not checked)."""
        return self.attributes & CODEC_MASK


def check_v2(raw: memoryview, position: int, header: V2Header | None = None) -> V2Header:
    """:meth:`V2Batch.checked_header` of the one v2 batch ``raw`` (its exact bytes, found at
    ``position``, which its errors name), without building the batch, for a caller that walks
    many (:func:`~kcodecs.iter_v2`); ``header`` if already read from ``raw`` (:meth:`V2Header.read`)."""
    if header is None:
        header = V2Header.read(raw)
    stored, count, last_delta = header.crc, header.record_count, header.last_offset_delta
    if header.batch_length + 12 != len(raw):
        reason = f"batchLength {header.batch_length} disagrees with the {len(raw)} bytes present"
    elif stored != (computed := batch_crc(raw)):
        reason = f"CRC-32C mismatch: stored {stored:#010x}, computed {computed:#010x}"
    elif header.attributes & CODEC_MASK not in _CODECS:
        raise _unknown_codec(header.attributes, position)
    elif count < 0 or last_delta < 0:
        reason = f"negative recordCount {count} or lastOffsetDelta {last_delta}"
    elif count > last_delta + 1:
        reason = f"recordCount {count} exceeds lastOffsetDelta + 1 = {last_delta + 1}"
    else:
        return header
    raise CorruptBatchError(reason, position=position, offset=header.base_offset)


def _unknown_codec(attributes: int, position: int) -> UnsupportedCodecError:
    return UnsupportedCodecError(f"unknown compression codec id {attributes & CODEC_MASK} in batch at byte {position}")


class V2Batch(Batch):
    """A magic-2 record batch read in place from its bytes."""

    __slots__ = ()

    magic = MAGIC

    # Each property reads its field with one unpack and no other Python call: routing asks
    # a dozen of them of every batch, and a helper method per read was a tenth of routing.

    def header(self) -> V2Header:
        """All header fields as they are now, in one read (see :class:`V2Header`)."""
        return V2Header.read(self.raw)

    @property
    def attributes(self) -> int:
        return _UINT16_AT(self.raw, ATTRIBUTES)[0]

    @property
    def base_offset(self) -> int:
        return _INT64_AT(self.raw, BASE_OFFSET)[0]

    @property
    def last_offset_delta(self) -> int:
        return _INT32_AT(self.raw, LAST_OFFSET_DELTA)[0]

    @property
    def last_offset(self) -> int:
        return _INT64_AT(self.raw, BASE_OFFSET)[0] + _INT32_AT(self.raw, LAST_OFFSET_DELTA)[0]

    @property
    def partition_leader_epoch(self) -> int:
        return _INT32_AT(self.raw, PARTITION_LEADER_EPOCH)[0]

    @property
    def crc(self) -> int:
        return UINT32.unpack_from(self.raw, CRC)[0]

    @property
    def compression(self) -> Compression:
        return self._codec(_UINT16_AT(self.raw, ATTRIBUTES)[0])

    def _codec(self, attributes: int) -> Compression:
        # A dict, not Compression(codec): the Enum call is far slower, on every routed batch
        # (docs/performance.md, "Small costs behind choices in the code").
        known = _CODECS.get(attributes & CODEC_MASK)
        if known is None:
            raise _unknown_codec(attributes, self.position)
        return known

    @property
    def timestamp_type(self) -> TimestampType:
        if _UINT16_AT(self.raw, ATTRIBUTES)[0] & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def base_timestamp(self) -> int:
        return _INT64_AT(self.raw, BASE_TIMESTAMP)[0]

    @property
    def max_timestamp(self) -> int:
        return _INT64_AT(self.raw, MAX_TIMESTAMP)[0]

    @property
    def is_control(self) -> bool:
        return bool(_UINT16_AT(self.raw, ATTRIBUTES)[0] & CONTROL_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(_UINT16_AT(self.raw, ATTRIBUTES)[0] & TRANSACTIONAL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(_UINT16_AT(self.raw, ATTRIBUTES)[0] & DELETE_HORIZON_MASK)

    @property
    def has_no_keys_flag(self) -> bool:
        return bool(_UINT16_AT(self.raw, ATTRIBUTES)[0] & NO_KEYS_MASK)

    @property
    def producer_id(self) -> int:
        return _INT64_AT(self.raw, PRODUCER_ID)[0]

    @property
    def producer_epoch(self) -> int:
        return INT16.unpack_from(self.raw, PRODUCER_EPOCH)[0]

    @property
    def base_sequence(self) -> int:
        return _INT32_AT(self.raw, BASE_SEQUENCE)[0]

    @property
    def record_count(self) -> int:
        return _INT32_AT(self.raw, RECORD_COUNT)[0]

    def _corrupt(self, reason: str) -> CorruptBatchError:
        return CorruptBatchError(reason, position=self.position, offset=self.base_offset)

    def validate(self, *, deep: bool = False, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> None:
        header = self.checked_header()
        if deep:
            previous, last_delta = -1, header.last_offset_delta
            for record in self.records(max_size=max_size):
                delta = record.offset - self.base_offset
                if delta <= previous or delta > last_delta:
                    raise self._corrupt(f"offset delta {delta} out of order or past lastOffsetDelta {last_delta}")
                previous = delta

    def checked_header(self) -> V2Header:
        """What :meth:`validate` checks short of decompressing (length, CRC, codec, counts), and
        the header it read: a router then needs no other read of it."""
        return check_v2(self.raw, self.position)

    def records(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        return self._decoded(_decode_records, max_size, self.base_offset, self.base_timestamp, self._append_time)

    def keys(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[bytes | None]:
        # Values and headers are skipped by their lengths, not copied: for an inspected batch
        # the keys are all routing reads, and copying values was most of the decoding time.
        return self._decoded(_decode_keys, max_size, None)

    def offsets_and_keys(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[tuple[int, bytes | None]]:
        """``(offset, key)`` of each record, values skipped as in :meth:`keys`: what a log
        cleaner's offset map needs (a compacted batch's offsets have holes)."""
        return self._decoded(_decode_keys, max_size, self.base_offset)

    def record_contents(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
                        ) -> Iterator[tuple[int, int, bytes | None, memoryview]]:
        """``(offset, timestamp, key, content)`` of each record; ``content`` is the record's
        bytes from its key's length on (key, value and headers, as the producer encoded them),
        which every copy of the record shares whatever batch holds it. For comparing records
        by hash without decoding their values and headers: only each record's framing and key
        are checked (as :meth:`keys` does), the rest is taken as bytes."""
        return self._decoded(_record_contents, max_size, self.base_offset, self.base_timestamp, self._append_time)

    @property
    def _append_time(self) -> int | None:
        """The time every record takes under LogAppendTime (the batch's max timestamp), else None."""
        return self.max_timestamp if self.timestamp_type is TimestampType.LOG_APPEND_TIME else None

    def _decoded(self, decode, max_size: int, *args) -> Iterator:
        """``decode(payload, record_count, *args)`` over the decompressed records, its
        :class:`CorruptBatchError` said of this batch (position and base offset)."""
        payload = self._payload(max_size)
        try:
            yield from decode(payload, self.record_count, *args)
        except CorruptBatchError as exc:
            raise self._corrupt(exc.reason) from exc

    def _payload(self, max_size: int) -> memoryview:
        payload = self.raw[RECORDS:]
        codec = self.compression
        if codec is Compression.NONE:
            return payload
        try:
            return memoryview(decompress(codec, payload, magic=MAGIC, max_size=max_size))
        except CorruptBatchError as exc:
            raise exc.at(self.position, self.base_offset)

    def has_contiguous_offsets(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bool:
        # Offset deltas strictly increase (Kafka requires it), so n records spanning
        # lastOffsetDelta + 1 offsets leave no hole: the header alone decides.
        return self.record_count == self.last_offset_delta + 1


def _decode_records(
    data: memoryview, count: int, base_offset: int, base_timestamp: int, append_time: int | None
) -> Iterator[Record]:
    """Decode ``count`` records; the body must be consumed exactly (Kafka's "records still remaining")."""
    pos, end = 0, len(data)
    try:
        for _ in range(count):
            length, pos = read_varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise CorruptBatchError(f"record length {length} runs past the end of the batch")
            pos += 1  # attributes: unused in v2
            ts_delta, pos = read_varint(data, pos)
            offset_delta, pos = read_varint(data, pos)
            key, pos = _read_bytes(data, pos, record_end)
            value, pos = _read_bytes(data, pos, record_end)
            header_count, pos = read_varint(data, pos)
            if header_count < 0:
                raise CorruptBatchError(f"negative header count {header_count}")
            headers = []
            for _ in range(header_count):
                name, pos = _read_bytes(data, pos, record_end)
                if name is None:
                    raise CorruptBatchError("null header key")
                header_value, pos = _read_bytes(data, pos, record_end)
                headers.append((name.decode("utf-8"), header_value))
            if pos != record_end:
                raise CorruptBatchError(f"record declares {length} bytes but its fields use {length + pos - record_end}")
            timestamp = append_time if append_time is not None else base_timestamp + ts_delta
            yield Record(key=key, value=value, timestamp=timestamp, headers=headers, offset=base_offset + offset_delta)
    except UnicodeDecodeError as exc:
        raise CorruptBatchError(f"header key is not UTF-8: {exc}") from exc
    if pos != end:
        raise CorruptBatchError(f"{end - pos} bytes left over after {count} records")


def record_content(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    """A record's key, value and headers as format v2 encodes them (varint lengths, -1 for
    null): the ``content`` :meth:`V2Batch.record_contents` hands out, made from a record
    another client decoded."""
    out = bytearray()
    for data in (key, value):
        _write_bytes(out, data)
    write_varint(out, len(headers))
    for name, header_value in headers:
        _write_bytes(out, name.encode())
        _write_bytes(out, header_value)
    return bytes(out)


def _record_contents(data: memoryview, count: int, base_offset: int, base_timestamp: int,
                     append_time: int | None) -> Iterator[tuple[int, int, bytes | None, memoryview]]:
    pos, end = 0, len(data)
    for _ in range(count):
        length, pos = read_varint(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptBatchError(f"record length {length} runs past the end of the batch")
        pos += 1  # attributes
        # One-byte varints (deltas under 64, short keys) read inline: this loop runs per record.
        if pos < end and data[pos] < 0x80:
            ts_delta, pos = (data[pos] >> 1) ^ -(data[pos] & 1), pos + 1
        else:
            ts_delta, pos = read_varint(data, pos)
        if pos < end and data[pos] < 0x80:
            offset_delta, pos = (data[pos] >> 1) ^ -(data[pos] & 1), pos + 1
        else:
            offset_delta, pos = read_varint(data, pos)
        key, _ = _read_bytes(data, pos, record_end)
        yield (base_offset + offset_delta, append_time if append_time is not None else base_timestamp + ts_delta,
               key, data[pos:record_end])
        pos = record_end
    if pos != end:
        raise CorruptBatchError(f"{end - pos} bytes left over after {count} records")


def _decode_keys(data: memoryview, count: int, base_offset: int | None) -> Iterator:
    """The keys of ``count`` records, every length checked against its record and the body;
    with a ``base_offset``, ``(offset, key)`` pairs."""
    pos, end = 0, len(data)
    for _ in range(count):
        length, pos = read_varint(data, pos)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptBatchError(f"record length {length} runs past the end of the batch")
        _, pos = read_varint(data, pos + 1)  # attributes, then timestamp delta
        delta, pos = read_varint(data, pos)
        key, pos = _read_bytes(data, pos, record_end)
        pos = _skip_bytes(data, pos, record_end)  # value
        header_count, pos = read_varint(data, pos)
        if header_count < 0:
            raise CorruptBatchError(f"negative header count {header_count}")
        for _ in range(header_count):
            pos = _skip_bytes(data, pos, record_end, nullable=False)  # name
            pos = _skip_bytes(data, pos, record_end)  # value
        if pos != record_end:
            raise CorruptBatchError(f"record declares {length} bytes but its fields use {length + pos - record_end}")
        yield key if base_offset is None else (base_offset + delta, key)
    if pos != end:
        raise CorruptBatchError(f"{end - pos} bytes left over after {count} records")


def _skip_bytes(data: memoryview, pos: int, limit: int, *, nullable: bool = True) -> int:
    length, pos = read_varint(data, pos)
    if length < -1 or (length == -1 and not nullable):
        raise CorruptBatchError(f"invalid field length {length}" if length < -1 else "null header key")
    if pos + max(length, 0) > limit:
        raise CorruptBatchError(f"field of {length} bytes runs past its record")
    return pos + max(length, 0)


def _read_bytes(data: memoryview, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = read_varint(data, pos)
    if length < 0:
        if length != -1:
            raise CorruptBatchError(f"invalid field length {length}")
        return None, pos
    if pos + length > limit:
        raise CorruptBatchError(f"field of {length} bytes runs past its record")
    return bytes(data[pos : pos + length]), pos + length


def encode_records(records: Sequence[Record], base_timestamp: int, base_offset: int | None = None) -> bytearray:
    """The uncompressed record section: offset deltas 0..n-1, or each record's offset minus
    ``base_offset`` when one is given (a cleaned batch keeps its records' offsets)."""
    out = bytearray()
    body = bytearray()
    for index, record in enumerate(records):
        body.clear()
        body.append(0)
        write_varint(body, record.timestamp - base_timestamp)
        write_varint(body, index if base_offset is None else record.offset - base_offset)
        _write_bytes(body, record.key)
        _write_bytes(body, record.value)
        write_varint(body, len(record.headers))
        for name, header_value in record.headers:
            _write_bytes(body, name.encode("utf-8"))
            _write_bytes(body, header_value)
        write_varint(out, len(body))
        out += body
    return out


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def build_v2(
    records: Sequence[Record],
    *,
    compression: Compression,
    base_offset: int,
    timestamp_type: TimestampType,
    max_timestamp: int | None,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    control: bool,
    partition_leader_epoch: int,
    mark_no_keys: bool,
) -> bytes:
    """Build one v2 batch; see :func:`kcodecs.build_batch` for the parameters."""
    base_timestamp = records[0].timestamp
    for record in records:
        check_headers(record.headers)
        # Timestamps travel as varlong deltas from the first one.
        check_int(record.timestamp, 64, "timestamp")
        check_int(record.timestamp - base_timestamp, 64, f"timestamp delta from the first timestamp {base_timestamp}")
    if max_timestamp is None:
        max_timestamp = max(record.timestamp for record in records)
    body = encode_records(records, base_timestamp)
    if compression is not Compression.NONE:
        body = compress(compression, body, magic=MAGIC)
    attributes = int(compression)
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    if mark_no_keys and all(record.key is None for record in records):
        attributes |= NO_KEYS_MASK
    return _pack(base_offset, partition_leader_epoch, attributes, len(records) - 1, base_timestamp, max_timestamp,
                 producer_id, producer_epoch, base_sequence, len(records), body)


def retain_v2(batch: V2Batch, records: Sequence[Record], *, delete_horizon_ms: int | None = None) -> bytes:
    """``batch`` holding only ``records`` (some of its own, in order): Kafka's
    ``MemoryRecords.buildRetainedRecordsInto``, what the log cleaner writes.

    Everything the header says about the producer and the offsets stays: base offset,
    lastOffsetDelta (so the producer's last sequence is unchanged), producer id, epoch,
    base sequence, leader epoch, codec, timestamp type, transactional and control bits, and
    the no-keys flag. Records keep their offsets, so a cleaned batch may have holes.
    ``delete_horizon_ms`` sets attribute bit 6 (KIP-534) and stores the horizon as the
    base timestamp, the record timestamp deltas counted from it; a batch that already has a
    horizon keeps it. Under LogAppendTime the max timestamp stays the broker's time; under
    CreateTime it is the retained records' largest, as Kafka's builder computes it.
    """
    if not records:
        raise InvalidRecordError("a retained batch needs a record; use empty_v2 to keep only the header")
    offsets = [record.offset for record in records]
    if offsets != sorted(set(offsets)) or offsets[0] < batch.base_offset or offsets[-1] > batch.last_offset:
        raise InvalidRecordError(f"retained offsets must increase within {batch.base_offset}..{batch.last_offset}")
    attributes = batch.attributes
    if batch.has_delete_horizon:
        delete_horizon_ms = batch.base_timestamp
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp
    for record in records:
        check_headers(record.headers)
        check_int(record.timestamp - base_timestamp, 64, f"timestamp delta from {base_timestamp}")
    if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
        max_timestamp = batch.max_timestamp
    else:
        max_timestamp = max(record.timestamp for record in records)
    body: bytes | bytearray = encode_records(records, base_timestamp, batch.base_offset)
    if batch.compression is not Compression.NONE:
        body = compress(batch.compression, body, magic=MAGIC)
    return _pack_like(batch, attributes, base_timestamp, max_timestamp, len(records), body)


def empty_v2(batch: V2Batch) -> bytes:
    """Only ``batch``'s header, with no records: Kafka's ``DefaultRecordBatch.writeEmptyHeader``.

    The cleaner keeps this of a producer's last batch when all its records are gone, so the
    producer's last sequence and epoch survive in the log (and a reload of producer state
    from it). Uncompressed, no delete horizon, both timestamps the batch's max timestamp.
    """
    attributes = batch.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return _pack_like(batch, attributes, batch.max_timestamp, batch.max_timestamp, 0, b"")


def _pack_like(batch: V2Batch, attributes: int, base_timestamp: int, max_timestamp: int, count: int,
               body: bytes | bytearray) -> bytes:
    """A batch with ``batch``'s offsets, leader epoch and producer fields around ``body``."""
    return _pack(batch.base_offset, batch.partition_leader_epoch, attributes, batch.last_offset_delta, base_timestamp,
                 max_timestamp, batch.producer_id, batch.producer_epoch, batch.base_sequence, count, body)


def _pack(base_offset: int, partition_leader_epoch: int, attributes: int, last_offset_delta: int, base_timestamp: int,
          max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int, count: int,
          body: bytes | bytearray) -> bytes:
    """Header, ``body`` (the record section as stored) and the CRC over both."""
    return bytes(pack_writable(base_offset, partition_leader_epoch, attributes, last_offset_delta, base_timestamp,
                               max_timestamp, producer_id, producer_epoch, base_sequence, count, body))


def pack_writable(base_offset: int, partition_leader_epoch: int, attributes: int, last_offset_delta: int,
                  base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int,
                  count: int, body: bytes | bytearray) -> bytearray:
    """:func:`_pack`'s batch as a ``bytearray``, for a caller that rewrites it in place next."""
    out = bytearray(HEADER_SIZE + len(body))
    try:
        HEADER.pack_into(
            out, 0, base_offset, len(out) - 12, partition_leader_epoch, MAGIC, 0, _signed16(attributes),
            last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count,
        )
    except struct.error as exc:
        raise InvalidRecordError(f"a header field is out of range: {exc}") from exc
    out[RECORDS:] = body
    UINT32.pack_into(out, CRC, batch_crc(out))
    return out


def _signed16(value: int) -> int:
    return value - 0x10000 if value & 0x8000 else value


def write_crc(buf: memoryview | bytearray) -> None:
    """Recompute and store the CRC after a patch inside the CRC's coverage."""
    UINT32.pack_into(buf, CRC, batch_crc(buf))

