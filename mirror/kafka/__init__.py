"""Talking the Kafka protocol as a client: one connection (:class:`KafkaConnection`) and the
mirror's cluster client (:class:`KafkaClient`: metadata, leader routing, raw fetch and produce)."""

from .client import KafkaClient, RetryPolicy
from .connection import ConnectionFailedError, KafkaConnection, ProtocolError
from .errors import (
    BrokerApiError,
    ClusterUnreachableError,
    InvalidTopicPartitionError,
    OffsetOutOfRangeError,
    UnknownTopicError,
)
from .types import FetchedData, NewTopic, TopicPartition

__all__ = [
    "KafkaClient",
    "RetryPolicy",
    "TopicPartition",
    "FetchedData",
    "NewTopic",
    "KafkaConnection",
    "ConnectionFailedError",
    "ProtocolError",
    "ClusterUnreachableError",
    "BrokerApiError",
    "OffsetOutOfRangeError",
    "UnknownTopicError",
    "InvalidTopicPartitionError",
]
