"""The embedded broker's on-disk partition log, in Kafka's byte layout.

A partition directory ``<data_dir>/<topic>-<partition>/`` holds segments named by their
20-digit base offset (``LogFileUtils``): ``.log`` (batches as appended), ``.index``
(8-byte ``relativeOffset int32 | position int32`` entries, ``OffsetIndex``) and
``.timeindex`` (12-byte ``timestamp int64 | relativeOffset int32`` entries, ``TimeIndex``)
and, once the segment holds an abort marker, ``.txnindex`` (34-byte ``AbortedTxn`` entries),
all big-endian, so Kafka's own tools (``kafka-dump-log.sh``) read them. The layouts are
written down in :mod:`.index`, :mod:`.txn_index` and :mod:`.files`; how entries are placed
in :mod:`.segment`; what opening a directory checks and repairs in :mod:`.loader`; where
DeleteRecords left the log start in :mod:`.start_offset`.

::

    log = PartitionLog.open(data_dir / "orders-0", LogConfig(flush="always"))
    log.append(batch_bytes, first_offset=log.log_end_offset, last_offset=..., max_timestamp=...,
               offset_of_max_timestamp=...)
    data = log.read(offset, max_bytes)            # memoryview of stored bytes, >= one batch
    log.read(offset, max_bytes, max_offset=lso)   # read_committed: nothing from the LSO on
    log.fetch(offset, max_bytes, max_offset=lso)  # the same as a FetchSlice: a FileRegion to sendfile
    log.append_aborted_txn(AbortedTxn(pid, first, marker_offset, lso))
    log.collect_aborted_txns(offset, upper_bound) # [AbortedTxn] overlapping a fetched range
    log.offset_for_timestamp(ts)                  # (offset, timestamp) or None
    log.delete_old_segments(now_ms)
    log.delete_records(offset)                    # DeleteRecords: the log start moves up to offset
    log.reconfigure(LogConfig(retention_ms=...))  # a topic config change, at once
    log.close()                                   # or log.delete(): DeleteTopics removes the directory
"""

from .log_config import LogConfig
from . import errors
from .errors import (
    CorruptIndexError,
    InvalidAppendError,
    InvalidArgumentError,
    LogClosedError,
    LogError,
    LogStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from .file_records import FileRegion
from .files import partition_dir
from .partition_log import SENDFILE_MIN_BYTES, FetchSlice, PartitionLog
from .txn_index import AbortedTxn

__all__ = [
    "PartitionLog",
    "FetchSlice",
    "FileRegion",
    "SENDFILE_MIN_BYTES",
    "LogConfig",
    "AbortedTxn",
    "partition_dir",
    *errors.__all__,
]
