"""The embedded Kafka-compatible broker: the default source and destination cluster.

Kafka's on-disk layout (segments, sparse offset index, time index, aborted-transaction
index), offsets assigned without recompression (KIP-31), LogAppendTime (KIP-32), idempotent
and transactional produce with read_committed reads (KIP-98, KIP-890 part 1).
See ``docs/broker.md`` for its scope.
"""

from .embedded import BrokerProcess, EmbeddedBroker, run_foreground
from .state import BrokerConfig

__all__ = ["EmbeddedBroker", "BrokerProcess", "BrokerConfig", "run_foreground"]
