"""The copy engine: destination topics, and the per-range fetch → route → produce loop that
runs on Spark executors (or directly, for benchmarks and tests)."""

from .clients import client_for
from .copy import CopyJob, CopyRequest, RangeStats, copy_range
from .errors import CorruptSourceError, DataLossError, SourceTruncatedError, TopicMismatchError
from .topics import COPIED_CONFIGS, TopicRoute, selected_topics, sync_destination_topics

__all__ = [
    "client_for",
    "CopyJob",
    "CopyRequest",
    "RangeStats",
    "copy_range",
    "TopicRoute",
    "selected_topics",
    "sync_destination_topics",
    "COPIED_CONFIGS",
    "CorruptSourceError",
    "DataLossError",
    "SourceTruncatedError",
    "TopicMismatchError",
]
