"""What every batch looks like from the outside, whatever its magic.

A v2 record batch and a v0/v1 message (plain or a compressed wrapper) both answer this
interface, read straight from their bytes: nothing is parsed until a property is asked
for, and only :meth:`Batch.records` (and a deep :meth:`Batch.validate`) decompress.
"""

from __future__ import annotations

import abc
from typing import Iterator

from ._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression
from ._record import Record, TimestampType

__all__ = ["Batch", "LOG_OVERHEAD", "MAGIC_OFFSET"]

LOG_OVERHEAD = 12
"""Offset (int64) plus size (int32): the prefix every format shares (Kafka's ``Records.LOG_OVERHEAD``)."""
MAGIC_OFFSET = 16
"""Every format keeps its magic byte at position 16, which is how a reader tells them apart."""


class Batch(abc.ABC):
    """A view of one batch inside a larger buffer. ``raw`` is a memoryview, never a copy."""

    __slots__ = ("raw", "position")

    def __init__(self, raw: memoryview, position: int = 0):
        self.raw = raw
        self.position = position

    @property
    def size(self) -> int:
        """Bytes this batch occupies, log overhead included."""
        return len(self.raw)

    @property
    @abc.abstractmethod
    def magic(self) -> int: ...

    @property
    @abc.abstractmethod
    def base_offset(self) -> int:
        """First offset. For a compressed v0/v1 wrapper this decompresses (the header stores only the last)."""

    @property
    @abc.abstractmethod
    def last_offset(self) -> int: ...

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    @abc.abstractmethod
    def compression(self) -> Compression: ...

    @property
    @abc.abstractmethod
    def timestamp_type(self) -> TimestampType: ...

    @property
    @abc.abstractmethod
    def max_timestamp(self) -> int: ...

    @property
    @abc.abstractmethod
    def is_control(self) -> bool: ...

    @property
    @abc.abstractmethod
    def is_transactional(self) -> bool: ...

    @property
    @abc.abstractmethod
    def producer_id(self) -> int: ...

    @property
    @abc.abstractmethod
    def has_no_keys_flag(self) -> bool:
        """True only when the writer promised no record has a key; False means "unknown"."""

    @property
    @abc.abstractmethod
    def record_count(self) -> int | None:
        """Records in the batch, or None when only decompression could tell (v0/v1 wrappers)."""

    @abc.abstractmethod
    def validate(self, *, deep: bool = False, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> None:
        """Check the CRC and the header's own consistency; ``deep`` also decodes every record.

        Raises :class:`~kcodecs.CorruptBatchError` (or :class:`~kcodecs.UnsupportedCodecError`).
        """

    @abc.abstractmethod
    def records(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
        """Decompress (at most ``max_size`` bytes) and yield the records with absolute offsets."""

    def keys(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> Iterator[bytes | None]:
        """Decompress and yield each record's key only, checking the records' framing as
        :meth:`records` does. Routing needs nothing else to decide where a batch goes."""
        return (record.key for record in self.records(max_size=max_size))

    @abc.abstractmethod
    def has_contiguous_offsets(self, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bool:
        """Whether the records use every offset from base to last (no compaction holes)."""

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} magic={self.magic} position={self.position} last_offset={self.last_offset} "
            f"size={self.size} compression={self.compression.name}>"
        )
