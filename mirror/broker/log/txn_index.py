"""The aborted-transaction index of a segment, in Kafka's byte layout (``TransactionIndex``).

``<base>.txnindex``: one 34-byte entry per aborted transaction (Kafka's ``AbortedTxn``),
big-endian, in the order the aborts were written::

    offset  size  field
     0      2     version           int16   0 (AbortedTxn.CURRENT_VERSION)
     2      8     producerId        int64
    10      8     firstOffset       int64   first offset of the transaction (may be in an earlier segment)
    18      8     lastOffset        int64   offset of its ABORT marker, which is in this segment
    26      8     lastStableOffset  int64   the partition's LSO once the marker was written

A segment's file lists the transactions whose abort marker it holds, so ``lastOffset``
strictly increases within a file and is never below the segment's base offset
(``sanityCheck``). Committed transactions are not indexed: a read_committed fetch only needs
to know which producers' data to drop, and over which range (KIP-98).

Why ``lastStableOffset``: a transaction may span segments, so a fetch looks for aborts from
the segment of its start offset onwards, and can stop at the first entry whose LSO is at or
past the end of the fetched range: every transaction still open then has been decided after
that point (``collectAbortedTxns``).

Unlike the offset and time indexes the file is neither preallocated nor memory-mapped: the
file exists only once a segment has an abort (Kafka creates it lazily too), it is read whole
when the segment opens and kept in memory, and appended with ``pwrite``. Like the other
indexes it is not fsynced per append: the log recovers it from the batches after an unclean
shutdown (see :meth:`PartitionLog.rebuild_txn_indexes`).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from .errors import CorruptIndexError, LogError
from .files import OwnedFile

__all__ = ["AbortedTxn", "TransactionIndex", "ABORTED_TXN"]

ABORTED_TXN = struct.Struct(">hqqqq")
"""version int16, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64."""
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return ABORTED_TXN.pack(VERSION, *self)


class TransactionIndex(OwnedFile):
    """One segment's aborted transactions, in memory and in its ``.txnindex`` file."""

    def __init__(self, path: Path, base_offset: int, entries: list[AbortedTxn] | None = None):
        super().__init__(path)
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] = entries or []

    @classmethod
    def load(cls, path: Path, base_offset: int) -> "TransactionIndex":
        """Read the file (an absent file is an empty index); :class:`CorruptIndexError` if it fails Kafka's checks."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls(path, base_offset)
        if len(data) % ABORTED_TXN.size:
            raise CorruptIndexError(f"{path.name}: {len(data)} bytes is not a multiple of the {ABORTED_TXN.size}-byte entry")
        entries, previous_last = [], base_offset - 1
        for version, *fields in ABORTED_TXN.iter_unpack(data):
            entry = AbortedTxn(*fields)
            if version != VERSION:
                raise CorruptIndexError(f"{path.name}: aborted transaction version {version}, expected {VERSION}")
            if entry.last_offset <= previous_last or entry.first_offset > entry.last_offset:
                raise CorruptIndexError(f"{path.name}: entry {entry} does not follow offset {previous_last}"
                                        f" or starts after its marker")
            entries.append(entry)
            previous_last = entry.last_offset
        return cls(path, base_offset, entries)

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    def append(self, entry: AbortedTxn) -> None:
        """Add an abort whose marker is at ``entry.last_offset``, past every entry so far."""
        last = self._entries[-1].last_offset if self._entries else self.base_offset - 1
        if entry.last_offset <= last:
            raise LogError(f"{self.path.name}: aborted transaction ending at {entry.last_offset} does not follow {last}")
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        position = len(self._entries) * ABORTED_TXN.size
        data = entry.pack()
        try:
            if os.pwrite(self._fd, data, position) != len(data):
                raise OSError(f"short write to {self.path.name}")
        except BaseException:
            os.ftruncate(self._fd, position)
            raise
        self._entries.append(entry)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborts overlapping ``[fetch_offset, upper_bound)``, and whether the search is complete
        (Kafka's ``collectAbortedTxns``: an entry whose LSO reaches ``upper_bound`` ends it)."""
        found = []
        for entry in self._entries:
            if entry.last_offset >= fetch_offset and entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def reset(self) -> None:
        """Drop every entry and the file (recovery refills it from the log)."""
        self.close()
        self.path.unlink(missing_ok=True)
        self._entries = []

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
