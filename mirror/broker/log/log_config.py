"""Per-partition log settings: the subset of Kafka's topic ``LogConfig`` the log itself uses.

Not a topic's Kafka configs: :mod:`mirror.broker.topic_config` parses and validates those
(``segment.bytes``, ``cleanup.policy``, ...), and the topic store derives a :class:`LogConfig`
from them for each partition's log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import InvalidArgumentError

__all__ = ["LogConfig", "INT32_MAX"]

INT32_MAX = 2**31 - 1
_DAY_MS = 24 * 3600 * 1000
_MIN_SEGMENT_BYTES = 14
"""Kafka's lower bound for segment.bytes: the smallest v0 message (``LegacyRecord.RECORD_OVERHEAD_V0``)."""
_MIN_INDEX_BYTES = 24
"""Room for two time index entries: Kafka reserves the last one for the entry written on roll."""


@dataclass(frozen=True)
class LogConfig:
    """Kafka's names in parentheses; defaults are Kafka's.

    ``segment_bytes`` (segment.bytes): roll before an append would make the active segment
    larger. At most 2 GiB - 1, because index entries store positions as int32.
    ``segment_ms`` (segment.ms): roll when an incoming batch's max timestamp is more than
    this past the max timestamp of the segment's first batch (KIP-32; not file times).
    ``index_interval_bytes`` (index.interval.bytes): bytes of log between index entries.
    ``max_index_bytes`` (segment.index.bytes): preallocated size of each index of the active
    segment; the segment rolls when an index would overflow it.
    ``retention_ms`` / ``retention_bytes`` (retention.ms / retention.bytes): -1 keeps forever.
    ``flush`` (kmirror's policy, Kafka's flush.messages=1 versus the default):

    - ``"always"``: ``append`` fsyncs (fdatasync) the log file before it returns, so an
      acknowledged append survives power loss. Indexes are not fsynced per append (they are
      rebuilt from the log after an unclean shutdown); a segment's log and indexes are
      fsynced when it rolls and on close, so after a crash only the last segment is checked.
    - ``"os"``: writes go to the page cache and the kernel writes them back. A crashed process
      loses nothing; power loss may lose or tear recent appends in any segment, so after an
      unclean shutdown every segment is checked (CRC) and truncated at the first bad batch.

    ``close()`` fsyncs everything under both policies before writing its clean-shutdown marker.
    """

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * _DAY_MS
    index_interval_bytes: int = 4096
    max_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * _DAY_MS
    retention_bytes: int = -1
    flush: Literal["always", "os"] = "os"

    def __post_init__(self) -> None:
        problems = []
        if not _MIN_SEGMENT_BYTES <= self.segment_bytes <= INT32_MAX:
            problems.append(f"segment_bytes must be in [{_MIN_SEGMENT_BYTES}, {INT32_MAX}], got {self.segment_bytes}")
        if self.segment_ms < 1:
            problems.append(f"segment_ms must be at least 1, got {self.segment_ms}")
        if not 0 <= self.index_interval_bytes <= INT32_MAX:
            problems.append(f"index_interval_bytes must be in [0, {INT32_MAX}], got {self.index_interval_bytes}")
        if not _MIN_INDEX_BYTES <= self.max_index_bytes <= INT32_MAX:
            problems.append(f"max_index_bytes must be in [{_MIN_INDEX_BYTES}, {INT32_MAX}], got {self.max_index_bytes}")
        if self.retention_ms < -1 or self.retention_bytes < -1:
            problems.append(
                f"retention_ms and retention_bytes must be -1 or more, got {self.retention_ms}, {self.retention_bytes}"
            )
        if self.flush not in ("always", "os"):
            problems.append(f"flush must be 'always' or 'os', got {self.flush!r}")
        if problems:
            raise InvalidArgumentError("invalid log config: " + "; ".join(problems))

    @property
    def fsync_appends(self) -> bool:
        return self.flush == "always"
