"""Talking the Kafka protocol as a client: connections now, the mirror's endpoint client next."""

from .connection import ConnectionFailedError, KafkaConnection, ProtocolError

__all__ = ["KafkaConnection", "ConnectionFailedError", "ProtocolError"]
