"""Cleaning one partition: Kafka's ``Cleaner.doClean``.

1. **Map the dirty section.** From the first dirty offset (the cleaner checkpoint) up to
   the first uncleanable offset (the active segment, the last stable offset, and
   ``min.compaction.lag.ms``), record every key's latest offset in an :class:`OffsetMap`,
   skipping aborted transactions. A full map ends the section early, at a batch boundary;
   the rest waits for the next clean.
2. **Rewrite every segment below the end of the map**, clean section included, in groups
   that fit one segment (``segment.bytes``, the index sizes, int32 relative offsets). A
   record is kept if it is its key's latest, and, if it is a tombstone, while its batch's
   delete horizon has not passed. Records keep their offsets. A batch keeps its header
   (:func:`kcodecs.retain_records`); an untouched batch is copied byte for byte; a
   producer's last batch is kept as an empty header if all its records go
   (:func:`kcodecs.empty_batch`), so the producer's sequence and epoch survive a reload.
   Aborted transactions are dropped; markers go when no batch of their transaction is left
   and their delete horizon has passed (:mod:`.transactions`).
3. **Swap each group in** (:meth:`PartitionLog.replace_segments`), crash-safe.

Delete horizons are KIP-534's, what Kafka ships since 3.1: a batch holding tombstones (or a
marker of an empty transaction) is rewritten with ``now + delete.retention.ms`` in its base
timestamp and attribute bit 6 the first time the cleaner sees it, and those tombstones go in
the first clean after that time. Seed 004 (KIP-87) proposed a tombstone attribute bit
instead; Kafka shipped null values as tombstones, which is what clients write and read, so
that is what this cleaner honours (see docs/broker.md).

Work is per record only where it must be: each batch of the cleaned range is decoded once
to map or to filter it. Nothing is written under the live names until step 3, so an error
(a corrupt batch, a stop) leaves the partition as it was.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import kcodecs
from kcodecs import Batch, KcodecsError, Record, V2Batch

from ..log import PartitionLog
from ..log.log_config import INT32_MAX
from ..log.segment import BatchInfo, LogSegment
from ..producer_state import LastRecord
from ..topic_config import TopicConfig
from .offset_map import BYTES_PER_ENTRY, OffsetMap
from .transactions import CleanedTransactions

__all__ = ["CleanTarget", "CleanStats", "clean_partition", "CleanerStopped", "CorruptLogError", "LOAD_FACTOR"]

LOAD_FACTOR = 0.9
"""Kafka's ``log.cleaner.io.buffer.load.factor``: the share of map slots filled before it counts as full."""
_WRITE_CHUNK = 1024 * 1024
"""Cleaned bytes gathered before each write to the cleaned segment."""
_READ_CHUNK = 1024 * 1024
_MIN_SLOTS = 64
"""The smallest map allocated: the dirty section's offset count only bounds its keys from above."""


class CleanerStopped(Exception):
    """The broker is shutting down; the clean was abandoned and nothing changed."""


class CorruptLogError(Exception):
    """A batch the cleaner must read does not parse; the partition's cleaning stops, nothing is deleted."""


@dataclass(frozen=True)
class CleanTarget:
    """One partition to clean, with the offsets and producer state read on the broker's loop."""

    name: str
    log: PartitionLog
    config: TopicConfig
    first_dirty_offset: int
    first_uncleanable_offset: int
    last_records: dict[int, LastRecord] = field(default_factory=dict)


@dataclass
class CleanStats:
    """What one clean did; ``kmirror broker`` logs it and the bench reports it."""

    name: str
    end_offset: int = 0
    """Where the next dirty section starts: the checkpoint to write."""
    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    keys: int = 0
    map_bytes: int = 0
    records_read: int = 0
    records_kept: int = 0
    tombstones_removed: int = 0
    aborted_records_removed: int = 0
    markers_removed: int = 0
    batches_rebuilt: int = 0
    keyless_removed: int = 0
    seconds: float = 0.0
    swapped: bool = True
    """False if the log's segments changed under the clean (retention is held off, so only a
    bug would do it): the cleaned copy was then discarded, the log left as it was."""

    @property
    def mb_per_s(self) -> float:
        return self.bytes_before / 1e6 / self.seconds if self.seconds > 0 else 0.0


def clean_partition(target: CleanTarget, *, map_memory_bytes: int, now_ms: int,
                    should_stop: Callable[[], bool] = lambda: False) -> CleanStats | None:
    """Clean ``target``; None when its dirty section is empty. Raises :class:`CorruptLogError`
    or :class:`CleanerStopped` with the partition untouched."""
    started = time.perf_counter()
    log_ = target.log
    segments = [s for s in log_.cleanable_segments() if s.base_offset < target.first_uncleanable_offset]
    dirty = [s for s in segments if s.next_offset > target.first_dirty_offset]
    if not dirty or target.first_dirty_offset >= target.first_uncleanable_offset:
        return None
    stats = CleanStats(target.name)
    capacity = sum(min(s.next_offset, target.first_uncleanable_offset) - max(s.base_offset, target.first_dirty_offset)
                   for s in dirty)
    slots = min(map_memory_bytes // BYTES_PER_ENTRY, max(_MIN_SLOTS, math.ceil(capacity / LOAD_FACTOR) + 1))
    with log_.cleaning(), OffsetMap(slots * BYTES_PER_ENTRY, LOAD_FACTOR) as offset_map:
        end = _build_offset_map(target, dirty, offset_map, should_stop)
        if end <= target.first_dirty_offset:
            return None
        stats.end_offset, stats.keys, stats.map_bytes = end, offset_map.size, offset_map.memory_bytes
        to_clean = [s for s in segments if s.base_offset < end]
        aborted = log_.collect_aborted_txns(log_.log_start_offset, to_clean[-1].next_offset)
        writer = _Filter(target, offset_map, CleanedTransactions(aborted), now_ms, stats)
        for group in group_segments(to_clean, target.config.segment_bytes, log_.config.max_index_bytes):
            stats.segments_before += len(group)
            stats.bytes_before += sum(s.size for s in group)
            cleaned = _clean_group(log_, group, writer, should_stop)
            stats.bytes_after += cleaned.size
            stats.segments_after += 1
            if not log_.replace_segments(cleaned, group):
                stats.swapped = False
                break
    stats.seconds = time.perf_counter() - started
    return stats


def _build_offset_map(target: CleanTarget, dirty: Sequence[LogSegment], offset_map: OffsetMap,
                      should_stop: Callable[[], bool]) -> int:
    """Map ``[first dirty, first uncleanable)``; return where the mapped section ends."""
    first, limit = target.first_dirty_offset, target.first_uncleanable_offset
    transactions = CleanedTransactions(target.log.collect_aborted_txns(first, limit))
    end = first
    for segment, batch in _batches(target.name, dirty, should_stop):
        if batch.last_offset < first:
            continue
        if batch.base_offset >= limit:
            break
        if isinstance(batch, V2Batch) and batch.is_control:
            transactions.marker_is_spent(batch)
        elif not (isinstance(batch, V2Batch) and transactions.is_aborted(batch)):
            keys = _offsets_and_keys(target.name, segment, batch)
            if offset_map.size + len(keys) > offset_map.max_entries:
                if end == first:
                    raise CorruptLogError(f"{target.name}: the offset map ({offset_map.max_entries} keys) cannot hold"
                                          f" the batch at offset {batch.base_offset}; raise the dedupe buffer size")
                break
            for offset, key in keys:
                if key is not None and offset >= first:
                    offset_map.put(key, offset)
        end = batch.last_offset + 1
    return min(end, limit)


def group_segments(segments: Sequence[LogSegment], max_bytes: int, max_index_bytes: int) -> Iterator[list[LogSegment]]:
    """Consecutive segments whose cleaned copy surely fits one segment (Kafka's ``groupSegmentsBySize``):
    their sizes and index sizes add up within the limits and their offsets span an int32."""
    group: list[LogSegment] = []
    size = offset_index = time_index = 0
    for segment in segments:
        if group and (
            size + segment.size > max_bytes
            or offset_index + segment.offset_index.entries * 8 > max_index_bytes
            or time_index + segment.time_index.entries * 12 > max_index_bytes
            or segment.next_offset - 1 - group[0].base_offset > INT32_MAX
        ):
            yield group
            group, size, offset_index, time_index = [], 0, 0, 0
        group.append(segment)
        size += segment.size
        offset_index += segment.offset_index.entries * 8
        time_index += segment.time_index.entries * 12
    if group:
        yield group


def _clean_group(log_: PartitionLog, group: Sequence[LogSegment], writer: "_Filter",
                 should_stop: Callable[[], bool]) -> LogSegment:
    """Write the kept part of ``group`` into a new sealed, flushed ``.cleaned`` segment."""
    cleaned = log_.create_cleaned_segment(group[0].base_offset)
    writer.transactions.index = cleaned.txn_index
    try:
        pending, infos = bytearray(), []
        for segment, batch in _batches(writer.target.name, group, should_stop):
            kept = writer.retain(segment, batch)
            if kept is None:
                continue
            kept_batch = next(kcodecs.iter_batches(kept))
            infos.append(BatchInfo(len(pending), len(kept), kept_batch.last_offset, kept_batch.max_timestamp))
            pending += kept
            if len(pending) >= _WRITE_CHUNK:
                cleaned.append(pending, infos)
                pending, infos = bytearray(), []
        if pending:
            cleaned.append(pending, infos)
        cleaned.seal()
        cleaned.flush()
        return cleaned
    except BaseException:
        cleaned.close_handles()
        cleaned.delete()
        raise


def _batches(name: str, segments: Sequence[LogSegment], should_stop: Callable[[], bool]) -> Iterator[tuple[LogSegment, Batch]]:
    for segment in segments:
        try:
            for _, batch in segment.log.batches(0, chunk=_READ_CHUNK):
                if should_stop():
                    raise CleanerStopped(f"{name}: the broker is stopping")
                yield segment, batch
        except KcodecsError as exc:
            raise CorruptLogError(f"{name}: segment {segment.base_offset}: {exc}") from exc


def _records(name: str, segment: LogSegment, batch: Batch) -> list[Record]:
    return _decoded(name, segment, batch, lambda: list(batch.records()))


def _offsets_and_keys(name: str, segment: LogSegment, batch: Batch) -> list[tuple[int, bytes | None]]:
    """What the offset map needs of a batch; values are skipped, not copied (v2)."""
    if isinstance(batch, V2Batch):
        return _decoded(name, segment, batch, lambda: list(batch.offsets_and_keys()))
    return [(record.offset, record.key) for record in _records(name, segment, batch)]


def _decoded(name: str, segment: LogSegment, batch: Batch, decode: Callable[[], list]) -> list:
    """``decode()`` of a batch whose CRC checks; a corrupt one is a :class:`CorruptLogError` naming it."""
    try:
        batch.validate()
        return decode()
    except KcodecsError as exc:
        raise CorruptLogError(f"{name}: segment {segment.base_offset}, batch at offset {batch.base_offset}: {exc}") from exc


@dataclass
class _Filter:
    """Decides what stays of each batch (Kafka's ``Cleaner.cleanInto`` with its ``RecordFilter``)."""

    target: CleanTarget
    offset_map: OffsetMap
    transactions: CleanedTransactions
    now_ms: int
    stats: CleanStats

    def retain(self, segment: LogSegment, batch: Batch) -> bytes | memoryview | None:
        """The bytes to keep of ``batch``: itself, a rebuilt batch, an empty header, or None."""
        if not isinstance(batch, V2Batch):
            return batch.raw  # v0/v1 sets cannot reach this broker's logs through Produce; kept as they are
        records = _records(self.target.name, segment, batch)
        self.stats.records_read += len(records)
        if batch.is_control:
            spent = self.transactions.marker_is_spent(batch)
            drop_all = spent and batch.has_delete_horizon and batch.base_timestamp <= self.now_ms
            kept = [] if drop_all else records
            self.stats.markers_removed += len(records) - len(kept)
        else:
            spent = False
            if self.transactions.is_aborted(batch):
                kept = []
                self.stats.aborted_records_removed += len(records)
            else:
                kept = [record for record in records if self._keep(batch, record)]
        self.stats.records_kept += len(kept)
        if not kept:
            return kcodecs.empty_batch(batch) if self._last_of_producer(batch) else None
        needs_horizon = not batch.has_delete_horizon and (spent or any(record.value is None for record in kept))
        if len(kept) == len(records) and not needs_horizon:
            return batch.raw
        self.stats.batches_rebuilt += 1
        horizon = self.now_ms + self.target.config.delete_retention_ms if needs_horizon else None
        return kcodecs.retain_records(batch, kept, delete_horizon_ms=horizon)

    def _keep(self, batch: V2Batch, record: Record) -> bool:
        """Kafka's ``shouldRetainRecord``: the key's latest record, and a tombstone only until its horizon."""
        if record.key is None:
            self.stats.keyless_removed += 1  # a compacted log cannot say which record such a one replaces
            return False
        if record.offset < self.offset_map.get(record.key):
            return False
        if record.value is None and batch.has_delete_horizon and batch.base_timestamp <= self.now_ms:
            self.stats.tombstones_removed += 1
            return False
        return True

    def _last_of_producer(self, batch: V2Batch) -> bool:
        """Whether ``batch`` carries its producer's last sequence or epoch, which must stay in the log."""
        last = self.target.last_records.get(batch.producer_id) if batch.producer_id >= 0 else None
        if last is None:
            return False
        if last.last_data_offset is not None:
            return batch.last_offset == last.last_data_offset
        return batch.is_control and batch.producer_epoch == last.epoch
