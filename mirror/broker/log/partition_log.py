"""One partition's log: a directory of segments (Kafka's ``UnifiedLog`` and ``LocalLog``).

Appends take batches whose offsets the broker already assigned and write them as they are;
reads return stored bytes from the batch holding the requested offset; look-ups by time go
through the time index; aborted transactions are kept per segment in its transaction index
(:mod:`.txn_index`), written by the owner of the producer state, which decides them. Per append and per read the work is per batch (header reads),
never per record. Opening a directory loads or recovers it (see :mod:`.loader`).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence, TypeVar

import kcodecs
from kcodecs import NO_TIMESTAMP, KcodecsError

from .log_config import INT32_MAX, LogConfig
from .errors import (
    InvalidAppendError,
    InvalidArgumentError,
    LogClosedError,
    LogStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from .file_records import FileRegion
from .files import CLEAN_SHUTDOWN_FILE, CLEANED_SUFFIX, SWAP_SUFFIX, deleted_partition_dir, fsync_dir
from .loader import load_segments
from .segment import BatchInfo, LogSegment
from .start_offset import read_log_start_offset, write_log_start_offset
from .txn_index import AbortedTxn

__all__ = ["PartitionLog", "LogConfig", "FetchSlice", "SENDFILE_MIN_BYTES", "wall_clock_ms"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
_EMPTY = memoryview(b"")

SENDFILE_MIN_BYTES = 64 * 1024
"""From this size a fetch sends its bytes from the file (``sendfile``) rather than reading
them: below it a ``pread`` costs less than the descriptor and the socket calls a region takes."""


class FetchSlice(NamedTuple):
    """A partition's share of a Fetch response (Kafka's ``FetchDataInfo``)."""

    records: FileRegion | memoryview
    """The bytes as read, or a region of the segment file to send (whoever takes it closes it)."""
    upper_bound_offset: int
    """Above every offset the records hold: how far a read_committed fetch lists aborted transactions."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _guarded(method: Callable[..., _T]) -> Callable[..., _T]:
    """Hold the log's lock, refuse a closed log, and turn OSError into :class:`LogStorageError`."""

    @functools.wraps(method)
    def wrapper(self: "PartitionLog", *args, **kwargs):
        with self._lock:
            if self._closed:
                raise LogClosedError(f"the log in {self.directory} is closed")
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                raise LogStorageError(f"{method.__name__} failed in {self.directory}: {exc}", exc.errno) from exc

    return wrapper


def _offsets_and_max_timestamp(batch: kcodecs.Batch) -> tuple[int | None, int, int]:
    """First offset (None for v0/v1, whose headers hold only the last), last offset and max
    timestamp of a batch; a v2 header is read in one unpack."""
    if isinstance(batch, kcodecs.V2Batch):
        header = batch.header()
        return header.base_offset, header.last_offset, header.max_timestamp
    return None, batch.last_offset, batch.max_timestamp


class PartitionLog:
    """The segments of one partition, oldest first; the last one is active (takes appends).

    Thread-safe: one lock per partition serialises appends, reads and retention.
    """

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment], clock: Callable[[], int],
                 deleted_below: int = 0):
        self.directory = directory
        self.config = config
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self._clock = clock
        self._deleted_below = deleted_below
        """Where DeleteRecords moved the log start (0 if it never did); it may lie inside a segment."""
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)
        """Notified when the cleaner leaves the log (:meth:`cleaning`), which :meth:`delete` waits for."""
        self._closed = False
        self._dirty: set[int] = set()
        """Base offsets of segments written since their last fsync."""
        self._cleaning = False
        """Set while the log cleaner reads sealed segments without the lock (:meth:`cleaning`)."""

    @classmethod
    def open(
        cls, directory: Path | str, config: LogConfig | None = None, *, clock: Callable[[], int] = wall_clock_ms
    ) -> "PartitionLog":
        """Open ``directory`` (``<data_dir>/<topic>-<partition>``), creating it or loading and recovering it.

        ``clock`` (milliseconds) is used only for segments whose first batch has no
        timestamp (magic 0), where ``segment_ms`` falls back to wall-clock age.
        """
        directory = Path(directory)
        config = config or LogConfig()
        try:
            segments = load_segments(directory, config, clock())
            deleted_below = read_log_start_offset(directory)
        except OSError as exc:
            raise LogStorageError(f"cannot open the log in {directory}: {exc}", exc.errno) from exc
        end = segments[-1].next_offset
        if deleted_below > end:
            # Only power loss under flush="os" can lose records the checkpoint was written after.
            log.warning("%s: records were deleted up to offset %d but the log now ends at %d; it starts there",
                        directory, deleted_below, end)
            deleted_below = end
        return cls(directory, config, segments, clock, deleted_below)

    # -- offsets and sizes ------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """The first offset that may be read: the oldest segment's base offset, or past it where
        DeleteRecords moved it (Kafka's ``logStartOffset``)."""
        return max(self._bases[0], self._deleted_below)

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets."""
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def segment_base_offsets(self) -> tuple[int, ...]:
        return tuple(self._bases)

    @property
    def has_sealed_segments(self) -> bool:
        """Whether there is a segment besides the active one: what retention could delete."""
        return len(self._bases) > 1

    # -- append -----------------------------------------------------------------------------

    @_guarded
    def append(
        self,
        data: bytes | bytearray | memoryview,
        *,
        first_offset: int,
        last_offset: int,
        max_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> int:
        """Append validated batches whose offsets start at :attr:`log_end_offset`; return their byte position.

        The position is within the active segment (whose base offset is the last of
        :attr:`segment_base_offsets`). Only headers are read: the arguments must agree with
        them, the bytes must be whole batches and fit one segment, or
        :class:`InvalidAppendError` is raised and nothing is written. Rolls first when
        needed, so a batch never straddles two segments. Under ``flush="always"`` the data
        is on disk (fdatasync) when this returns.
        """
        batches = self._inspect(data, first_offset, last_offset, max_timestamp, offset_of_max_timestamp)
        segment = self._segments[-1]
        reason = segment.should_roll([batch.size for batch in batches], max_timestamp, last_offset, self._clock())
        if reason is not None:
            segment = self._roll(reason)
        position = segment.append(data, batches)
        if self.config.fsync_appends:
            segment.log.flush()
        else:
            self._dirty.add(segment.base_offset)
        return position

    def _inspect(
        self, data: bytes | bytearray | memoryview, first_offset: int, last_offset: int, max_timestamp: int,
        offset_of_max_timestamp: int,
    ) -> list[BatchInfo]:
        """Check the arguments against the batch headers; nothing is written before this passes."""
        expected = self.log_end_offset
        if first_offset != expected:
            raise InvalidAppendError(f"first_offset {first_offset} is not the log end offset {expected}")
        size = data.nbytes if isinstance(data, memoryview) else len(data)
        if size > self.config.segment_bytes:
            raise RecordBatchTooLargeError(size, self.config.segment_bytes)
        batches: list[BatchInfo] = []
        previous_last, batch_max, end = first_offset - 1, NO_TIMESTAMP, 0
        try:
            for batch in kcodecs.iter_batches(data):
                first, last, batch_max_timestamp = _offsets_and_max_timestamp(batch)
                if last <= previous_last or (first is not None and first <= previous_last):
                    raise InvalidAppendError(f"batch at byte {batch.position} has offsets ..{last} after {previous_last}")
                if not batches and first is not None and first != first_offset:
                    raise InvalidAppendError(f"the first batch starts at offset {first}, not first_offset {first_offset}")
                batches.append(BatchInfo(batch.position, batch.size, last, batch_max_timestamp))
                previous_last, batch_max, end = last, max(batch_max, batch_max_timestamp), batch.position + batch.size
        except KcodecsError as exc:
            raise InvalidAppendError(f"the data does not parse as batches: {exc}") from exc
        if not batches or end != size:
            raise InvalidAppendError(f"{size - end} of {size} bytes are not a complete batch")
        if previous_last != last_offset:
            raise InvalidAppendError(f"the last batch ends at offset {previous_last}, not last_offset {last_offset}")
        if batch_max != max_timestamp:
            raise InvalidAppendError(f"the batches' max timestamp is {batch_max}, not max_timestamp {max_timestamp}")
        if not first_offset <= offset_of_max_timestamp <= last_offset:
            raise InvalidAppendError(f"offset_of_max_timestamp {offset_of_max_timestamp} is outside the appended offsets")
        if last_offset - first_offset > INT32_MAX:
            raise InvalidAppendError(f"offsets {first_offset}..{last_offset} cannot fit one segment's int32 relative offsets")
        return batches

    def _roll(self, reason: str) -> LogSegment:
        """Seal the active segment and start one at the log end offset (Kafka's ``roll``)."""
        old = self._segments[-1]
        old.seal()
        try:
            if self.config.fsync_appends:
                old.flush()  # sealed segments are durable, so recovery only needs the last one
            new = LogSegment.create(self.directory, old.next_offset, self.config, self._clock())
        except BaseException:
            old.make_active()
            raise
        if self.config.fsync_appends:
            fsync_dir(self.directory)
        else:
            self._dirty.add(old.base_offset)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        log.debug("%s: rolled segment %d -> %d: %s", self.directory, old.base_offset, new.base_offset, reason)
        return new

    # -- read -------------------------------------------------------------------------------

    def batch_headers(self) -> Iterator[kcodecs.Batch]:
        """Every stored batch, oldest first, headers only (payloads are not parsed): what
        rebuilding the producer state needs when the partition loads, as Kafka's log does
        without a producer snapshot. Not locked: for use before the partition serves."""
        for segment in list(self._segments):
            for _, batch in segment.log.batches():
                yield batch


    @_guarded
    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True, max_offset: int | None = None) -> memoryview:
        """Stored bytes from the batch holding ``offset``: up to ``max_bytes``, but at least that
        whole batch; with ``min_one_batch`` false, nothing when that batch does not fit (KIP-74
        grants the whole batch to a fetch response's first non-empty partition only, so the
        response stays within its ``max_bytes``). Nothing at or past ``max_offset``, a batch
        boundary (read_committed passes the last stable offset).

        Reads one segment per call, as Kafka does; the last batch may be cut short and
        consumers skip it. Empty at :attr:`log_end_offset`; raises
        :class:`OffsetOutOfRangeError` below :attr:`log_start_offset` or past the end.
        """
        found = self._locate(offset, max_bytes, min_one_batch, max_offset)
        if found is None:
            return _EMPTY
        segment, position, length = found
        return memoryview(segment.log.read(position, length))

    @_guarded
    def fetch(self, offset: int, max_bytes: int, *, min_one_batch: bool = True,
              max_offset: int | None = None) -> FetchSlice:
        """What :meth:`read` reads, as a Fetch answers it (Kafka's ``FetchDataInfo``): from
        :data:`SENDFILE_MIN_BYTES` on as a :class:`FileRegion` to send from the file, and with
        an upper bound of its offsets, up to which a read_committed fetch lists the aborted
        transactions (:meth:`LogSegment.upper_bound_offset`)."""
        found = self._locate(offset, max_bytes, min_one_batch, max_offset)
        if found is None:
            return FetchSlice(_EMPTY, offset)
        segment, position, length = found
        records = (segment.log.region(position, length) if length >= SENDFILE_MIN_BYTES
                   else memoryview(segment.log.read(position, length)))
        return FetchSlice(records, segment.upper_bound_offset(position, length))

    def _locate(self, offset: int, max_bytes: int, min_one_batch: bool,
                max_offset: int | None) -> tuple[LogSegment, int, int] | None:
        """The segment, position and length of a read (:meth:`LogSegment.extent`); None when it is empty."""
        if max_bytes < 0:
            raise InvalidArgumentError(f"max_bytes must not be negative, got {max_bytes}")
        self._check_range(offset)
        if max_offset is not None and offset >= max_offset:
            return None
        first = bisect.bisect_right(self._bases, offset) - 1
        for segment in self._segments[first:]:
            if offset < segment.next_offset:
                extent = segment.extent(offset, max_bytes, min_one_batch=min_one_batch, max_offset=max_offset)
                if extent is not None:
                    position, length = extent
                    return (segment, position, length) if length > 0 else None
        return None

    def _check_range(self, offset: int) -> None:
        if not self.log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)

    @_guarded
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record whose timestamp is >= ``timestamp``; None if none is.

        Kafka's ``fetchOffsetByTimestamp``: the first segment whose largest timestamp
        reaches the target, its time index, then a header scan and one decompressed batch.
        The target is taken literally, as Kafka's log does: ListOffsets' special values
        (-1 latest, -2 earliest, -3 max timestamp) are the caller's to map to
        :attr:`log_end_offset` and :attr:`log_start_offset`.
        """
        for segment in self._segments:
            if segment.max_timestamp_and_offset.timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    @_guarded
    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record holding the log's largest timestamp; None
        if no record has one. ListOffsets' MAX_TIMESTAMP (-3, KIP-734) as Kafka's
        ``fetchOffsetByTimestamp`` finds it since 3.8 (KAFKA-16310): the first segment with the
        largest max timestamp, then the first record in it with that time."""
        latest, largest = None, -1  # -1: no timestamp
        for segment in self._segments:
            if segment.max_timestamp_and_offset.timestamp > largest:
                latest, largest = segment, segment.max_timestamp_and_offset.timestamp
        return None if latest is None else latest.find_offset_by_timestamp(largest, self.log_start_offset)

    # -- aborted transactions ----------------------------------------------------------------

    @_guarded
    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index an abort whose marker was just appended (it is in the active segment)."""
        segment = self._segments[-1]
        if not segment.base_offset <= entry.last_offset < segment.next_offset:
            raise InvalidArgumentError(f"abort marker at {entry.last_offset} is not in the active segment"
                                       f" [{segment.base_offset}, {segment.next_offset})")
        segment.txn_index.append(entry)
        if not self.config.fsync_appends:
            self._dirty.add(segment.base_offset)

    @_guarded
    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (Kafka's
        ``LocalLog.collectAbortedTransactions``): from the segment holding ``fetch_offset`` on,
        until an entry's last stable offset shows that later segments cannot add any."""
        first = max(0, bisect.bisect_right(self._bases, fetch_offset) - 1)
        found: list[AbortedTxn] = []
        for segment in self._segments[first:]:
            entries, complete = segment.txn_index.collect(fetch_offset, upper_bound)
            found.extend(entries)
            if complete:
                break
        return found

    @_guarded
    def rebuild_txn_indexes(self, aborted: Iterable[AbortedTxn]) -> int:
        """Refill the transaction indexes that recovery emptied; return how many entries were written.

        ``aborted`` is every abort in the log, oldest first, as the caller replayed it from
        :meth:`batch_headers` (a transaction may start segments before its marker, so only the
        partition's producer state can rebuild an index, as Kafka's recovery does with its
        ``ProducerStateManager``). Entries of segments that loaded cleanly are left alone.
        """
        reset = {segment.base_offset: segment for segment in self._segments if segment.txn_index_reset}
        written = 0
        for entry in aborted:
            segment = self._segments[bisect.bisect_right(self._bases, entry.last_offset) - 1]
            if segment.base_offset in reset:
                segment.txn_index.append(entry)
                written += 1
        for segment in reset.values():
            segment.txn_index_reset = False
            self._dirty.add(segment.base_offset)
        return written

    # -- retention --------------------------------------------------------------------------

    @_guarded
    def delete_old_segments(self, now_ms: int) -> int:
        """Delete whole segments past retention, oldest first; never the active one. Returns how many.

        First those wholly below the log start offset, which DeleteRecords moved (Kafka's
        ``deleteLogStartOffsetBreachedSegments``). Then retention.ms compares ``now_ms`` with
        each segment's largest timestamp (KIP-32; the file's mtime if it has none) and stops at
        the first segment still retained; retention.bytes deletes while the log stays at or
        above the limit without it. The log start offset moves to the new oldest segment.
        Nothing is deleted while the cleaner works on this log (:meth:`cleaning`); the next
        append or timer tick does it.
        """
        if self._cleaning:
            return 0
        deleted = self._delete_below_start()
        retention_ms, retention_bytes = self.config.retention_ms, self.config.retention_bytes
        while len(self._segments) > 1 and retention_ms >= 0 and now_ms - self._segments[0].largest_timestamp > retention_ms:
            self._delete_oldest("retention_ms")
            deleted += 1
        if retention_bytes >= 0:  # summing the segment sizes runs on every append: only when it can matter
            excess = self.size_bytes - retention_bytes
            while len(self._segments) > 1 and excess >= self._segments[0].size:
                excess -= self._segments[0].size
                self._delete_oldest("retention_bytes")
                deleted += 1
        if deleted and self.config.fsync_appends:
            fsync_dir(self.directory)
        return deleted

    @_guarded
    def delete_records(self, offset: int) -> int:
        """Move the log start offset up to ``offset``, at most the log end; return the log start.

        DeleteRecords (Kafka's ``maybeIncrementLogStartOffset``): what lies below can no longer
        be read, fetched or listed, and the segments wholly below it are deleted at once (unless
        the cleaner works on the log: then the next retention run does). The new start is
        checkpointed before this returns (:mod:`.start_offset`), so a restart keeps it. An
        offset at or below the log start changes nothing; one past the log end raises
        :class:`OffsetOutOfRangeError`, and so does a negative one.
        """
        if not 0 <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(offset, self.log_start_offset, self.log_end_offset)
        if offset > self.log_start_offset:
            write_log_start_offset(self.directory, offset)
            self._deleted_below = offset
            log.info("%s: log start offset is now %d (records deleted)", self.directory, offset)
            if not self._cleaning and self._delete_below_start() and self.config.fsync_appends:
                fsync_dir(self.directory)
        return self.log_start_offset

    def _delete_below_start(self) -> int:
        """Delete the segments whose successor starts at or below the log start; return how many."""
        deleted = 0
        while len(self._segments) > 1 and self._bases[1] <= self._deleted_below:
            self._delete_oldest("below the log start offset")
            deleted += 1
        return deleted

    def _delete_oldest(self, reason: str) -> None:
        segment = self._segments.pop(0)
        self._bases.pop(0)
        self._dirty.discard(segment.base_offset)
        segment.delete()
        log.info("%s: deleted segment %d (%s); log start offset is now %d",
                 self.directory, segment.base_offset, reason, self.log_start_offset)

    # -- cleaning ---------------------------------------------------------------------------

    @_guarded
    def cleanable_segments(self) -> list[LogSegment]:
        """Every segment but the active one, oldest first: a snapshot the log cleaner reads
        without the lock (sealed files change only by being replaced under it)."""
        return self._segments[:-1]

    @contextlib.contextmanager
    def cleaning(self) -> Iterator[None]:
        """Hold retention off while the cleaner reads sealed segments without the lock: a
        segment deleted under it would close a file it is reading. Kafka runs retention of
        ``compact,delete`` logs on the cleaner thread for the same reason."""
        with self._lock:
            self._cleaning = True
        try:
            yield
        finally:
            with self._idle:
                self._cleaning = False
                self._idle.notify_all()

    @property
    def active_base_offset(self) -> int:
        """Where the active segment starts: the cleaner never goes past it."""
        return self._bases[-1]

    def create_cleaned_segment(self, base_offset: int) -> LogSegment:
        """An empty segment for the cleaner to write, under ``.cleaned`` names until :meth:`replace_segments`."""
        return LogSegment.create(self.directory, base_offset, self.config, self._clock(), suffix=CLEANED_SUFFIX)

    @_guarded
    def replace_segments(self, cleaned: LogSegment, old: Sequence[LogSegment]) -> bool:
        """Swap ``cleaned`` (sealed and flushed) in for the contiguous sealed segments ``old``
        (Kafka's ``replaceSegments``); False, with ``cleaned`` deleted, if ``old`` are no longer
        all here (a backstop: retention waits while the cleaner works, see :meth:`cleaning`).

        Crash-safe in Kafka's way: the cleaned files are renamed ``.swap`` (the log file last,
        and that rename is the commit point), the old segments are deleted, then the swap files
        take their final names (the log file last). :mod:`.loader` finishes a swap that a
        crash interrupted and discards cleaned files that never became a swap.
        """
        start = next((i for i, segment in enumerate(self._segments) if segment is old[0]), None)
        if start is None or self._segments[start:start + len(old)] != list(old) or start + len(old) >= len(self._segments):
            cleaned.close_handles()
            cleaned.delete()
            return False
        cleaned.rename_files(SWAP_SUFFIX)
        fsync_dir(self.directory)
        for segment in old:
            self._dirty.discard(segment.base_offset)
            segment.delete()
        cleaned.rename_files("")
        fsync_dir(self.directory)
        self._segments[start:start + len(old)] = [cleaned]
        self._bases[start:start + len(old)] = [cleaned.base_offset]
        return True

    # -- configuration ----------------------------------------------------------------------

    @_guarded
    def reconfigure(self, config: LogConfig) -> None:
        """Take new settings at once, after a topic config change (Kafka's ``updateConfig``): the
        active segment rolls by the new segment.bytes and segment.ms from its next append,
        retention deletes by the new limits from its next run. Indexes keep the size they were
        created with; new segments get the new one."""
        self.config = config
        self._segments[-1].config = config

    # -- durability and lifecycle -----------------------------------------------------------

    @_guarded
    def flush(self) -> None:
        """fsync every segment written since its last flush (log and indexes)."""
        self._flush_dirty()

    def _flush_dirty(self) -> None:
        for segment in self._segments:
            if segment.base_offset in self._dirty:
                segment.flush()
        self._dirty.clear()

    def close(self) -> None:
        """Seal and fsync everything, release the files and write the clean-shutdown marker. Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                for segment in self._segments[:-1]:
                    if segment.base_offset in self._dirty:
                        segment.flush()
                    segment.close_handles()
                self._segments[-1].close()  # seals, fsyncs and releases the active segment
                marker = os.open(self.directory / CLEAN_SHUTDOWN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.fsync(marker)
                finally:
                    os.close(marker)
                fsync_dir(self.directory)
            except OSError as exc:
                self.close_handles()
                raise LogStorageError(f"close failed in {self.directory}: {exc}", exc.errno) from exc
            self._closed = True

    def delete(self) -> None:
        """Release the files and remove the partition directory, for good (DeleteTopics).

        As Kafka's ``LogManager.asyncDelete``, the directory is first renamed to a
        ``-delete`` name (:func:`.files.deleted_partition_dir`), so a topic created again under
        the same name never finds these files; the broker removes one that a crash left. A
        clean in progress is waited for first, as Kafka's ``abortAndPauseCleaning`` waits,
        because the cleaner reads sealed segments without the lock. Anything but
        :meth:`close_handles` then raises :class:`LogClosedError`.
        """
        with self._idle:
            self._idle.wait_for(lambda: not self._cleaning)
            for segment in self._segments:
                segment.close_handles()
            self._closed = True
        trash = deleted_partition_dir(self.directory)
        try:
            os.rename(self.directory, trash)
            fsync_dir(self.directory.parent)
            shutil.rmtree(trash)
        except OSError as exc:
            raise LogStorageError(f"cannot delete {self.directory}: {exc}", exc.errno) from exc

    def close_handles(self) -> None:
        """Release files and mappings without trimming, syncing or marking a clean shutdown.

        Kafka's ``closeHandlers``, for a failed disk; tests use it to leave the directory
        as a crashed process would (the next open recovers).
        """
        with self._lock:
            for segment in self._segments:
                segment.close_handles()
            self._closed = True

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<PartitionLog {self.directory} start={self.log_start_offset} end={self.log_end_offset}"
            f" segments={len(self._segments)}>"
        )
