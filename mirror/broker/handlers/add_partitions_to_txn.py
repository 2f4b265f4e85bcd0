"""AddPartitionsToTxn (key 24), v0-3: the client's request to add partitions to its transaction.

v4+ are Kafka's broker-to-broker batched and verify-only form (KIP-890); a single node
verifies transactional Produce requests in process instead, so they are not served.

As Kafka's ``handleAddPartitionsToTxnRequest``: if any partition does not exist, none is
added; those get UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED.
Otherwise the coordinator's one answer goes to every partition: none, or
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2),
CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (empty id).
"""

from __future__ import annotations

from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from ..errors import kerr
from ._api import Api
from ._txn_errors import coordinator_code

API = Api(key=24, min_version=0, max_version=3, request=AddPartitionsToTxnRequest)

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult


async def handle(request, version: int, state) -> AddPartitionsToTxnResponse:
    wanted = [(topic.name, index) for topic in request.v3_and_below_topics for index in topic.partitions]
    missing = {tp for tp in wanted if not state.topics.has_partition(*tp)}
    if missing:
        errors = {tp: kerr.UnknownTopicOrPartitionError.errno if tp in missing else kerr.OperationNotAttemptedError.errno
                  for tp in wanted}
    else:
        code = coordinator_code(
            lambda: state.transactions.add_partitions(request.v3_and_below_transactional_id,
                                                      request.v3_and_below_producer_id,
                                                      request.v3_and_below_producer_epoch, wanted),
            producer_fenced_known=version >= 2,
            request=f"AddPartitionsToTxn of {request.v3_and_below_transactional_id!r}")
        errors = dict.fromkeys(wanted, code)
    return AddPartitionsToTxnResponse(version=version, throttle_time_ms=0, results_by_topic_v3_and_below=_by_topic(errors))


def _by_topic(errors: dict[tuple[str, int], int]) -> list:
    topics: dict[str, list] = {}
    for (topic, index), code in errors.items():
        topics.setdefault(topic, []).append(PartitionResult(partition_index=index, partition_error_code=code))
    return [TopicResult(name=name, results_by_partition=results) for name, results in topics.items()]
