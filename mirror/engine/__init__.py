"""The copy engine: destination topics, and the fetch → route → produce loop over a group of
ranges that runs on Spark executors (or directly, for benchmarks and tests), at-least-once or
in destination transactions (exactly-once)."""

from .clients import client_for, producer_for
from .commit import Committer, open_transaction_wait_s
from .copy import DEFAULT_MAX_BUFFER_BYTES, copy_ranges
from .ranges import CopyRequest, RangeStats, TaskStats
from .exactly_once import copy_exactly_once, fence_tasks, transactional_id
from .offset_syncs import OffsetSyncStore, offset_syncs_topic, offset_syncs_topic_spec
from .offsets_topic import CommittedOffsets, offsets_topic, offsets_topic_spec
from .job import CopyJob, Delivery
from .errors import CorruptSourceError, DataLossError, SourceTruncatedError, TopicMismatchError
from .topics import TopicRoute, selected_topics, sync_destination_topics

__all__ = [
    "client_for",
    "producer_for",
    "CopyJob",
    "Committer",
    "open_transaction_wait_s",
    "Delivery",
    "copy_exactly_once",
    "fence_tasks",
    "transactional_id",
    "CommittedOffsets",
    "offsets_topic",
    "offsets_topic_spec",
    "OffsetSyncStore",
    "offset_syncs_topic",
    "offset_syncs_topic_spec",
    "CopyRequest",
    "RangeStats",
    "TaskStats",
    "copy_ranges",
    "DEFAULT_MAX_BUFFER_BYTES",
    "TopicRoute",
    "selected_topics",
    "sync_destination_topics",
    "CorruptSourceError",
    "DataLossError",
    "SourceTruncatedError",
    "TopicMismatchError",
]
