"""Talking the Kafka protocol as a client: one connection (:class:`KafkaConnection`), the
mirror's cluster client (:class:`KafkaClient`: metadata, leader routing, raw fetch and produce),
and the data plane built on it: a multi-partition :class:`Fetcher` and a pipelined
:class:`IdempotentProducer`. Every connection may be TLS and SASL-authenticated
(:class:`Security`)."""

from .client import READ_COMMITTED, READ_UNCOMMITTED, KafkaClient, RetryPolicy
from .fetcher import Fetcher
from .frames import FRAME_SLACK, FrameBuffers
from .pipeline import PipelinedConnection, wait_readable
from .producer import Enqueued, IdempotentProducer, ProducerSequenceError
from .connection import ConnectionFailedError, KafkaConnection, ProtocolError
from .errors import (
    BrokerApiError,
    ClusterUnreachableError,
    HangingTransactionError,
    InvalidTopicPartitionError,
    OffsetOutOfRangeError,
    TopicIdGoneError,
    UnknownTopicError,
)
from .topic_creation import TopicCreationError
from .security import AuthenticationError, SaslCredentials, Security, TlsSettings
from .types import FetchedData, NewTopic, TopicListing, TopicPartition

__all__ = [
    "KafkaClient",
    "READ_UNCOMMITTED",
    "READ_COMMITTED",
    "IdempotentProducer",
    "Enqueued",
    "ProducerSequenceError",
    "Fetcher",
    "FrameBuffers",
    "FRAME_SLACK",
    "PipelinedConnection",
    "wait_readable",
    "RetryPolicy",
    "TopicListing",
    "TopicPartition",
    "FetchedData",
    "NewTopic",
    "KafkaConnection",
    "ConnectionFailedError",
    "ProtocolError",
    "ClusterUnreachableError",
    "BrokerApiError",
    "OffsetOutOfRangeError",
    "HangingTransactionError",
    "TopicIdGoneError",
    "UnknownTopicError",
    "TopicCreationError",
    "InvalidTopicPartitionError",
    "AuthenticationError",
    "Security",
    "TlsSettings",
    "SaslCredentials",
]
