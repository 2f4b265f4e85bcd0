"""The two sparse, memory-mapped indexes of a segment, in Kafka's byte layout.

Offset index ``<base>.index`` (Kafka's ``OffsetIndex``), 8-byte entries, big-endian::

    offset  size  field
     0      4     relativeOffset  int32   offset - segment base offset
     4      4     position        int32   byte position in the .log of the batch holding that offset

Time index ``<base>.timeindex`` (Kafka's ``TimeIndex``), 12-byte entries, big-endian::

    offset  size  field
     0      8     timestamp       int64   the largest timestamp in the segment up to ...
     8      4     relativeOffset  int32   ... this offset (minus the base offset)

Both are sparse and append-only: ``LogSegment`` adds an entry every ``index_interval_bytes``
of log, at a batch boundary, never inside a batch. Offset entries strictly increase in both
fields; time entries strictly increase in timestamp (one is added only when the segment's
max timestamp grew) and never decrease in offset. An entry ``(T, O)`` promises that every
record before the batch holding ``O`` has a timestamp below ``T``.

Like Kafka's ``AbstractIndex``, the active segment's index files are preallocated to
``max_index_bytes`` (sparse files, zero-filled) and written through a shared ``mmap``, made
at the first entry (:meth:`_Index.make_writable` says why not sooner); when
the segment rolls or closes the files are trimmed to their entries, so a sealed index is
exactly ``entries * entry size`` bytes, which is what Kafka's tools expect. A file left
untrimmed by a crash ends in zero entries: the loader drops trailing all-zero entries (an
offset entry can never be all zero because position 0, the first batch, is never indexed)
and the active segment is rebuilt after an unclean shutdown anyway. Look-ups binary-search
the mapping, trying the last 8 KiB first (Kafka's "warm section", which keeps the pages
that tail reads touch hot). No checksums: a file that fails :meth:`sanity_check` is rebuilt
from its log.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import ClassVar, NamedTuple

from kcodecs import NO_TIMESTAMP

from .log_config import INT32_MAX
from .errors import CorruptIndexError, LogError

__all__ = ["OffsetIndex", "TimeIndex", "OffsetPosition", "TimestampOffset", "OFFSET_ENTRY", "TIME_ENTRY"]

OFFSET_ENTRY = struct.Struct(">ii")
"""relativeOffset int32, position int32."""
TIME_ENTRY = struct.Struct(">qi")
"""timestamp int64, relativeOffset int32."""
_WARM_BYTES = 8192
"""Kafka's ``AbstractIndex`` warm section: search the last 8 KiB of entries first."""


def _no_readahead(mapping: mmap.mmap) -> None:
    """Tell the kernel the mapping is accessed at random, as index look-ups are.

    Without it, on kernels whose page cache uses large folios (ext4 since Linux 6.16), the
    first write into a fresh preallocated index allocates and zeroes a readahead-sized
    folio, milliseconds of CPU per index file paid inside the append that rolls or creates a
    segment (figures: docs/performance.md, "Small costs behind choices in the code"). With readahead off, each fault
    maps one page. Not every platform has it.
    """
    if hasattr(mmap, "MADV_RANDOM"):
        mapping.madvise(mmap.MADV_RANDOM)


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _Index:
    """Shared mechanics (Kafka's ``AbstractIndex``): file, mapping, entry count, binary search."""

    ENTRY: ClassVar[struct.Struct]

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max_index_bytes // self.ENTRY.size
        self._entries = 0
        self._last: tuple | None = None
        """The last entry as :attr:`last_entry` returns it, kept so appends need not read it back
        from the mapping; None until read, and again whenever the entries are reloaded or dropped."""
        self._mm: mmap.mmap | None = None
        self._writable = False
        self.file_length = 0

    # -- lifecycle ---------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, base_offset: int, max_index_bytes: int):
        """A new, empty, writable index (an existing file at ``path`` is emptied)."""
        index = cls(path, base_offset, max_index_bytes)
        index.reset(writable=True)
        return index

    @classmethod
    def load(cls, path: Path, base_offset: int, max_index_bytes: int):
        """Read an existing file's entry count; raises FileNotFoundError or :class:`CorruptIndexError`.

        The file is not mapped yet: sealed segments map it on their first look-up (Kafka's
        ``LazyIndex``), the active one through :meth:`make_writable`.
        """
        index = cls(path, base_offset, max_index_bytes)
        data = path.read_bytes()
        size = cls.ENTRY.size
        if len(data) % size:
            raise CorruptIndexError(f"{path.name}: {len(data)} bytes is not a multiple of the {size}-byte entry")
        # Trailing all-zero entries are preallocated space a crash left untrimmed.
        index._entries = -(-len(data.rstrip(b"\0")) // size)
        index.file_length = len(data)
        return index

    def reset(self, *, writable: bool) -> None:
        """Drop every entry (Kafka's ``reset``): the file is emptied and, if writable, preallocated again."""
        self._unmap()
        self.path.write_bytes(b"")
        self._entries = self.file_length = 0
        self._last = None
        if writable:
            self.make_writable()

    def make_writable(self) -> None:
        """Preallocate to ``max_index_bytes`` (Kafka's ``resize(maxIndexSize)``), to be mapped
        read-write on the first entry written or read. Not before: CPython's ``mmap`` keeps a
        descriptor of its own open for as long as the mapping lives (``trackfd`` only came in
        3.13), and a broker holding thousands of partitions whose active segments have no entry
        yet (less than ``index_interval_bytes`` of log) would hold three descriptors each where
        Kafka holds one."""
        self._unmap()
        capacity = max(self.max_entries, self._entries) * self.ENTRY.size
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != capacity:
                os.ftruncate(fd, capacity)  # only zero entries lie past _entries, so shrinking loses nothing
        finally:
            os.close(fd)
        self._writable = True
        self.file_length = capacity

    def trim(self) -> None:
        """Cut the file to its entries and stop writing (Kafka's ``trimToValidSize``, done on roll and close)."""
        self._unmap()
        self.file_length = self._entries * self.ENTRY.size
        os.truncate(self.path, self.file_length)
        self._writable = False

    def flush(self) -> None:
        """msync the mapping and fsync the file (its length changes on trim)."""
        if self._mm is not None and self._writable:
            self._mm.flush()
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        """Release the mapping without trimming (the segment trims first on a clean close)."""
        self._unmap()
        self._writable = False

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def _buffer(self) -> mmap.mmap:
        """The mapping, made on first use: read-write for the active segment's index, read-only
        for a sealed one (Kafka's ``LazyIndex``)."""
        if self._mm is None:
            fd = os.open(self.path, os.O_RDWR if self._writable else os.O_RDONLY)
            try:
                self._mm = mmap.mmap(fd, os.fstat(fd).st_size,
                                     access=mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ)
            finally:
                os.close(fd)
            if self._writable:
                _no_readahead(self._mm)
        return self._mm

    # -- state -------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def trimmed(self) -> bool:
        """Whether the file holds exactly its entries (what a sealed segment's index must be)."""
        return self.file_length == self._entries * self.ENTRY.size

    def _raw_entries(self) -> bytes:
        if self._entries == 0:
            return b""
        return self._buffer()[: self._entries * self.ENTRY.size]

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise LogError(f"offset {offset} does not fit {self.path.name} (base offset {self.base_offset})")
        return relative

    def _put(self, *fields: int) -> None:
        if not self._writable:
            raise LogError(f"{self.path.name} is sealed; it takes no more entries")
        self.ENTRY.pack_into(self._buffer(), self._entries * self.ENTRY.size, *fields)
        self._entries += 1

    def _largest_lower_bound(self, target: int, field: int) -> int:
        """Slot of the last entry whose ``field`` is <= target, or -1 (``largestLowerBoundSlotFor``)."""
        n = self._entries
        if n == 0:
            return -1
        buf, size, unpack = self._buffer(), self.ENTRY.size, self.ENTRY.unpack_from

        def key(slot: int) -> int:
            return unpack(buf, slot * size)[field]

        warm_first = max(0, n - 1 - _WARM_BYTES // size)
        if key(warm_first) <= target:
            lo, hi = warm_first, n - 1
        elif key(0) > target:
            return -1
        else:
            lo, hi = 0, warm_first
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if key(mid) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo


class OffsetIndex(_Index):
    """Offset -> position of the batch holding it (Kafka's ``OffsetIndex``)."""

    ENTRY = OFFSET_ENTRY

    def entry(self, slot: int) -> OffsetPosition:
        if not 0 <= slot < self._entries:
            raise LogError(f"{self.path.name} has {self._entries} entries, no slot {slot}")
        relative, position = OFFSET_ENTRY.unpack_from(self._buffer(), slot * OFFSET_ENTRY.size)
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` when empty."""
        if self._last is None:
            self._last = self.entry(self._entries - 1) if self._entries else OffsetPosition(self.base_offset, 0)
        return self._last

    def lookup(self, offset: int) -> OffsetPosition:
        """The entry with the largest offset <= ``offset``, or ``(base_offset, 0)`` when none is."""
        slot = self._largest_lower_bound(offset - self.base_offset, 0)
        return self.entry(slot) if slot >= 0 else OffsetPosition(self.base_offset, 0)

    def first_at_or_after(self, position: int) -> OffsetPosition | None:
        """The first entry whose position is at least ``position``, or None (Kafka's
        ``smallestUpperBoundSlotFor`` by position)."""
        slot = self._largest_lower_bound(position - 1, 1) + 1
        return self.entry(slot) if slot < self._entries else None

    def append(self, offset: int, position: int) -> None:
        """Add ``offset -> position``; both must exceed the last entry's."""
        if self.is_full:
            raise LogError(f"{self.path.name} is full ({self._entries} entries)")
        if self._entries and offset <= self.last_entry.offset:
            raise LogError(f"{self.path.name}: offset {offset} is not above the last entry {self.last_entry.offset}")
        self._put(self._relative(offset), position)
        self._last = OffsetPosition(offset, position)

    def sanity_check(self, log_size: int) -> None:
        """Raise :class:`CorruptIndexError` unless entries increase and point inside a log of ``log_size`` bytes."""
        previous_relative, previous_position = -1, 0
        for relative, position in OFFSET_ENTRY.iter_unpack(self._raw_entries()):
            if relative <= previous_relative or position <= previous_position or position >= log_size:
                raise CorruptIndexError(
                    f"{self.path.name}: entry ({relative}, {position}) after ({previous_relative}, {previous_position})"
                    f" does not increase or points past the {log_size}-byte log"
                )
            previous_relative, previous_position = relative, position


class TimeIndex(_Index):
    """Timestamp -> offset (Kafka's ``TimeIndex``)."""

    ENTRY = TIME_ENTRY

    @property
    def is_full(self) -> bool:
        # The last slot is kept for the entry written when the segment rolls or closes.
        return self._entries >= self.max_entries - 1

    def entry(self, slot: int) -> TimestampOffset:
        if not 0 <= slot < self._entries:
            raise LogError(f"{self.path.name} has {self._entries} entries, no slot {slot}")
        timestamp, relative = TIME_ENTRY.unpack_from(self._buffer(), slot * TIME_ENTRY.size)
        return TimestampOffset(timestamp, self.base_offset + relative)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or ``(NO_TIMESTAMP, base_offset)`` when empty."""
        if self._last is None:
            self._last = self.entry(self._entries - 1) if self._entries else TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self._last

    def lookup(self, timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= ``timestamp``, or ``(NO_TIMESTAMP, base_offset)``."""
        slot = self._largest_lower_bound(timestamp, 0)
        return self.entry(slot) if slot >= 0 else TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add ``(timestamp, offset)`` if ``timestamp`` exceeds the last entry's; True if added.

        ``skip_full_check`` may use the reserved last slot (on roll and close, as in Kafka).
        """
        if self._entries >= self.max_entries or (not skip_full_check and self.is_full):
            if skip_full_check:
                return False
            raise LogError(f"{self.path.name} is full ({self._entries} entries)")
        last = self.last_entry
        if self._entries and (offset < last.offset or timestamp < last.timestamp):
            raise LogError(f"{self.path.name}: ({timestamp}, {offset}) goes backwards from {tuple(last)}")
        if timestamp <= last.timestamp:
            return False
        self._put(timestamp, self._relative(offset))
        self._last = TimestampOffset(timestamp, offset)
        return True

    def sanity_check(self, next_offset: int) -> None:
        """Raise :class:`CorruptIndexError` unless timestamps increase and offsets stay in ``[base, next_offset)``."""
        previous_timestamp, previous_relative = NO_TIMESTAMP, 0
        limit = next_offset - self.base_offset
        for timestamp, relative in TIME_ENTRY.iter_unpack(self._raw_entries()):
            if timestamp <= previous_timestamp or relative < previous_relative or relative >= limit:
                raise CorruptIndexError(
                    f"{self.path.name}: entry ({timestamp}, {relative}) after ({previous_timestamp}, {previous_relative})"
                    f" goes backwards or past the segment's next offset {next_offset}"
                )
            previous_timestamp, previous_relative = timestamp, relative
