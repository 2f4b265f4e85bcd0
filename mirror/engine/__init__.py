"""The copy engine: destination topics, and the fetch → route → produce loop over a group of
ranges that runs on Spark executors (or directly, for benchmarks and tests)."""

from .clients import client_for, producer_for
from .copy import DEFAULT_MAX_BUFFER_BYTES, CopyJob, CopyRequest, RangeStats, TaskStats, copy_ranges
from .errors import CorruptSourceError, DataLossError, SourceTruncatedError, TopicMismatchError
from .topics import COPIED_CONFIGS, TopicRoute, selected_topics, sync_destination_topics

__all__ = [
    "client_for",
    "producer_for",
    "CopyJob",
    "CopyRequest",
    "RangeStats",
    "TaskStats",
    "copy_ranges",
    "DEFAULT_MAX_BUFFER_BYTES",
    "TopicRoute",
    "selected_topics",
    "sync_destination_topics",
    "COPIED_CONFIGS",
    "CorruptSourceError",
    "DataLossError",
    "SourceTruncatedError",
    "TopicMismatchError",
]
