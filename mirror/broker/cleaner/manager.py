"""The log cleaner thread: which compacted partition to clean next, and when (Kafka's
``LogCleanerManager`` and ``CleanerThread``).

Each round reads, on the broker's event loop (where producer state changes), every
compacted partition's log start, last stable offset and producers, then picks the
partition with the largest dirty ratio (dirty bytes over dirty plus clean bytes) at or
above its ``min.cleanable.dirty.ratio``, or any whose oldest dirty batch is older than
``max.compaction.lag.ms``. It cleans that one off the loop, records the new first dirty
offset in the checkpoint, logs one line, and goes again; with nothing to clean it sleeps
``backoff_ms``. A partition whose clean hits a corrupt batch is logged with the error and
left alone until the broker restarts (Kafka's "uncleanable" partitions); its data stays.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from dataclasses import dataclass
from typing import Callable, TypeVar

from ..topics import Partition, TopicStore
from .checkpoint import CleanerCheckpoint
from .clean import CleanStats, CleanTarget, CleanerStopped, CorruptLogError, clean_partition

__all__ = ["CleanerConfig", "LogCleaner", "RunInLoop"]

log = logging.getLogger(__name__)

T = TypeVar("T")
RunInLoop = Callable[[Callable[[], T]], T]
"""Runs a function on the broker's event loop and returns its result (the cleaner's thread
must not read producer state while the loop changes it)."""


@dataclass(frozen=True)
class CleanerConfig:
    """Kafka's broker configs, under their Python names."""

    enable: bool = True
    """``log.cleaner.enable``: False runs no cleaner thread (:meth:`LogCleaner.clean_once` still works)."""
    dedupe_buffer_bytes: int = 128 * 1024 * 1024
    """``log.cleaner.dedupe.buffer.size``: the offset map's memory, and so the keys one clean can map."""
    backoff_ms: int = 15_000
    """``log.cleaner.backoff.ms``: the sleep when no partition needs cleaning."""


@dataclass(frozen=True)
class _Candidate:
    """A compacted partition's cleanable section as one round sees it (Kafka's ``LogToClean``)."""

    partition: Partition
    first_dirty_offset: int
    first_uncleanable_offset: int
    dirty_bytes: int
    ratio: float
    overdue: bool

    @property
    def name(self) -> str:
        return f"{self.partition.topic.name}-{self.partition.index}"

    @property
    def due(self) -> bool:
        """Dirty enough (or for too long) to clean now; never with nothing dirty, whatever the ratio."""
        return self.dirty_bytes > 0 and (
            self.overdue or self.ratio >= self.partition.topic.config.min_cleanable_dirty_ratio)


class LogCleaner:
    def __init__(self, topics: TopicStore, config: CleanerConfig, clock: Callable[[], int]):
        self._topics = topics
        self._config = config
        self._clock = clock
        self._checkpoint = CleanerCheckpoint(topics.data_dir)
        topics.on_delete.append(self._forget)
        self._uncleanable: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._run_in_loop: RunInLoop = lambda function: function()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start the thread (if enabled); producer state is read on ``loop``, the broker's."""
        self._run_in_loop = _loop_runner(loop, self._stop)
        if self._config.enable:
            self._thread = threading.Thread(target=self._run, name="kmirror-log-cleaner", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Abandon a clean in progress (nothing changes on disk) and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                cleaned = self.clean_once()
            except CleanerStopped:
                return
            except Exception:
                log.exception("the log cleaner failed; retrying in %d ms", self._config.backoff_ms)
                cleaned = None
            if cleaned is None:
                self._stop.wait(self._config.backoff_ms / 1000)

    def clean_once(self) -> CleanStats | None:
        """Clean the dirtiest partition that qualifies; None if none does. Thread-safe."""
        with self._lock:
            while (candidate := self._pick()) is not None:
                partition = candidate.partition
                key = (partition.topic.name, partition.index)
                # Only the chosen partition's producers: they are read on the loop, where they change.
                target = CleanTarget(candidate.name, partition.log, partition.topic.config,
                                     candidate.first_dirty_offset, candidate.first_uncleanable_offset,
                                     self._run_in_loop(partition.producers.last_records))
                try:
                    stats = clean_partition(target, map_memory_bytes=self._config.dedupe_buffer_bytes,
                                            now_ms=self._clock(), should_stop=self._stop.is_set)
                except CorruptLogError as exc:
                    self._uncleanable.add(key)
                    log.error("stopped cleaning %s until the broker restarts: %s; nothing was deleted",
                              candidate.name, exc)
                    continue
                if stats is None:
                    return None
                if stats.swapped and self._topics.topics.get(key[0]) is partition.topic:  # not deleted meanwhile
                    self._checkpoint.update(*key, stats.end_offset)
                _log_clean(stats, candidate.ratio)
                return stats
            return None

    def _forget(self, topic: str) -> None:
        """A topic was deleted (on the broker's loop): its checkpoint entries go too. Not under
        ``_lock``: a clean holds it while it waits for the loop."""
        self._checkpoint.forget(topic)
        self._uncleanable = {key for key in self._uncleanable if key[0] != topic}

    def _pick(self) -> _Candidate | None:
        now = self._clock()
        due = [c for c in self._run_in_loop(lambda: self._candidates(now)) if c.due]
        return max(due, key=lambda c: c.ratio, default=None)

    def _candidates(self, now: int) -> list[_Candidate]:
        """Every compacted partition's cleanable section; runs on the loop."""
        found = []
        for topic in list(self._topics.topics.values()):
            if not topic.config.compacted:
                continue
            for partition in topic.partitions:
                if (topic.name, partition.index) not in self._uncleanable:
                    found.append(self._candidate(partition, now))
        return found

    def _candidate(self, partition: Partition, now: int) -> _Candidate:
        """Kafka's ``LogCleanerManager.cleanableOffsets`` and ``LogToClean``."""
        config, log_ = partition.topic.config, partition.log
        checkpoint = self._checkpoint.first_dirty_offset(partition.topic.name, partition.index)
        # Kafka resets a checkpoint outside the log to the log start (the log was truncated,
        # or the topic deleted and created again before its entry was dropped).
        in_log = checkpoint is not None and log_.log_start_offset <= checkpoint <= log_.log_end_offset
        first_dirty = checkpoint if in_log else log_.log_start_offset
        segments = log_.cleanable_segments()
        sealed = [s for s in segments if s.next_offset > first_dirty]
        first_uncleanable = min(partition.last_stable_offset, log_.active_base_offset)
        if config.min_compaction_lag_ms > 0:
            young = next((s.base_offset for s in sealed if s.largest_timestamp > now - config.min_compaction_lag_ms), None)
            if young is not None:
                first_uncleanable = min(first_uncleanable, young)
        first_dirty = min(first_dirty, first_uncleanable)
        clean_bytes = sum(s.size for s in segments if s.next_offset <= first_dirty)
        dirty_bytes = sum(s.size for s in sealed if s.base_offset < first_uncleanable)
        ratio = dirty_bytes / (clean_bytes + dirty_bytes) if dirty_bytes else 0.0
        oldest = sealed[0].rolling_based_timestamp if sealed else None
        overdue = oldest is not None and oldest >= 0 and now - oldest > config.max_compaction_lag_ms
        return _Candidate(partition, first_dirty, first_uncleanable, dirty_bytes, ratio, overdue)


def _loop_runner(loop: asyncio.AbstractEventLoop, stopping: threading.Event) -> RunInLoop:
    """A :data:`RunInLoop` for ``loop`` that gives up with :class:`CleanerStopped` once ``stopping`` is set."""

    def run(function: Callable[[], T]) -> T:
        future: concurrent.futures.Future = concurrent.futures.Future()

        def call() -> None:
            try:
                future.set_result(function())
            except BaseException as exc:
                future.set_exception(exc)

        try:
            loop.call_soon_threadsafe(call)
        except RuntimeError as exc:  # the loop is closed
            raise CleanerStopped("the broker's event loop is closed") from exc
        while True:
            try:
                return future.result(timeout=0.1)
            except concurrent.futures.TimeoutError:
                if stopping.is_set():
                    raise CleanerStopped("the broker is stopping") from None

    return run


def _log_clean(stats: CleanStats, ratio: float) -> None:
    shrink = 100 * (1 - stats.bytes_after / stats.bytes_before) if stats.bytes_before else 0.0
    log.info(
        "cleaned %s (dirty ratio %.2f): %d segments -> %d, %d -> %d bytes (%.0f%% smaller), %d keys, %d of %d records"
        " kept, %d tombstones, %d aborted records and %d markers removed, in %.3f s (%.1f MB/s); dirty section now from"
        " offset %d%s",
        stats.name, ratio, stats.segments_before, stats.segments_after, stats.bytes_before, stats.bytes_after, shrink,
        stats.keys, stats.records_kept, stats.records_read, stats.tombstones_removed, stats.aborted_records_removed,
        stats.markers_removed, stats.seconds, stats.mb_per_s, stats.end_offset,
        "" if stats.swapped else " (the log's segments changed meanwhile: the cleaned copy was discarded, to be redone)",
    )
    if stats.keyless_removed:
        log.warning("%s: removed %d records without a key, which a compacted log cannot keep (written before the"
                    " topic was compacted?)", stats.name, stats.keyless_removed)
