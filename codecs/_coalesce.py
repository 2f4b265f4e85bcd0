"""Merge the records of several small v2 batches into new batches, without decoding them.

A record's bytes after its offset delta (key, value and headers) mean the same in any batch,
so merging needs only each record's absolute timestamp and those bytes: the new batch writes
a fresh length, attributes, timestamp delta (from its own first timestamp) and offset delta
(0..n-1: the destination assigns offsets, KIP-31) before them. Keys are read, because
routing by key and the no-keys flag need them; values and headers are carried unread, as a
forwarded batch's are.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from ._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress
from ._errors import CorruptBatchError, InvalidRecordError
from ._record import check_int
from ._v2 import MAGIC, NO_KEYS_MASK, V2Batch, pack_writable
from ._varint import read_varint, write_varint

__all__ = ["RecordBytes", "record_bytes", "build_from_record_bytes"]


class RecordBytes(NamedTuple):
    """One record, as merging needs it."""

    key: bytes | None
    timestamp: int
    """The record's CreateTime: under LogAppendTime too (the broker rewrites only the batch's
    max timestamp and type bit, the records keep what their producer wrote)."""
    body: memoryview
    """Key, value and headers, as the record holds them."""


def record_bytes(batch: V2Batch, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> list[RecordBytes]:
    """``batch``'s records, from their framing: each record's length (against the batch's end,
    and the next record's start), its two deltas and its key. Value and headers are carried
    unread, as a pass-through batch's records are: the batch's CRC was checked, and Kafka's
    destination validates every record of a compressed batch it takes (``LogValidator``), so
    a malformed one fails the copy there, typed, and is not lost. Checking their lengths too,
    as :meth:`V2Batch.keys` does, cost half of a merge of 1 KiB records (docs/performance.md,
    "Small source batches").

    Raises :class:`CorruptBatchError` (naming the batch's position and base offset) for a
    record whose framing does not decode, and for a control batch, whose records are markers
    that belong to the source's transactions and must never be merged into data.
    """
    if batch.is_control:
        raise CorruptBatchError("a control batch's markers cannot be merged", position=batch.position,
                                offset=batch.base_offset)
    data = batch._payload(max_size)
    try:
        return _framed(data, batch.record_count, batch.base_timestamp)
    except CorruptBatchError as exc:
        raise exc.at(batch.position, batch.base_offset)


def _framed(data: memoryview, count: int, base_timestamp: int) -> list[RecordBytes]:
    """Each record's key, timestamp and the bytes after its offset delta.

    Varints of one and two bytes (every delta of a small batch, the length of a record under
    8 KiB, a null key) are decoded in line; longer ones by :func:`read_varint`. The offset
    delta is read past, not kept: the new batch numbers its records itself."""
    records: list[RecordBytes] = []
    append = records.append
    pos, end = 0, len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:
                v = (b & 0x7F) | (data[pos + 1] << 7)
                length, pos = (v >> 1) ^ -(v & 1), pos + 2
            else:
                length, pos = read_varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise CorruptBatchError(f"record length {length} runs past the end of the batch")
            b = data[pos + 1]  # after the attributes: the timestamp delta
            if b < 0x80:
                ts_delta, body = (b >> 1) ^ -(b & 1), pos + 2
            else:
                ts_delta, body = read_varint(data, pos + 1)
            body = body + 1 if data[body] < 0x80 else read_varint(data, body)[1]  # the offset delta
            if data[body] == 1:  # zig-zag -1: a null key
                key, after = None, body + 1
            else:
                size, at = read_varint(data, body)
                after = at + size
                if size < 0:
                    raise CorruptBatchError(f"invalid key length {size}")
                key = bytes(data[at:after])
            if after > record_end:
                raise CorruptBatchError(f"record declares {length} bytes, fewer than its key ends at")
            append(RecordBytes(key, base_timestamp + ts_delta, data[body:record_end]))
            pos = record_end
    except IndexError:
        raise CorruptBatchError("a record's framing runs past the end of the records") from None
    if pos != end:
        raise CorruptBatchError(f"{end - pos} bytes left over after {count} records")
    return records


def build_from_record_bytes(records: Sequence[RecordBytes], *, compression: Compression,
                            no_keys_flag: bool) -> bytearray:
    """One v2 batch of ``records`` in order: base offset 0, offset deltas 0..n-1, CreateTime,
    no producer state (what a producer sends; the destination assigns offsets and, for a
    LogAppendTime topic, its own time). ``no_keys_flag`` sets kmirror's flag (seed 000); the
    caller knows whether every merged batch had it."""
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    base_timestamp = records[0].timestamp
    max_timestamp = base_timestamp
    body = bytearray()
    head = bytearray()
    for index, (_, timestamp, rest) in enumerate(records):
        delta = timestamp - base_timestamp
        length = 3 + len(rest)
        if -64 <= delta < 64 and index < 64 and length < 8192:
            # The common case in line: attributes, both deltas and the length one byte each, the
            # length two (zig-zag: 2n for n >= 0, -2n - 1 below).
            zz = length << 1
            body += bytes((zz & 0x7F | 0x80, zz >> 7) if zz > 0x7F else (zz,))
            body += bytes((0, delta << 1 if delta >= 0 else -(delta << 1) - 1, index << 1))
        else:
            head.clear()
            head.append(0)
            write_varint(head, check_int(delta, 64, "timestamp delta"))
            write_varint(head, index)
            write_varint(body, len(head) + len(rest))
            body += head
        body += rest
        if timestamp > max_timestamp:
            max_timestamp = timestamp
    payload = body if compression is Compression.NONE else compress(compression, body, magic=MAGIC)
    attributes = int(compression) | (NO_KEYS_MASK if no_keys_flag else 0)
    # No timestamp-type bit: CreateTime.
    return pack_writable(0, -1, attributes, len(records) - 1, base_timestamp, max_timestamp, -1, -1, -1, len(records),
                         payload)
