"""What the Kafka client raises on purpose.

::

    KMirrorError                         (kcodecs) root of everything kmirror raises on purpose
    ├── ConnectionFailedError            (connection.py) a broker unreachable, or a connection broken mid-request
    ├── ProtocolError                    (mirror/protocol/errors.py) a response that does not fit its request
    ├── AuthenticationError              (security.py) SASL credentials or a TLS certificate refused; permanent
    ├── ClusterUnreachableError          no broker of a cluster answered, after every retry
    ├── BrokerApiError                   an error code from the broker (non-retriable, or retries used up)
    │   ├── OffsetOutOfRangeError        a fetch outside [log start, high watermark]; never retried
    │   └── UnknownTopicError            metadata never showed the topic
    ├── TopicIdGoneError                 a fetch by topic id (v13) of a topic deleted or made again since
    ├── HangingTransactionError          a read_committed fetch waited past any transaction's time limit
    ├── TopicCreationError               (topic_creation.py) topics the controller refused, each named
    └── InvalidTopicPartitionError       (types.py; also ValueError) text that is not "topic/partition"

Broker error codes are named by kafka-python's ``kafka.errors`` (from Kafka's Errors.java),
so names and retriability cannot drift from Kafka's.
"""

from __future__ import annotations

from uuid import UUID

import kafka.errors as kerr

from kcodecs import KMirrorError

from .connection import ConnectionFailedError, ProtocolError
from .security import AuthenticationError
from .types import InvalidTopicPartitionError, TopicPartition

__all__ = [
    "ConnectionFailedError",
    "ProtocolError",
    "AuthenticationError",
    "ClusterUnreachableError",
    "BrokerApiError",
    "OffsetOutOfRangeError",
    "TopicIdGoneError",
    "UnknownTopicError",
    "HangingTransactionError",
    "InvalidTopicPartitionError",
]


class ClusterUnreachableError(KMirrorError):
    """Every attempt to reach the cluster failed; ``reason`` is the last failure."""

    def __init__(self, bootstrap: str, reason: str):
        super().__init__(f"cluster {bootstrap} unreachable: {reason}")
        self.bootstrap = bootstrap
        self.reason = reason


class BrokerApiError(KMirrorError):
    """An error code in a response. ``retriable`` is Kafka's classification of the code (a raised
    retriable error means the retries were used up); ``detail`` is the broker's own message."""

    def __init__(self, api: str, error_name: str, code: int, retriable: bool, tp: TopicPartition | None = None,
                 *, topic: str | None = None, detail: str | None = None):
        self.api = api
        self.error_name = error_name
        self.code = code
        self.retriable = retriable
        self.tp = tp
        self.topic = topic if topic is not None or tp is None else tp.topic
        self.detail = detail
        self.cluster: str | None = None
        """The bootstrap of the cluster whose broker answered this, once a client's retries of a
        retriable error are used up (:meth:`~mirror.kafka.KafkaClient.retrying`): the outage
        line says which cluster it is (:func:`~mirror.engine.failures.failed_cluster`)."""
        where = f" for {tp}" if tp is not None else (f" for topic {self.topic}" if self.topic is not None else "")
        super().__init__(f"{api}{where}: {error_name} (error code {code})" + (f": {detail}" if detail else ""))

    @classmethod
    def from_code(cls, api: str, code: int, tp: TopicPartition | None = None, *, topic: str | None = None,
                  detail: str | None = None) -> "BrokerApiError":
        error = kerr.for_code(code)
        return cls(api, error.message, code, error_is_retriable(code), tp, topic=topic, detail=detail)


class OffsetOutOfRangeError(BrokerApiError):
    """Kafka's OFFSET_OUT_OF_RANGE: the data at ``offset`` is gone (retention) or not written yet.
    Never retried: the caller decides between failing and skipping (``--on-data-loss``)."""

    def __init__(self, tp: TopicPartition, offset: int, *, log_start_offset: int = -1, high_watermark: int = -1):
        detail = f"offset {offset} is outside [{log_start_offset}, {high_watermark}]"
        super().__init__("Fetch", kerr.OffsetOutOfRangeError.message, kerr.OffsetOutOfRangeError.errno, False, tp,
                         detail=detail)
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.high_watermark = high_watermark


class UnknownTopicError(BrokerApiError):
    """Metadata never listed ``topic``, even after the retries (topics can lag their creation)."""

    def __init__(self, topic: str):
        error = kerr.UnknownTopicOrPartitionError
        super().__init__("Metadata", error.message, error.errno, True, topic=topic)


class TopicIdGoneError(KMirrorError):
    """Fetch v13 named ``tp``'s topic by ``topic_id``, and the leader has no topic of that id any
    more (UNKNOWN_TOPIC_ID, or INCONSISTENT_TOPIC_ID from a leader that holds another topic under
    the name): the topic was deleted, or deleted and made again, since the copy began. The old
    offsets mean nothing in a topic made since, so the copy of the topic stops here; what follows
    is the planner's to decide (:mod:`mirror.engine.topic_identity`)."""

    def __init__(self, tp: TopicPartition, topic_id: UUID, code: int):
        super().__init__(f"{tp}: the source has no topic of id {topic_id} any more ({kerr.for_code(code).__name__}): "
                         f"{tp.topic} was deleted, or deleted and made again, since its copy began")
        self.tp, self.topic_id, self.code = tp, topic_id, code


class HangingTransactionError(KMirrorError):
    """Read committed, ``tp`` stayed stuck at its last stable offset for ``waited_s``: longer than
    a source transaction may stay open, so its coordinator will not end it (a hanging
    transaction, KAFKA-12671). Only an operator can abort it."""

    def __init__(self, tp: TopicPartition, offset: int, last_stable_offset: int, waited_s: float):
        super().__init__(f"{tp}: a source transaction open at offset {last_stable_offset} kept offset {offset} "
                         f"unreadable for {waited_s:.0f} s, longer than any transaction may stay open; abort it "
                         f"at the source (kafka-transactions.sh find-hanging, then abort)")
        self.tp, self.offset, self.last_stable_offset, self.waited_s = tp, offset, last_stable_offset, waited_s


def error_is_retriable(code: int) -> bool:
    """Kafka's RetriableException, which includes InvalidMetadataException (leader moves,
    topics not yet propagated)."""
    error = kerr.for_code(code)
    return bool(error.retriable or error.invalid_metadata)
