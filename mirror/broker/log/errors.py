"""What the partition log raises on purpose.

::

    KMirrorError                          (kcodecs) root of everything kmirror raises on purpose
    └── LogError                          the on-disk partition log
        ├── OffsetOutOfRangeError         a read outside [log_start_offset, log_end_offset]
        ├── InvalidArgumentError          (also ValueError) a config value or argument the log cannot use
        │   └── InvalidAppendError        append arguments that disagree with the bytes or the log
        │       └── RecordBatchTooLargeError   one append larger than segment_bytes
        ├── LogClosedError                the log was used after close()
        └── LogStorageError               an OSError from the file system (``errno`` kept, cause chained)

Corrupt bytes found while reading a segment surface as :class:`kcodecs.CorruptBatchError`.
A corrupt index file never escapes: :class:`CorruptIndexError` is raised and caught inside
the package, and the index is rebuilt from its segment (Kafka's ``CorruptIndexException``).
"""

from __future__ import annotations

from kcodecs import KMirrorError

__all__ = [
    "LogError",
    "OffsetOutOfRangeError",
    "InvalidArgumentError",
    "InvalidAppendError",
    "RecordBatchTooLargeError",
    "LogClosedError",
    "LogStorageError",
    "CorruptIndexError",
]


class LogError(KMirrorError):
    """Root of the errors of :mod:`mirror.broker.log`."""


class OffsetOutOfRangeError(LogError):
    """Kafka's OFFSET_OUT_OF_RANGE: ``offset`` is below the log start or past the log end."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int):
        super().__init__(
            f"offset {offset} is outside the log range [{log_start_offset}, {log_end_offset}]"
        )
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class InvalidArgumentError(LogError, ValueError):
    """A configuration value or an argument the log cannot work with; nothing was changed."""


class InvalidAppendError(InvalidArgumentError):
    """``append`` was given bytes or offsets that do not fit the log; nothing was written."""


class RecordBatchTooLargeError(InvalidAppendError):
    """One append is larger than a whole segment may be (Kafka's RECORD_LIST_TOO_LARGE)."""

    def __init__(self, size: int, limit: int):
        super().__init__(f"append of {size} bytes exceeds segment_bytes = {limit}")
        self.size = size
        self.limit = limit


class LogClosedError(LogError):
    """The log was closed; open it again to use it."""


class LogStorageError(LogError):
    """The file system failed (Kafka's KafkaStorageException); ``errno`` comes from the OSError."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


class CorruptIndexError(LogError):
    """An index file that cannot be trusted; the loader rebuilds it from the segment's log."""
