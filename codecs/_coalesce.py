"""Merge the records of several small v2 batches into new batches, without decoding them.

A record's bytes after its offset delta (key, value and headers) mean the same in any batch,
so merging needs only each record's absolute timestamp and those bytes: the new batch writes
a fresh length, attributes, timestamp delta (from its own first timestamp) and offset delta
(0..n-1: the destination assigns offsets, KIP-31) before them. Every length inside the
record is still checked, as decoding would, so a malformed record is refused here and never
copied; keys are read because routing by key needs them.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from ._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress
from ._errors import CorruptBatchError, InvalidRecordError
from ._record import check_int
from ._v2 import MAGIC, NO_KEYS_MASK, V2Batch, pack_writable, walk_records
from ._varint import write_varint

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
    """``batch``'s records, every length checked as :meth:`V2Batch.records` checks them.

    Raises :class:`CorruptBatchError` (naming the batch's position and base offset) for a
    record that does not decode, and for a control batch, whose records are markers that
    belong to the source's transactions and must never be merged into data.
    """
    if batch.is_control:
        raise CorruptBatchError("a control batch's markers cannot be merged", position=batch.position,
                                offset=batch.base_offset)
    data = batch._payload(max_size)
    base_timestamp = batch.base_timestamp
    try:
        # The offset delta is left behind: the new batch numbers its records itself.
        records = [RecordBytes(key, base_timestamp + ts_delta, data[body:record_end])
                   for ts_delta, _, key, body, record_end in walk_records(data, batch.record_count)]
    except CorruptBatchError as exc:
        raise exc.at(batch.position, batch.base_offset)
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
        head.clear()
        head.append(0)
        write_varint(head, check_int(timestamp - base_timestamp, 64, "timestamp delta"))
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
