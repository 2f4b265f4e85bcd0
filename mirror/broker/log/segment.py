"""A segment: one ``.log`` file, its two sparse indexes and its aborted-transaction index
(Kafka's ``LogSegment``).

Index entries are placed per batch, exactly as Kafka's ``LogSegment.append`` does since
3.8 (KAFKA-16310) and as its ``recover`` always has, so an index rebuilt from the log is
byte-for-byte the one written by appends::

    for each batch, at byte `position` of the segment:
        if batch.max_timestamp > max_timestamp_so_far:
            max_timestamp_so_far, offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
        if bytes_since_last_index_entry > index_interval_bytes:
            offset index += (batch.last_offset, position)
            time index   += (max_timestamp_so_far, offset_of_max_timestamp)  if the timestamp grew
            bytes_since_last_index_entry = 0
        bytes_since_last_index_entry += batch.size

so the first batch of a segment is never indexed. The offset kept with the max timestamp is
the *last offset of the batch* holding it (Kafka 3.x's ``shallowOffsetOfMaxTimestamp``, a
header-only value); look-ups by time then decompress that one batch to find the record.
When rolling or closing, one more time entry records the segment's largest timestamp
(``onBecomeInactiveSegment``), which is what retention and timestamp look-ups read back.
An index that would overflow is skipped rather than written (the log rolls before that
happens); entries are still placed identically on rebuild.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

from kcodecs import NO_TIMESTAMP, KcodecsError

from .log_config import INT32_MAX, LogConfig
from .errors import CorruptIndexError
from .file_records import FileRecords
from .files import log_file, offset_index_file, time_index_file, txn_index_file
from .index import OffsetIndex, TimeIndex, TimestampOffset
from .txn_index import TransactionIndex

__all__ = ["LogSegment", "BatchInfo", "RecoveryResult"]

RECOVERY_CHUNK = 1024 * 1024
"""Bytes read per ``pread`` while recovery checks every batch's CRC."""


class BatchInfo(NamedTuple):
    """What the segment needs from one batch header to index it."""

    position: int  # within the bytes being appended
    size: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True)
class RecoveryResult:
    valid_bytes: int
    truncated_bytes: int
    batches: int
    reason: str | None
    """Why the scan stopped before the end of the file (a torn or corrupt batch), else None."""


class LogSegment:
    """One segment. Not thread-safe: :class:`PartitionLog` serialises access."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig, log: FileRecords, now_ms: int,
                 suffix: str = ""):
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.log = log
        self.suffix = suffix
        """Appended to every file name: empty for a live segment, ``.cleaned`` or ``.swap`` while
        the cleaner builds a replacement (:meth:`rename_files`)."""
        self.offset_index = OffsetIndex(_with(offset_index_file(directory, base_offset), suffix), base_offset,
                                        config.max_index_bytes)
        self.time_index = TimeIndex(_with(time_index_file(directory, base_offset), suffix), base_offset,
                                    config.max_index_bytes)
        self.txn_index = TransactionIndex(_with(txn_index_file(directory, base_offset), suffix), base_offset)
        self.txn_index_reset = False
        """Set by :meth:`recover`: the transaction index was emptied and waits to be refilled from
        producer state (:meth:`PartitionLog.rebuild_txn_indexes`), which a segment alone cannot replay."""
        self.created_ms = now_ms
        self.next_offset = base_offset
        """One past the last offset in this segment (the base offset while empty)."""
        self.bytes_since_last_index_entry = 0
        self._max = TimestampOffset(NO_TIMESTAMP, base_offset)
        self._rolling_based_timestamp: int | None = None

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int, *,
               suffix: str = "") -> "LogSegment":
        """A new empty segment with preallocated, writable indexes (file names end in ``suffix``)."""
        records = FileRecords.open(_with(log_file(directory, base_offset), suffix), create=True)
        segment = cls(directory, base_offset, config, records, now_ms, suffix)
        segment.offset_index = OffsetIndex.create(segment.offset_index.path, base_offset, config.max_index_bytes)
        segment.time_index = TimeIndex.create(segment.time_index.path, base_offset, config.max_index_bytes)
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> "LogSegment":
        """An existing segment's log file; call :meth:`load` or :meth:`recover` next."""
        return cls(directory, base_offset, config, FileRecords.open(log_file(directory, base_offset)), now_ms)

    def load(self, upper_bound: int | None) -> str | None:
        """Trust the files on disk after cheap checks; return why they cannot be trusted, or None.

        Kafka's ``sanityCheck`` plus ``readNextOffset``: both indexes must parse, increase and
        point inside the log, the last offset entry must name the batch at its position, and
        the batches after it (header-only) must end exactly at the end of the file, below
        ``upper_bound`` (the next segment's base offset). The transaction index, if any, must
        parse and name markers inside the segment.
        """
        try:
            self.offset_index = OffsetIndex.load(self.offset_index.path, self.base_offset, self.config.max_index_bytes)
            self.time_index = TimeIndex.load(self.time_index.path, self.base_offset, self.config.max_index_bytes)
            self.txn_index = TransactionIndex.load(self.txn_index.path, self.base_offset)
            self.offset_index.sanity_check(self.log.size)
            last_entry = self.offset_index.last_entry
            end, next_offset, tail_max = self._scan_tail(last_entry.offset, last_entry.position)
            if end != self.log.size:
                return f"the log ends in a torn batch at byte {end} of {self.log.size}"
            if upper_bound is not None and next_offset > upper_bound:
                return f"offsets run to {next_offset - 1}, into the next segment at {upper_bound}"
            self.time_index.sanity_check(next_offset)
            aborts = self.txn_index.entries
            if aborts and aborts[-1].last_offset >= next_offset:
                return f"{self.txn_index.path.name} names a marker at {aborts[-1].last_offset}, past the segment's end {next_offset}"
        except FileNotFoundError as exc:
            return f"{Path(exc.filename or '?').name} is missing"
        except (CorruptIndexError, KcodecsError) as exc:
            return str(exc)
        self.next_offset = next_offset
        last_time = self.time_index.last_entry
        self._max = tail_max if tail_max.timestamp > last_time.timestamp else last_time
        self.bytes_since_last_index_entry = self.log.size - last_entry.position
        return None

    def _scan_tail(self, entry_offset: int, position: int) -> tuple[int, int, TimestampOffset]:
        """Walk headers from ``position``: (end of the last complete batch, next offset, max timestamp seen)."""
        end, next_offset = position, self.base_offset
        tail_max = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        for batch_position, batch in self.log.batches(position):
            last = batch.last_offset
            if batch_position == position and position > 0 and last != entry_offset:
                raise CorruptIndexError(
                    f"{self.offset_index.path.name}: last entry says offset {entry_offset} at byte {position},"
                    f" the batch there ends at offset {last}"
                )
            if last < next_offset:
                raise CorruptIndexError(f"batch at byte {batch_position} goes back to offset {last}")
            if batch.max_timestamp > tail_max.timestamp:
                tail_max = TimestampOffset(batch.max_timestamp, last)
            end, next_offset = batch_position + batch.size, last + 1
        return end, next_offset, tail_max

    def recover(self, upper_bound: int | None) -> RecoveryResult:
        """Rebuild both indexes from the log, checking every batch; truncate at the first bad one.

        Kafka's ``LogSegment.recover``: CRC and header checks per batch (no decompression),
        offsets must increase and stay below ``upper_bound``. Leaves the indexes writable and
        the transaction index empty, flagged for :meth:`PartitionLog.rebuild_txn_indexes`.
        """
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.reset()
        self.txn_index_reset = True
        self.offset_index = OffsetIndex.create(self.offset_index.path, self.base_offset, self.config.max_index_bytes)
        self.time_index = TimeIndex.create(self.time_index.path, self.base_offset, self.config.max_index_bytes)
        self._max = TimestampOffset(NO_TIMESTAMP, self.base_offset)
        self._rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        valid = batches = 0
        previous_last = self.base_offset - 1
        reason = None
        try:
            for position, batch in self.log.batches(0, chunk=RECOVERY_CHUNK):
                batch.validate()
                last = batch.last_offset
                first = batch.base_offset if batch.magic >= 2 else last  # a v0/v1 header holds only the last
                if first <= previous_last or last - self.base_offset > INT32_MAX or (
                    upper_bound is not None and last >= upper_bound
                ):
                    reason = f"batch at byte {position} has offsets {first}..{last} after {previous_last}"
                    break
                if batches == 0:
                    self._rolling_based_timestamp = batch.max_timestamp
                self._index_batch(position, batch.size, last, batch.max_timestamp)
                previous_last, valid, batches = last, position + batch.size, batches + 1
        except KcodecsError as exc:
            reason = str(exc)
        if reason is None and valid < self.log.size:
            reason = f"torn batch at byte {valid}"
        truncated = self.log.truncate_to(valid)
        self.time_index.maybe_append(*self._max, skip_full_check=True)
        self.next_offset = previous_last + 1
        return RecoveryResult(valid, truncated, batches, reason)

    # -- appending ---------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[BatchInfo]) -> int:
        """Write already-validated batches and index them; return their position in the segment."""
        position = self.log.append(data)
        if position == 0:
            self._rolling_based_timestamp = batches[0].max_timestamp
        for batch in batches:
            self._index_batch(position + batch.position, batch.size, batch.last_offset, batch.max_timestamp)
        self.next_offset = batches[-1].last_offset + 1
        return position

    def _index_batch(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        # The same steps on append and on recovery, so rebuilt indexes equal the written ones.
        if max_timestamp > self._max.timestamp:
            self._max = TimestampOffset(max_timestamp, last_offset)
        if (
            self.bytes_since_last_index_entry > self.config.index_interval_bytes
            and not self.offset_index.is_full
            and not self.time_index.is_full
        ):
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(*self._max)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def index_entries_needed(self, sizes: Sequence[int]) -> int:
        """How many offset index entries appending batches of these sizes would add."""
        since, needed = self.bytes_since_last_index_entry, 0
        for size in sizes:
            if since > self.config.index_interval_bytes:
                needed, since = needed + 1, 0
            since += size
        return needed

    def should_roll(self, sizes: Sequence[int], max_timestamp: int, last_offset: int, now_ms: int) -> str | None:
        """Why an append of these batches must go to a new segment (Kafka's ``shouldRoll``), or None.

        An empty segment never rolls.
        """
        size = self.log.size
        if size == 0:
            return None
        if size > self.config.segment_bytes - sum(sizes):
            return f"segment_bytes {self.config.segment_bytes} reached"
        waited = self.time_waited_for_roll(now_ms, max_timestamp)
        if waited > self.config.segment_ms:
            return f"segment_ms {self.config.segment_ms} passed ({waited} ms since the first batch)"
        needed = self.index_entries_needed(sizes)
        if (
            self.offset_index.entries + needed > self.offset_index.max_entries
            or self.time_index.entries + needed > self.time_index.max_entries - 1
        ):
            return "an index would be full"
        if last_offset - self.base_offset > INT32_MAX:
            return f"offset {last_offset} does not fit a relative int32"
        return None

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka's ``timeWaitedForRoll``: measured from the first batch's max timestamp (KIP-32).

        Only a segment whose first batch has no timestamp (magic 0) falls back to the wall
        clock since the segment was created or loaded.
        """
        first = self.rolling_based_timestamp
        if first is not None and first >= 0:
            return message_timestamp - first
        return now_ms - self.created_ms

    @property
    def rolling_based_timestamp(self) -> int | None:
        """The first batch's max timestamp, read lazily (``loadFirstBatchTimestamp``); None while empty."""
        if self._rolling_based_timestamp is None and self.log.size:
            for _, batch in self.log.batches(0):
                self._rolling_based_timestamp = batch.max_timestamp
                break
        return self._rolling_based_timestamp

    # -- reading ------------------------------------------------------------------------------

    def extent(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
               max_offset: int | None = None) -> tuple[int, int] | None:
        """Where a read from ``offset`` lies in the file, as ``(position, length)``: from the
        batch holding ``offset`` (or the next one), up to ``max_bytes``; at least that whole
        batch if ``min_one_batch`` (Kafka's ``minOneMessage``), else nothing (length 0) if that
        batch does not fit. Nothing from the batch holding ``max_offset`` on (the last stable
        offset for read_committed, always a batch boundary), as Kafka's ``maxPosition``.

        None when no batch in this segment reaches ``offset``. The last batch may be cut
        short, as in Kafka (KIP-74 guarantees only the first).
        """
        found = self.log.search_for_offset(offset, self.offset_index.lookup(offset).position)
        if found is None:
            return None
        position, size, _ = found
        if not min_one_batch and size > max_bytes:
            # Kafka (v3+ fetches) answers empty rather than with a first batch cut short:
            # a consumer can make no progress on a part of one batch.
            return position, 0
        length = max(max_bytes, size)
        if max_offset is not None and max_offset < self.next_offset:
            bound = self.log.search_for_offset(max_offset, self.offset_index.lookup(max_offset).position)
            if bound is not None:
                length = min(length, bound[0] - position)
        return position, max(0, min(length, self.log.size - position))

    def upper_bound_offset(self, position: int, length: int) -> int:
        """An offset above every one the ``length`` bytes from ``position`` hold (Kafka's
        ``fetchUpperBoundOffset``): that of the first offset index entry at or past their end,
        a batch starting after them, else the segment's next offset. A read_committed fetch
        lists the aborted transactions below it: a bound from the index, with no walk of the
        bytes, which may list a transaction that starts just after them, as Kafka's does."""
        entry = self.offset_index.first_at_or_after(position + length)
        return self.next_offset if entry is None else entry.offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp`` (``findOffsetByTimestamp``)."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def max_timestamp_and_offset(self) -> TimestampOffset:
        """The largest batch max timestamp and the last offset of its batch; ``(-1, base)`` if none."""
        return self._max

    @property
    def largest_timestamp(self) -> int:
        """What retention compares: the largest timestamp, or the file's mtime when there is none."""
        return self._max.timestamp if self._max.timestamp >= 0 else self.log.modified_ms()

    # -- lifecycle ----------------------------------------------------------------------------

    def make_active(self) -> None:
        """Preallocate and map the indexes for appending (the last segment after loading)."""
        self.offset_index.make_writable()
        self.time_index.make_writable()

    def seal(self) -> None:
        """Kafka's ``onBecomeInactiveSegment``: record the largest timestamp, trim the indexes."""
        if self.time_index.writable:
            self.time_index.maybe_append(*self._max, skip_full_check=True)
        for index in (self.offset_index, self.time_index):
            if index.writable or not index.trimmed:
                index.trim()
            else:
                index.close()  # unmapped until its next look-up (Kafka's LazyIndex)

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Seal, fsync and release (a clean close leaves trimmed indexes, as Kafka's does)."""
        self.seal()
        self.flush()
        self.close_handles()

    def close_handles(self) -> None:
        """Release files and mappings without writing anything (Kafka's ``closeHandlers``)."""
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self.log.close()

    def rename_files(self, suffix: str) -> None:
        """Give every file of this segment the name suffix ``suffix`` instead of :attr:`suffix`.

        The ``.log`` file is renamed last: the loader takes ``<base>.log.swap`` as the sign that
        a cleaned segment is complete, and a live ``.log`` as the sign that it is in place.
        Not durable until the directory is fsynced.
        """
        for holder in (self.offset_index, self.time_index, self.txn_index, self.log):
            old = holder.path
            new = _with(Path(str(old)[: len(str(old)) - len(self.suffix)]), suffix)
            try:
                os.rename(old, new)
            except FileNotFoundError:
                if holder is not self.txn_index:  # written only once the segment has an abort
                    raise
            holder.path = new
        self.suffix = suffix

    def delete(self) -> None:
        """Remove the files, the log first: a crash in between leaves orphan indexes, which loading removes."""
        self.log.delete()
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()

    def __repr__(self) -> str:
        return f"<LogSegment base_offset={self.base_offset} next_offset={self.next_offset} size={self.size}>"


def _with(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix) if suffix else path
