"""ListOffsets (key 2), v1-6: earliest (-2), latest (-1), or the first offset at or after a
timestamp, found through the time index.

With isolation level 1 (read_committed, v2+) what a consumer may read ends at the last
stable offset: "latest" is the LSO, and a timestamp whose first record lies at or past it is
not found, as Kafka's ``Partition.fetchOffsetForTimestamp`` answers.
"""

from __future__ import annotations

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from ..errors import ApiError

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 6
REQUEST = ListOffsetsRequest

LATEST, EARLIEST = -1, -2
READ_COMMITTED = 1
TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = TopicResult.ListOffsetsPartitionResponse


async def handle(request, version: int, state) -> ListOffsetsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for want in topic.partitions:
            result = PartitionResult(partition_index=want.partition_index, error_code=0, timestamp=-1, offset=-1, leader_epoch=0)
            try:
                partition = state.topics.partition(topic.name, want.partition_index)
                plog = partition.log
                readable_end = partition.last_stable_offset if request.isolation_level == READ_COMMITTED else plog.log_end_offset
                if want.timestamp == LATEST:
                    result.offset = readable_end
                elif want.timestamp == EARLIEST:
                    result.offset = plog.log_start_offset
                else:
                    found = plog.offset_for_timestamp(want.timestamp)
                    if found is not None and found[0] < readable_end:
                        result.offset, result.timestamp = found
            except ApiError as exc:
                result.error_code = exc.code
            partitions.append(result)
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)
