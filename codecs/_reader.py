"""Header-only iteration over any buffer of batches: a segment file, a fetch response, a mix of magics.

The format is decided here, once per batch, from the magic byte at position 16 (as in
Kafka's ``ByteBufferLogInputStream`` and kafka-python's ``MemoryRecords``). Following
Kafka, a final batch cut off by the end of the buffer (fetch responses are truncated at
max bytes) ends iteration quietly, while a size or magic that cannot be right raises.
"""

from __future__ import annotations

import struct
from typing import Iterator

from ._batch import LOG_OVERHEAD, MAGIC_OFFSET, Batch
from ._errors import CorruptBatchError
from ._legacy import RECORD_OVERHEAD, LegacyBatch
from ._v2 import HEADER_SIZE, V2Batch

__all__ = ["iter_batches", "iter_v2", "read_batch", "Buffer"]

Buffer = bytes | bytearray | memoryview
_OFFSET_AND_SIZE = struct.Struct(">qi")
_MIN_SIZE = {0: RECORD_OVERHEAD[0], 1: RECORD_OVERHEAD[1], 2: HEADER_SIZE - LOG_OVERHEAD}


def iter_batches(data: Buffer, *, start: int = 0) -> Iterator[Batch]:
    """Yield every complete batch in ``data`` (views, not copies), reading headers only.

    Raises :class:`CorruptBatchError` for a size smaller than its format allows or an
    unknown magic; a truncated last batch is not an error.
    """
    view = _bytes_view(data)
    end = len(view)
    pos = start
    unpack = _OFFSET_AND_SIZE.unpack_from
    while end - pos >= LOG_OVERHEAD:
        offset, size = unpack(view, pos)
        if size < _MIN_SIZE[0]:
            raise CorruptBatchError(f"size field {size} is below the smallest possible batch", position=pos, offset=offset)
        batch_end = pos + LOG_OVERHEAD + size
        if batch_end > end:
            return
        yield _make(view, pos, batch_end, offset, size)
        pos = batch_end


def iter_v2(data: Buffer, *, start: int = 0) -> Iterator[tuple[int, memoryview]]:
    """``(position, bytes)`` of each whole v2 batch from ``start``, as :func:`iter_batches` frames
    them but without an object each (nothing beyond the framing is checked: see
    :func:`~kcodecs.check_v2`). Ends, without a word, before the first thing that is not one:
    a batch of another magic, a size too small for v2, or the end of ``data``, a batch cut off
    by it included. :func:`iter_batches` from there tells which."""
    view = _bytes_view(data)
    end, pos, unpack = len(view), start, _OFFSET_AND_SIZE.unpack_from
    while end - pos >= LOG_OVERHEAD:
        _, size = unpack(view, pos)
        batch_end = pos + LOG_OVERHEAD + size
        if size < _MIN_SIZE[2] or batch_end > end or view[pos + MAGIC_OFFSET] != 2:
            return
        yield pos, view[pos:batch_end]
        pos = batch_end


def read_batch(data: Buffer, *, position: int = 0) -> Batch:
    """Exactly one complete batch at the start of ``data``; anything short of that raises."""
    view = _bytes_view(data)
    if len(view) < LOG_OVERHEAD:
        raise CorruptBatchError(f"{len(view)} bytes cannot hold a batch header", position=position)
    offset, size = _OFFSET_AND_SIZE.unpack_from(view, 0)
    if size < _MIN_SIZE[0] or LOG_OVERHEAD + size > len(view):
        raise CorruptBatchError(f"size field {size} does not fit the {len(view)} bytes given", position=position, offset=offset)
    return _make(view, 0, LOG_OVERHEAD + size, offset, size, position)


def _bytes_view(data: Buffer) -> memoryview:
    """``data`` as a flat view of unsigned bytes (no copy)."""
    return memoryview(data).cast("B") if not isinstance(data, memoryview) or data.format != "B" else data


def _make(view: memoryview, pos: int, batch_end: int, offset: int, size: int, position: int | None = None) -> Batch:
    """The batch at ``view[pos:batch_end]``, reported (and its errors) at ``position``, by default ``pos``."""
    where = pos if position is None else position
    magic = view[pos + MAGIC_OFFSET]
    minimum = _MIN_SIZE.get(magic)
    if minimum is None:
        raise CorruptBatchError(f"unknown magic {magic}", position=where, offset=offset)
    if size < minimum:
        raise CorruptBatchError(f"size field {size} is below the {minimum} bytes magic {magic} needs", position=where, offset=offset)
    raw = view[pos:batch_end]
    return V2Batch(raw, where) if magic == 2 else LegacyBatch(raw, where)
