"""The embedded Kafka-compatible broker: the default source and destination cluster.

Kafka's on-disk layout (segments, sparse offset index, time index), offsets assigned
without recompression (KIP-31), LogAppendTime (KIP-32), idempotent produce (KIP-98).
See ``docs/broker.md`` for its scope.
"""

from .embedded import BrokerProcess, EmbeddedBroker, run_foreground
from .state import BrokerConfig

__all__ = ["EmbeddedBroker", "BrokerProcess", "BrokerConfig", "run_foreground"]
