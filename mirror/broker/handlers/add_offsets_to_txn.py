"""AddOffsetsToTxn (key 25), v0-3: add a consumer group to the producer's transaction, so that
TxnOffsetCommit can commit its offsets atomically with the produced data
(``send_offsets_to_transaction``).

As in Kafka, what is added is the group's ``__consumer_offsets`` partition
(:func:`mirror.broker.groups.offsets_partition`; the topic is only a name here), through the
same coordinator call as AddPartitionsToTxn: that starts the transaction if needed, and the
partition's marker at EndTxn is what commits or drops the pending offsets
(:class:`mirror.broker.groups.OffsetsTopicMarkers`). Errors as AddPartitionsToTxn's:
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST. v4 (TRANSACTION_ABORTABLE,
KIP-890) is not served.
"""

from __future__ import annotations

from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from ..groups import offsets_partition
from ._api import Api
from ._txn_errors import coordinator_code

API = Api(key=25, min_version=0, max_version=3, request=AddOffsetsToTxnRequest)


async def handle(request, version: int, state) -> AddOffsetsToTxnResponse:
    code = coordinator_code(
        lambda: state.transactions.add_partitions(request.transactional_id, request.producer_id,
                                                  request.producer_epoch, [offsets_partition(request.group_id)]),
        producer_fenced_known=version >= 2,
        request=f"AddOffsetsToTxn of {request.transactional_id!r} for group {request.group_id!r}")
    return AddOffsetsToTxnResponse(version=version, throttle_time_ms=0, error_code=code)
