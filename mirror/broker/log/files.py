"""File names of a partition directory, as Kafka's ``LogFileUtils`` spells them.

::

    <data_dir>/<topic>-<partition>/
        00000000000000000000.log         record batches exactly as appended (kcodecs formats)
        00000000000000000000.index       offset index, 8-byte entries   (see index.py)
        00000000000000000000.timeindex   time index, 12-byte entries    (see index.py)
        00000000000000000000.txnindex    aborted transactions, 34-byte entries, only once there is one (see txn_index.py)
        00000000000000052731.log         next segment: named by its base offset, 20 digits
        ...
        .kmirror_cleanshutdown           present only between a clean close() and the next open
        .kmirror_log_start_offset        where DeleteRecords moved the log start, if it did (see start_offset.py)
        00000000000000000000.log.cleaned the log cleaner's output while it is written (all four files)
        00000000000000000000.log.swap    cleaned output that is complete: it replaces the segments it covers

Each segment is named by its *base offset*, zero-padded to 20 digits so that names sort
like offsets (``LogFileUtils.filenamePrefixFromOffset``). Kafka keeps one
``.kafka_cleanshutdown`` per data directory; kmirror keeps its marker per partition
directory, under a name Kafka's loader ignores, and so its log start offset checkpoint
(Kafka's ``log-start-offset-checkpoint``, also one per data directory).

A deleted partition's directory is first renamed ``<topic>-<partition>.<32 hex digits>-delete``
(Kafka's ``LogFileUtils.DELETE_DIR_SUFFIX`` naming), then removed; one left by a crash in
between is removed when the broker loads its topics.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

__all__ = [
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "DELETED_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "SEGMENT_SUFFIXES",
    "CLEAN_SHUTDOWN_FILE",
    "LOG_START_OFFSET_FILE",
    "DELETE_DIR_SUFFIX",
    "filename_prefix",
    "log_file",
    "offset_index_file",
    "time_index_file",
    "txn_index_file",
    "segment_base_offset",
    "partition_dir",
    "deleted_partition_dir",
    "fsync_dir",
    "OwnedFile",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
"""Kafka renames files it is about to delete to ``*.deleted``; stray ones are removed on load."""
CLEANED_SUFFIX = ".cleaned"
"""A cleaned segment being written (Kafka's ``CleanedFileSuffix``): removed on load, the originals stand."""
SWAP_SUFFIX = ".swap"
"""A complete cleaned segment about to replace the originals (Kafka's ``SwapFileSuffix``): the
swap is finished on load, see :mod:`.loader`."""
CLEAN_SHUTDOWN_FILE = ".kmirror_cleanshutdown"
LOG_START_OFFSET_FILE = ".kmirror_log_start_offset"
DELETE_DIR_SUFFIX = "-delete"
_MAX_FILE_NAME = 255

SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex)$")


def filename_prefix(offset: int) -> str:
    """``00000000000000000042`` for 42 (``LogFileUtils.filenamePrefixFromOffset``)."""
    return f"{offset:020d}"


def log_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + LOG_SUFFIX)


def offset_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + INDEX_SUFFIX)


def time_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + TIME_INDEX_SUFFIX)


def txn_index_file(directory: Path, base_offset: int) -> Path:
    return directory / (filename_prefix(base_offset) + TXN_INDEX_SUFFIX)


def segment_base_offset(name: str) -> tuple[int, str] | None:
    """``(base_offset, suffix)`` of a segment file name, or None for any other file."""
    match = _SEGMENT_FILE.match(name)
    return (int(match.group(1)), match.group(2)) if match else None


def partition_dir(data_dir: Path, topic: str, partition: int) -> Path:
    """``<data_dir>/<topic>-<partition>``, Kafka's partition directory name."""
    return data_dir / f"{topic}-{partition}"


def deleted_partition_dir(directory: Path) -> Path:
    """A unique name for ``directory`` once it is deleted (Kafka's ``logDeleteDirName``): no
    partition directory ends so, and a topic created again under the old name starts afresh.
    The topic part is cut, as Kafka cuts it, so that a 249-character topic still fits a file name."""
    suffix = f".{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
    topic, partition = directory.name.rsplit("-", 1)
    keep = min(len(topic), _MAX_FILE_NAME - len(suffix) - 1 - len(partition))
    return directory.with_name(f"{topic[:keep]}-{partition}{suffix}")


def fsync_dir(directory: Path) -> None:
    """Make created, renamed or removed names in ``directory`` durable (POSIX needs the directory fsynced)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OwnedFile:
    """A file of a segment held open by one descriptor (-1 while closed): closed once, and
    deleted with the segment. The ``.log`` (:class:`~.file_records.FileRecords`) and the
    ``.txnindex`` (:class:`~.txn_index.TransactionIndex`) are such files."""

    def __init__(self, path: Path, fd: int = -1):
        self.path = path
        self._fd = fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
