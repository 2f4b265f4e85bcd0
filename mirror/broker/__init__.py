"""The embedded Kafka-compatible broker: the default source and destination cluster.

Kafka's on-disk layout (segments, sparse offset index, time index, aborted-transaction
index), offsets assigned without recompression (KIP-31), LogAppendTime (KIP-32), idempotent
produce, and:

- transactions: a transaction coordinator (:mod:`.transactions`) for transactional
  producers, COMMIT/ABORT markers, read_committed reads up to the last stable offset
  (KIP-98, KIP-890 part 1);
- consumer groups: a group coordinator (:mod:`.groups`) with Kafka's classic rebalance
  protocol, committed offsets and offsets committed in a transaction (KIP-447).

Both coordinators persist their state in a log file of CRC-framed records (:mod:`.coordinator_log`).
See ``docs/broker.md`` for its scope.
"""

from .embedded import BrokerProcess, EmbeddedBroker, run_foreground
from .state import BrokerConfig

__all__ = ["EmbeddedBroker", "BrokerProcess", "BrokerConfig", "run_foreground"]
