"""ListOffsets (key 2), v1-6: earliest (-2), latest (-1), or the first offset at or after a
timestamp, found through the time index. No transactions, so read_committed answers the same.
"""

from __future__ import annotations

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from ..errors import ApiError

API_KEY = 2
MIN_VERSION = 1
MAX_VERSION = 6
REQUEST = ListOffsetsRequest

LATEST, EARLIEST = -1, -2
TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = TopicResult.ListOffsetsPartitionResponse


async def handle(request, version: int, state) -> ListOffsetsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for want in topic.partitions:
            result = PartitionResult(partition_index=want.partition_index, error_code=0, timestamp=-1, offset=-1, leader_epoch=0)
            try:
                plog = state.topics.partition(topic.name, want.partition_index).log
                if want.timestamp == LATEST:
                    result.offset = plog.log_end_offset
                elif want.timestamp == EARLIEST:
                    result.offset = plog.log_start_offset
                else:
                    found = plog.offset_for_timestamp(want.timestamp)
                    if found is not None:
                        result.offset, result.timestamp = found
            except ApiError as exc:
                result.error_code = exc.code
            partitions.append(result)
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)
