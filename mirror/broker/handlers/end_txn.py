"""EndTxn (key 26), v0-3: commit or abort the producer's transaction.

The coordinator persists the decision before this answers, and writes a COMMIT or ABORT
marker to every partition of the transaction and persists its completion right after, as
Kafka does (:meth:`TransactionCoordinator.end_txn`). Errors as Kafka's: INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), INVALID_TXN_STATE (nothing to end, or
the opposite decision was already taken), CONCURRENT_TRANSACTIONS (markers still to be
written), COORDINATOR_NOT_AVAILABLE (the state could not be persisted), INVALID_REQUEST.

v4 (TRANSACTION_ABORTABLE) and v5 (an epoch bump per transaction, KIP-890 part 2) are not
served: clients then run transactions as Kafka 3.x brokers do.
"""

from __future__ import annotations

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from ._api import Api
from ._txn_errors import coordinator_code

API = Api(key=26, min_version=0, max_version=3, request=EndTxnRequest)


async def handle(request, version: int, state) -> EndTxnResponse:
    code = coordinator_code(
        lambda: state.transactions.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                           request.committed),
        producer_fenced_known=version >= 2, request=f"EndTxn for {request.transactional_id!r}")
    return EndTxnResponse(version=version, throttle_time_ms=0, error_code=code)
