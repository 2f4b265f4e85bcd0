"""The embedded broker's transaction coordinator (KIP-98, Kafka 3.x semantics with KIP-890
part 1 verification), beside :mod:`..handlers` (thin: decode, call, encode) and :mod:`..log`.

- :mod:`.metadata`: a transactional id's state and its legal transitions, pure;
- :mod:`.state_log`: where those states are persisted and replayed from;
- :mod:`.markers`: writing COMMIT/ABORT markers to partitions;
- :mod:`.coordinator`: the requests (InitProducerId, AddPartitionsToTxn, EndTxn, the
  verification of transactional Produce), the timeout, in-doubt recovery and the expiry of
  idle transactional ids.

The partition side of transactions (open transactions, the last stable offset, the
aborted-transaction index) lives with the partition: :mod:`..producer_state`, :mod:`..topics`.
"""

from .coordinator import COORDINATOR_EPOCH, DEFAULT_ID_EXPIRATION_MS, DEFAULT_MAX_TIMEOUT_MS, TransactionCoordinator
from .markers import MarkerWriter, PartitionMarkers
from .metadata import TxnMetadata, TxnState
from .state_log import TransactionStateLog

__all__ = [
    "TransactionCoordinator",
    "TransactionStateLog",
    "MarkerWriter",
    "PartitionMarkers",
    "TxnMetadata",
    "TxnState",
    "COORDINATOR_EPOCH",
    "DEFAULT_MAX_TIMEOUT_MS",
    "DEFAULT_ID_EXPIRATION_MS",
]
