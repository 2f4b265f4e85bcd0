"""ListOffsets (key 2), v1-7: earliest (-2), latest (-1), max timestamp (-3, KIP-734, v7: the
first record with the log's largest timestamp), or the first offset at or after a timestamp,
found through the time index.

With isolation level 1 (read_committed, v2+) what a consumer may read ends at the last
stable offset: "latest" is the LSO, and a record found by time at or past it is not found,
as Kafka's ``Partition.fetchOffsetForTimestamp`` answers. A record found answers the leader
epoch of its batch (always 0 here); none found, offset, timestamp and leader epoch -1.
"""

from __future__ import annotations

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from ..errors import ApiError
from ..validator import LEADER_EPOCH
from ._api import Api

API = Api(key=2, min_version=1, max_version=7, request=ListOffsetsRequest)

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
READ_COMMITTED = 1
TopicResult = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResult = TopicResult.ListOffsetsPartitionResponse


async def handle(request, version: int, state) -> ListOffsetsResponse:
    topics = []
    for topic in request.topics:
        partitions = []
        for want in topic.partitions:
            result = PartitionResult(partition_index=want.partition_index, error_code=0, timestamp=-1, offset=-1,
                                     leader_epoch=-1)
            try:
                partition = state.topics.partition(topic.name, want.partition_index)
                plog = partition.log
                readable_end = partition.last_stable_offset if request.isolation_level == READ_COMMITTED else plog.log_end_offset
                if want.timestamp == LATEST:
                    result.offset, result.leader_epoch = readable_end, LEADER_EPOCH
                elif want.timestamp == EARLIEST:
                    result.offset, result.leader_epoch = plog.log_start_offset, LEADER_EPOCH
                else:
                    found = (plog.max_timestamp_offset() if want.timestamp == MAX_TIMESTAMP
                             else plog.offset_for_timestamp(want.timestamp))
                    if found is not None and found[0] < readable_end:
                        (result.offset, result.timestamp), result.leader_epoch = found, LEADER_EPOCH
            except ApiError as exc:
                result.error_code = exc.code
            partitions.append(result)
        topics.append(TopicResult(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(version=version, throttle_time_ms=0, topics=topics)
