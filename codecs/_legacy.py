"""Message sets, formats v0 and v1 (magic 0/1; KIP-31 and KIP-32; Kafka's ``LegacyRecord``).

Each entry in the log is one message, big-endian::

    offset  size  field
     0      8     offset        int64   plain: the message's offset; compressed wrapper: its LAST inner offset
     8      4     messageSize   int32   bytes after this field
    12      4     crc           uint32  CRC-32 (zlib) of bytes 16..end
    16      1     magic         int8    0 or 1
    17      1     attributes    int8    bits 0-2 codec (zstd not allowed), bit 3 LogAppendTime (v1 only)
    18      8     timestamp     int64   v1 only; a wrapper holds the max inner timestamp or the broker's time
    18|26   4     keyLength     int32   -1 = null
            ...   key
            4     valueLength   int32   -1 = null
            ...   value         for a wrapper: the compressed inner message set

A compressed wrapper carries a whole inner message set as its value. In v1 the inner
offsets are relative (0..n-1) and the absolute offset of inner message i is
``wrapper.offset - inner[-1].offset + inner[i].offset`` (KIP-31), so a broker can assign
offsets by patching only the wrapper. In v0 the inner offsets are absolute, which is why v0
brokers had to recompress (KAFKA-527). Under LogAppendTime every inner message takes the
wrapper's timestamp.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator, Sequence

from ._batch import LOG_OVERHEAD, Batch
from ._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from ._errors import CorruptBatchError, InvalidRecordError, UnsupportedCodecError
from ._record import NO_TIMESTAMP, Record, TimestampType

__all__ = ["LegacyBatch", "build_legacy", "RECORD_OVERHEAD"]

OFFSET = 0
SIZE = 8
CRC = 12
MAGIC = 16
ATTRIBUTES = 17
TIMESTAMP = 18
KEY_LENGTH = {0: 18, 1: 26}
RECORD_OVERHEAD = {0: 14, 1: 22}
"""Smallest ``messageSize`` per magic: crc, magic, attributes, [timestamp,] key and value lengths."""

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

INT64 = struct.Struct(">q")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
_PREFIX = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes


def message_crc(buf: memoryview | bytearray | bytes) -> int:
    """CRC-32 over magic..end, as stored at :data:`CRC`."""
    return zlib.crc32(memoryview(buf)[MAGIC:])


class LegacyBatch(Batch):
    """One v0/v1 message: a plain message, or a compressed wrapper around many."""

    __slots__ = ()

    @property
    def magic(self) -> int:
        return self.raw[MAGIC]

    @property
    def attributes(self) -> int:
        return self.raw[ATTRIBUTES]

    @property
    def wrapper_offset(self) -> int:
        return INT64.unpack_from(self.raw, OFFSET)[0]

    @property
    def last_offset(self) -> int:
        return self.wrapper_offset

    @property
    def base_offset(self) -> int:
        if self.compression is Compression.NONE:
            return self.wrapper_offset
        return next(iter(self.records())).offset

    @property
    def crc(self) -> int:
        return UINT32.unpack_from(self.raw, CRC)[0]

    @property
    def compression(self) -> Compression:
        codec = self.attributes & CODEC_MASK
        if codec > Compression.LZ4:
            raise UnsupportedCodecError(f"codec id {codec} is not valid in a magic {self.magic} message at byte {self.position}")
        return Compression(codec)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return TimestampType.LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else TimestampType.CREATE_TIME

    @property
    def max_timestamp(self) -> int:
        return INT64.unpack_from(self.raw, TIMESTAMP)[0] if self.magic == 1 else NO_TIMESTAMP

    is_control = False
    is_transactional = False
    producer_id = -1
    has_no_keys_flag = False

    @property
    def record_count(self) -> int | None:
        return 1 if self.compression is Compression.NONE else None

    def _corrupt(self, reason: str) -> CorruptBatchError:
        return CorruptBatchError(reason, position=self.position, offset=self.wrapper_offset)

    def _key_value(self) -> tuple[bytes | None, bytes | None]:
        try:
            return _key_value(self.raw, self.magic)
        except CorruptBatchError as exc:
            raise exc.at(self.position, self.wrapper_offset)

    def _inner_key_value(self, message: "LegacyBatch") -> tuple[bytes | None, bytes | None]:
        """An inner message's key and value; errors name the wrapper (an inner position means nothing outside)."""
        try:
            return _key_value(message.raw, message.magic)
        except CorruptBatchError as exc:
            raise self._corrupt(f"inner message at relative byte {message.position}: {exc.reason}") from exc

    def validate(self, *, deep: bool = False, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> None:
        stored, computed = self.crc, message_crc(self.raw)
        if stored != computed:
            raise self._corrupt(f"CRC-32 mismatch: stored {stored:#010x}, computed {computed:#010x}")
        self._key_value()
        if self.compression is not Compression.NONE and deep:
            for inner in self._inner_messages(max_size):
                if inner.crc != message_crc(inner.raw):
                    raise self._corrupt(f"inner message at relative byte {inner.position} fails its CRC-32")
                self._inner_key_value(inner)

    def records(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        if self.compression is Compression.NONE:
            key, value = self._key_value()
            yield Record(key=key, value=value, timestamp=self.max_timestamp, headers=[], offset=self.wrapper_offset)
            return
        inner = self._inner_messages(max_size)
        # v1 inner offsets are relative to the last one, which the wrapper's offset names (KIP-31).
        # Like Kafka's DeepRecordsIterator, a negative base (a producer-side wrapper whose offset
        # was never assigned) leaves the inner offsets as written.
        shift = self.wrapper_offset - inner[-1].wrapper_offset if self.magic == 1 else 0
        if shift < 0:
            shift = 0
        append_time = self.max_timestamp if self.timestamp_type is TimestampType.LOG_APPEND_TIME else None
        for message in inner:
            key, value = self._inner_key_value(message)
            timestamp = append_time if append_time is not None else message.max_timestamp
            yield Record(key=key, value=value, timestamp=timestamp, headers=[], offset=message.wrapper_offset + shift)

    def has_contiguous_offsets(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bool:
        if self.compression is Compression.NONE:
            return True
        offsets = [message.wrapper_offset for message in self._inner_messages(max_size)]
        return offsets == list(range(offsets[0], offsets[0] + len(offsets)))

    def _inner_messages(self, max_size: int) -> list["LegacyBatch"]:
        _, payload = self._key_value()
        if payload is None:
            raise self._corrupt("compressed wrapper has a null value")
        try:
            data = memoryview(decompress(self.compression, payload, magic=self.magic, max_size=max_size))
        except CorruptBatchError as exc:
            raise exc.at(self.position, self.wrapper_offset)
        inner = []
        pos = 0
        while pos < len(data):
            if len(data) - pos < LOG_OVERHEAD:
                raise self._corrupt(f"inner message set ends with {len(data) - pos} stray bytes")
            size = INT32.unpack_from(data, pos + SIZE)[0]
            end = pos + LOG_OVERHEAD + size
            if size < RECORD_OVERHEAD[0] or end > len(data):
                raise self._corrupt(f"inner message at relative byte {pos} has invalid size {size}")
            message = LegacyBatch(data[pos:end], pos)
            if message.magic != self.magic:
                raise self._corrupt(f"inner magic {message.magic} differs from wrapper magic {self.magic}")
            if size < RECORD_OVERHEAD[self.magic]:
                raise self._corrupt(f"inner message at relative byte {pos} has invalid size {size}")
            if message.attributes & CODEC_MASK:
                raise self._corrupt("nested compression inside a wrapper message")
            inner.append(message)
            pos = end
        if not inner:
            raise self._corrupt("compressed wrapper holds no messages")
        return inner


def _key_value(raw: memoryview, magic: int) -> tuple[bytes | None, bytes | None]:
    """Key and value of a message whose bounds are already trusted; lengths must fill it exactly."""
    pos = KEY_LENGTH[magic]
    key, pos = _read_bytes(raw, pos)
    value, pos = _read_bytes(raw, pos)
    if pos != len(raw):
        raise CorruptBatchError(f"{len(raw) - pos} bytes left over after the message value")
    return key, value


def _read_bytes(raw: memoryview, pos: int) -> tuple[bytes | None, int]:
    if pos + 4 > len(raw):
        raise CorruptBatchError("message ends inside a length field")
    length = INT32.unpack_from(raw, pos)[0]
    pos += 4
    if length == -1:
        return None, pos
    if length < 0 or pos + length > len(raw):
        raise CorruptBatchError(f"length {length} runs past the end of the message")
    return bytes(raw[pos : pos + length]), pos + length


def encode_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None) -> bytes:
    """One complete message (log overhead included) with its CRC."""
    body = bytearray(_PREFIX.size)
    if magic == 1:
        body += INT64.pack(timestamp)
    for field in (key, value):
        body += INT32.pack(-1 if field is None else len(field))
        if field is not None:
            body += field
    _PREFIX.pack_into(body, 0, offset, len(body) - LOG_OVERHEAD, 0, magic, attributes)
    UINT32.pack_into(body, CRC, message_crc(body))
    return bytes(body)


def build_legacy(
    records: Sequence[Record],
    *,
    magic: int,
    compression: Compression,
    base_offset: int,
    timestamp_type: TimestampType,
    max_timestamp: int | None,
) -> bytes:
    """Build a v0/v1 message set; see :func:`kcodecs.build_batch` for the parameters."""
    if any(record.headers for record in records):
        raise InvalidRecordError(f"record headers need magic 2; magic {magic} cannot carry them")
    if compression is Compression.ZSTD:
        raise UnsupportedCodecError(f"zstd needs magic 2; magic {magic} cannot carry it")
    append_time = timestamp_type is TimestampType.LOG_APPEND_TIME
    if append_time and magic == 0:
        raise InvalidRecordError("magic 0 has no timestamps, so it cannot be LogAppendTime")
    ts_bit = TIMESTAMP_TYPE_MASK if append_time else 0
    if max_timestamp is None:
        max_timestamp = max(record.timestamp for record in records)
    try:
        if compression is Compression.NONE:
            return b"".join(
                encode_message(base_offset + i, magic, ts_bit, max_timestamp if append_time else r.timestamp, r.key, r.value)
                for i, r in enumerate(records)
            )
        # v1 inner offsets are relative, v0's absolute (see the module docstring).
        first_inner = 0 if magic == 1 else base_offset
        inner = b"".join(
            encode_message(first_inner + i, magic, 0, r.timestamp, r.key, r.value) for i, r in enumerate(records)
        )
        wrapper_value = compress(compression, inner, magic=magic)
        return encode_message(
            base_offset + len(records) - 1, magic, int(compression) | ts_bit, max_timestamp, None, wrapper_value
        )
    except struct.error as exc:
        raise InvalidRecordError(f"a message field is out of range: {exc}") from exc
