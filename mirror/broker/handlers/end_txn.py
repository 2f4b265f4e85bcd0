"""EndTxn (key 26), v0-5: commit or abort the producer's transaction.

The coordinator persists the decision before this answers, and writes a COMMIT or ABORT
marker to every partition of the transaction and persists its completion right after, as
Kafka does (:meth:`TransactionCoordinator.end_txn`). Errors as Kafka's: INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), INVALID_TXN_STATE (nothing to end, or
the opposite decision was already taken), CONCURRENT_TRANSACTIONS (markers still to be
written), COORDINATOR_NOT_AVAILABLE (the state could not be persisted), INVALID_REQUEST.

v5 is transactions v2 (KIP-890 part 2): the end bumps the producer epoch, and the answer
names the producer id and epoch of the next transaction (a new producer id once the epochs
run out). v4 only adds TRANSACTION_ABORTABLE, which this coordinator never answers. A broker
whose ``transaction_version`` is 1 offers v4 at most (:mod:`.api_versions`), as Kafka does.
"""

from __future__ import annotations

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from ._api import Api
from ._txn_errors import coordinator_code

API = Api(key=26, min_version=0, max_version=5, request=EndTxnRequest)

TRANSACTIONS_V2 = 5
"""The first EndTxn version of transactions v2."""


async def handle(request, version: int, state) -> EndTxnResponse:
    identity: list[tuple[int, int]] = []
    code = coordinator_code(
        lambda: identity.append(state.transactions.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
            bump=version >= TRANSACTIONS_V2)),
        producer_fenced_known=version >= 2, request=f"EndTxn for {request.transactional_id!r}")
    if version < TRANSACTIONS_V2:
        return EndTxnResponse(version=version, throttle_time_ms=0, error_code=code)
    producer_id, epoch = identity[0] if identity else (-1, -1)
    return EndTxnResponse(version=version, throttle_time_ms=0, error_code=code, producer_id=producer_id,
                          producer_epoch=epoch)
