"""DeleteRecords (key 21), v0-2: move partitions' log start offsets forward.

Per partition, as Kafka's ``ReplicaManager.deleteRecords`` answers: the low watermark (the
new log start offset), which ListOffsets' earliest and Fetch's log start offset report from
then on; offset -1 means the high watermark; OFFSET_OUT_OF_RANGE past it,
POLICY_VIOLATION on a compact-only topic, UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR
when the new start could not be checkpointed (:mod:`mirror.broker.log.start_offset`); a
failed partition's low watermark is -1. Segments wholly below the new start are deleted at
once. The request's timeout is not needed: there are no followers to wait for.
"""

from __future__ import annotations

import logging

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from ..errors import ApiError, kerr
from ..log import LogStorageError
from ._api import Api

API = Api(key=21, min_version=0, max_version=2, request=DeleteRecordsRequest)

log = logging.getLogger(__name__)

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


async def handle(request, version: int, state) -> DeleteRecordsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for want in topic.partitions:
            low_watermark, error = -1, 0
            try:
                low_watermark = state.topics.partition(topic.name, want.partition_index).delete_records(want.offset)
            except ApiError as exc:
                error = exc.code
            except LogStorageError as exc:
                log.error("delete records of %s-%d failed: %s", topic.name, want.partition_index, exc)
                error = kerr.KafkaStorageError.errno
            partitions.append(PartitionResult(partition_index=want.partition_index, low_watermark=low_watermark,
                                              error_code=error))
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return DeleteRecordsResponse(version=version, throttle_time_ms=0, topics=topics)
