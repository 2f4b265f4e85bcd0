"""One segment's ``.log`` file: batches exactly as appended (Kafka's ``FileRecords``).

The file is a plain concatenation of batches in any kcodecs format (v2 record batches or
v0/v1 messages), each starting with ``offset int64 | size int32`` (``LOG_OVERHEAD``, see
``docs/formats.md``). Nothing here parses records: scans read chunks with ``os.pread`` and
walk them header by header with :func:`kcodecs.iter_batches`, like Kafka's
``FileLogInputStream``. Only :meth:`FileRecords.search_for_timestamp` decompresses, and only
the one batch that holds the answer. A fetch sends large reads as a :class:`FileRegion`, from
the page cache to the socket with ``sendfile``, as Kafka's ``FileRecords.writeTo`` does.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Iterator

import kcodecs
from kcodecs import Batch, CorruptBatchError

from .files import OwnedFile

__all__ = ["FileRecords", "FileRegion", "LOG_OVERHEAD"]

LOG_OVERHEAD = 12
"""``offset int64 | size int32``: the framing every format starts with (Kafka's ``Records.LOG_OVERHEAD``)."""
_FRAMING = struct.Struct(">qi")
SCAN_CHUNK = 64 * 1024
"""Bytes read per ``pread`` when walking headers: a few index intervals, so a look-up is usually one read."""


class FileRegion:
    """``size`` bytes of a log file from ``position``, for a fetch response to send with
    ``sendfile`` (Kafka's zero-copy fetch): they go from the page cache to the socket without
    being read into Python, copied into a response, and copied again into the kernel.

    It holds a descriptor of its own (``os.dup``), so a segment that retention deletes or the
    cleaner replaces before the response goes out still reads as it was: the bytes were
    written before the region was made, and a log never rewrites bytes in place. Whoever
    takes it closes it (the broker's server, once sent). Only positional I/O may use that
    descriptor: a duplicate shares the file offset with the log's own.
    """

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int):
        self.fd = -1  # what close() finds should dup fail
        self.fd = os.dup(fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        """The bytes themselves, for where they cannot be sent from the file (a TLS socket)."""
        return _pread_fully(self.fd, self.size, self.position)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    __del__ = close  # a response dropped unsent (its connection failed) must not keep the descriptor

    def __repr__(self) -> str:
        return f"FileRegion(position={self.position}, size={self.size})"


class FileRecords(OwnedFile):
    """An open ``.log`` file and its size. Appends go to the end; nothing is ever rewritten in place."""

    def __init__(self, path: Path, fd: int, size: int):
        super().__init__(path, fd)
        self._size = size

    @classmethod
    def open(cls, path: Path, *, create: bool = False) -> "FileRecords":
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o644)
        try:
            return cls(path, fd, os.fstat(fd).st_size)
        except BaseException:
            os.close(fd)
            raise

    @property
    def size(self) -> int:
        return self._size

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at the end; return its position. A failed write is cut off again."""
        position = self._size
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        try:
            written = os.pwrite(self._fd, data, position)
            if written < size:  # a short write (disk full, a signal): go on with the rest
                view = memoryview(data).cast("B")
                while written < size:
                    written += os.pwrite(self._fd, view[written:], position + written)
        except BaseException:
            try:
                os.ftruncate(self._fd, position)
            except OSError:
                pass
            raise
        self._size = position + written
        return position

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``position`` (fewer only at the end of the file)."""
        return _pread_fully(self._fd, self._available(position, size), position)

    def region(self, position: int, size: int) -> FileRegion:
        """The same bytes as :meth:`read`, as a :class:`FileRegion` to send from the file."""
        return FileRegion(self._fd, position, self._available(position, size))

    def _available(self, position: int, size: int) -> int:
        """How many of ``size`` bytes from ``position`` the file holds."""
        return max(0, min(size, self._size - position))

    def batches(self, start: int = 0, *, chunk: int = SCAN_CHUNK) -> Iterator[tuple[int, Batch]]:
        """Yield ``(position, batch)`` for each complete batch from ``start``, header-only.

        Ends quietly at a torn last batch (compare the end of the last batch with
        :attr:`size` to tell); raises :class:`kcodecs.CorruptBatchError`, with the byte
        position in this file, for a size or magic that cannot be right.
        """
        pos, end = start, self._size
        while end - pos >= LOG_OVERHEAD:
            buf = self.read(pos, min(chunk, end - pos))
            if len(buf) < LOG_OVERHEAD:  # the file shrank under us: nothing more to read
                return
            consumed = 0
            try:
                for batch in kcodecs.iter_batches(buf):
                    yield pos + batch.position, batch
                    consumed = batch.position + batch.size
                if consumed == 0:  # the batch at pos is larger than a chunk, or torn
                    need = LOG_OVERHEAD + _FRAMING.unpack_from(buf)[1]
                    if pos + need > end:
                        return
                    yield pos, kcodecs.read_batch(self.read(pos, need))
                    consumed = need
            except CorruptBatchError as exc:  # its position is relative to the chunk: make it the file's
                raise CorruptBatchError(exc.reason, position=pos + (exc.position or 0), offset=exc.offset) from exc
            pos += consumed

    def search_for_offset(self, offset: int, start: int) -> tuple[int, int, int] | None:
        """``(position, size, last_offset)`` of the first batch from ``start`` whose last offset is >= ``offset``.

        Kafka's ``searchForOffsetWithSize``: the batch that holds ``offset``, or the next one.
        """
        for position, batch in self.batches(start):
            last = batch.last_offset
            if last >= offset:
                return position, batch.size, last
        return None

    def search_for_timestamp(self, timestamp: int, start: int, starting_offset: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``start`` with both at least the targets.

        Kafka's ``searchForTimestamp``: skip batches by their header's max timestamp, then
        decompress the first batch that may hold the answer to find the exact record.
        """
        for _, batch in self.batches(start):
            if batch.max_timestamp >= timestamp and batch.last_offset >= starting_offset:
                for record in batch.records():
                    if record.timestamp >= timestamp and record.offset >= starting_offset:
                        return record.offset, record.timestamp
        return None

    def truncate_to(self, size: int) -> int:
        """Cut the file to ``size`` bytes; return how many were removed."""
        removed = self._size - size
        if removed > 0:
            os.ftruncate(self._fd, size)
            self._size = size
        return max(removed, 0)

    def flush(self) -> None:
        """fdatasync: the data and the file length, not the timestamps."""
        getattr(os, "fdatasync", os.fsync)(self._fd)

    def modified_ms(self) -> int:
        return os.fstat(self._fd).st_mtime_ns // 1_000_000



def _pread_fully(fd: int, size: int, position: int) -> bytes:
    data = os.pread(fd, size, position)
    while len(data) < size:  # regular files read short only at EOF; someone truncated under us
        more = os.pread(fd, size - len(data), position + len(data))
        if not more:
            break
        data += more
    return data
