"""TxnOffsetCommit (key 28), v0-3: consumer offsets committed inside a producer's transaction
(``send_offsets_to_transaction``), visible only once it commits.

As Kafka 3.6+ (KIP-890 part 1), the transaction coordinator first verifies that the producer
id and epoch own an ongoing transaction to which AddOffsetsToTxn added this group's
``__consumer_offsets`` partition; its refusals reach the producer as Kafka's group
coordinator maps them: INVALID_PRODUCER_EPOCH (fenced), INVALID_PRODUCER_ID_MAPPING,
INVALID_TXN_STATE (the group was not added), COORDINATOR_NOT_AVAILABLE (markers still being
written). Then partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the group
coordinator keeps the rest pending (:meth:`GroupCoordinator.commit_transactional_offsets`):
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID for a v3 request naming a member or generation the
group does not have (KIP-447 fencing of zombie consumers), INVALID_GROUP_ID, per partition
OFFSET_METADATA_TOO_LARGE.

v2 adds the leader epoch, v3 the member id, generation and ``group.instance.id``. v4-5 are
for transaction version 2 (KIP-890 part 2), which the transaction coordinator does not run.
"""

from __future__ import annotations

import logging

from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from ..errors import ApiError, kerr
from ..groups import offsets_partition
from ._api import Api
from ._offset_commits import all_partitions, by_topic, known_partitions

API = Api(key=28, min_version=0, max_version=3, request=TxnOffsetCommitRequest)

log = logging.getLogger(__name__)

Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
Partition = Topic.TxnOffsetCommitResponsePartition


async def handle(request, version: int, state) -> TxnOffsetCommitResponse:
    generation, member_id = (request.generation_id, request.member_id) if version >= 3 else (-1, "")
    try:
        _verify(request, state)
        commits, codes = known_partitions(request.topics, state)
        if commits:
            codes.update(state.groups.commit_transactional_offsets(request.group_id, request.producer_id, generation,
                                                                   member_id, commits))
    except ApiError as exc:
        log.info("TxnOffsetCommit of %r for group %r refused: %s", request.transactional_id, request.group_id, exc)
        codes = all_partitions(request.topics, exc.code)
    return TxnOffsetCommitResponse(version=version, throttle_time_ms=0, topics=by_topic(codes, Topic, Partition))


def _verify(request, state) -> None:
    try:
        state.transactions.verify(request.transactional_id, request.producer_id, request.producer_epoch,
                                  offsets_partition(request.group_id))
    except ApiError as exc:
        raise _as_offset_commit_error(exc) from exc


def _as_offset_commit_error(exc: ApiError) -> ApiError:
    """The coordinator's verdict as Kafka's ``AddPartitionsToTxnManager`` and group coordinator
    hand it to a TxnOffsetCommit (through NOT_ENOUGH_REPLICAS for the retriable ones)."""
    if exc.error is kerr.ProducerFencedError:
        return ApiError(kerr.InvalidProducerEpochError, exc.message)
    if exc.error in (kerr.ConcurrentTransactionsError, kerr.CoordinatorNotAvailableError):
        return ApiError(kerr.CoordinatorNotAvailableError, exc.message)
    return exc
