"""Opening a partition directory: clean up, load or recover each segment (Kafka's ``LogLoader``).

What gets checked, from cheapest to most thorough:

1. A log cleaner's work that a crash interrupted is settled first (Kafka's
   ``LogLoader.removeTempFilesAndCollectSwapFiles`` and ``completeSwapOperations``):
   ``*.cleaned`` files are removed, the segments they were to replace stand; a complete swap
   (``<base>.log.swap`` exists) replaces every segment whose base offset lies in
   ``[base, end of the swap's last batch]``, its indexes to be rebuilt if any was already
   renamed; swap index files without their ``.log.swap`` (renamed before it) are removed.
   Then stray ``*.deleted`` files and index files without a ``.log`` are removed.
2. After a clean shutdown (the marker written by ``close()`` is present), every segment is
   *loaded*: its indexes must pass ``sanity_check`` and the batches after the last offset
   index entry (header-only) must end exactly at the end of the file.
3. After an unclean shutdown, the segments that may hold unflushed data are *recovered*:
   every batch is read and its CRC checked (``Batch.validate``, no decompression), the file
   is truncated at the first torn or corrupt batch and both indexes are rebuilt (the
   transaction index is emptied, for the partition to refill from its producer state). Under
   ``flush="always"`` that is only the last segment, because a segment is fsynced when it
   rolls; under ``flush="os"`` it is every segment (Kafka tracks a recovery point instead).
   As in Kafka's ``recoverLog``, when a recovered segment had to be truncated every later
   segment is deleted: nothing after a hole in the log can be trusted.
4. A segment that fails a load check is recovered the same way (a missing or corrupt index
   is rebuilt), but later segments are kept, as Kafka's ``loadSegmentFiles`` does.

Each repaired segment gets one log line. The log start offset is the first segment's base
offset, or past it where DeleteRecords moved it (:mod:`.start_offset`), and the log end
offset the last segment's next offset.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .log_config import LogConfig
from kcodecs import KcodecsError

from .file_records import FileRecords
from .files import (
    CLEAN_SHUTDOWN_FILE,
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_SUFFIXES,
    SWAP_SUFFIX,
    filename_prefix,
    fsync_dir,
    segment_base_offset,
)
from .segment import LogSegment, RecoveryResult

__all__ = ["load_segments"]

log = logging.getLogger(__name__)

_UNCLEAN = "unclean shutdown"


def load_segments(directory: Path, config: LogConfig, now_ms: int) -> list[LogSegment]:
    """Every segment of ``directory`` in offset order, the last one writable; creates the directory if needed."""
    directory.mkdir(parents=True, exist_ok=True)
    marker = directory / CLEAN_SHUTDOWN_FILE
    clean = marker.exists()
    if clean:
        marker.unlink()
        fsync_dir(directory)  # from here on, a crash must not look like a clean shutdown
    _settle_cleaning(directory)
    bases = _remove_strays(directory)
    if not bases:
        segment = LogSegment.create(directory, 0, config, now_ms)
        if config.fsync_appends:
            fsync_dir(directory)
        return [segment]
    segments: list[LogSegment] = []
    try:
        for base in bases:
            segments.append(LogSegment.open(directory, base, config, now_ms))
        return _load_or_recover(directory, segments, bases, config, clean)
    except BaseException:
        for segment in segments:
            segment.close_handles()
        raise


def _load_or_recover(
    directory: Path, segments: list[LogSegment], bases: list[int], config: LogConfig, clean: bool
) -> list[LogSegment]:
    if clean:
        first_unflushed = len(segments)
    elif config.fsync_appends:
        first_unflushed = len(segments) - 1
    else:
        first_unflushed = 0
    loaded: list[LogSegment] = []
    for i, segment in enumerate(segments):
        upper_bound = bases[i + 1] if i + 1 < len(bases) else None
        problem = _UNCLEAN if i >= first_unflushed else segment.load(upper_bound)
        loaded.append(segment)
        if problem is None:
            continue
        result = segment.recover(upper_bound)
        _log_recovery(directory, segment, problem, result)
        if problem == _UNCLEAN and result.truncated_bytes and i + 1 < len(segments):
            for later in segments[i + 1 :]:
                log.warning("%s: deleting segment %d, which follows the truncation", directory, later.base_offset)
                later.delete()
            break
    for segment in loaded[:-1]:
        segment.seal()
    loaded[-1].make_active()
    return loaded


def _settle_cleaning(directory: Path) -> None:
    swaps: dict[int, set[str]] = {}
    for entry in os.scandir(directory):
        if entry.name.endswith(CLEANED_SUFFIX):
            log.warning("%s: removing %s, left by a log cleaning that did not finish", directory, entry.name)
            os.unlink(entry.path)
        elif entry.name.endswith(SWAP_SUFFIX) and (parsed := segment_base_offset(entry.name[: -len(SWAP_SUFFIX)])):
            swaps.setdefault(parsed[0], set()).add(parsed[1])
    for base, suffixes in sorted(swaps.items()):
        if LOG_SUFFIX not in suffixes:
            for suffix in suffixes:
                (directory / f"{filename_prefix(base)}{suffix}{SWAP_SUFFIX}").unlink()
            log.warning("%s: removed the incomplete swap of cleaned segment %d; the original segments stand", directory, base)
            continue
        swap = directory / f"{filename_prefix(base)}{LOG_SUFFIX}{SWAP_SUFFIX}"
        end = max(_next_offset(swap, base), base + 1)
        replaced = sorted({parsed[0] for name in os.listdir(directory)
                           if (parsed := segment_base_offset(name)) is not None and base <= parsed[0] < end})
        for old in replaced:
            for suffix in SEGMENT_SUFFIXES:
                (directory / f"{filename_prefix(old)}{suffix}").unlink(missing_ok=True)
        for suffix in sorted(suffixes, key=lambda suffix: suffix == LOG_SUFFIX):  # the log file last
            os.rename(directory / f"{filename_prefix(base)}{suffix}{SWAP_SUFFIX}", directory / f"{filename_prefix(base)}{suffix}")
        log.warning("%s: completed the swap of cleaned segment %d that a crash interrupted; it replaces segments %s",
                    directory, base, replaced)
    if swaps:
        fsync_dir(directory)


def _next_offset(path: Path, base: int) -> int:
    """One past the last offset of the complete batches in ``path``; ``base`` if it has none."""
    records = FileRecords.open(path)
    end = base
    try:
        for _, batch in records.batches():
            end = batch.last_offset + 1
    except KcodecsError:
        pass  # recovery truncates at the same batch
    finally:
        records.close()
    return end


def _remove_strays(directory: Path) -> list[int]:
    """Delete ``*.deleted`` files and orphan indexes; return the base offsets that have a ``.log``."""
    found: dict[int, set[str]] = {}
    for entry in os.scandir(directory):
        if not entry.is_file():
            continue
        if entry.name.endswith(DELETED_SUFFIX):
            log.info("%s: removing stray %s", directory, entry.name)
            os.unlink(entry.path)
            continue
        parsed = segment_base_offset(entry.name)
        if parsed is not None:
            found.setdefault(parsed[0], set()).add(parsed[1])
    for base, suffixes in found.items():
        if LOG_SUFFIX not in suffixes:
            for suffix in suffixes:
                log.warning("%s: removing orphan index %020d%s (no log file)", directory, base, suffix)
                (directory / f"{base:020d}{suffix}").unlink(missing_ok=True)
    return sorted(base for base, suffixes in found.items() if LOG_SUFFIX in suffixes)


def _log_recovery(directory: Path, segment: LogSegment, problem: str, result: RecoveryResult) -> None:
    name = f"{directory}/{segment.base_offset:020d}.log"
    if result.truncated_bytes:
        log.warning(
            "recovered %s (%s): kept %d batches (%d bytes), truncated %d bytes: %s; indexes rebuilt",
            name, problem, result.batches, result.valid_bytes, result.truncated_bytes, result.reason,
        )
    elif problem == _UNCLEAN:
        log.info("recovered %s (%s): %d batches (%d bytes) valid; indexes rebuilt",
                 name, problem, result.batches, result.valid_bytes)
    else:
        log.warning("rebuilt the indexes of %s: %s (%d batches, %d bytes valid)",
                    name, problem, result.batches, result.valid_bytes)
