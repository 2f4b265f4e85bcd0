"""OffsetFetch (key 9), v1-9: a group's committed offsets, for some partitions or (v2+, a null
topic list) all of them.

A partition without a committed offset, or of a group that does not exist, gets offset -1
and metadata "". From v7, ``require_stable`` (KIP-447; librdkafka sets it for read_committed
consumers) makes a partition with offsets pending in an open transaction answer
UNSTABLE_OFFSET_COMMIT, which clients retry. v8+ ask for several groups at once (KIP-709),
each answered with its own error; v9 adds the member id and epoch of the new consumer
protocol, which Kafka does not check for classic groups either. v1 has no request-level error
code: a group-level error goes on each partition, as from Kafka. v10 names topics by id,
which this broker does not have.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from ..errors import ApiError
from ._api import Api

API = Api(key=9, min_version=1, max_version=9, request=OffsetFetchRequest)

Group = OffsetFetchResponse.OffsetFetchResponseGroup
GroupTopic = Group.OffsetFetchResponseTopics
GroupPartition = GroupTopic.OffsetFetchResponsePartitions
Topic = OffsetFetchResponse.OffsetFetchResponseTopic
Partition = Topic.OffsetFetchResponsePartition


async def handle(request, version: int, state) -> OffsetFetchResponse:
    require_stable = version >= 7 and request.require_stable
    if version >= 8:
        groups = [_group(group.group_id, group.topics, require_stable, state) for group in request.groups]
        return OffsetFetchResponse(version=version, throttle_time_ms=0, groups=[
            Group(group_id=group_id, error_code=error, topics=[
                GroupTopic(name=name, partitions=[GroupPartition(**fields) for fields in partitions])
                for name, partitions in topics.items()])
            for group_id, error, topics in groups])
    _, error, topics = _group(request.group_id, request.topics, require_stable, state)
    if version < 2 and error:
        topics = {topic.name: [_nothing(index, error) for index in topic.partition_indexes] for topic in request.topics}
        error = 0
    return OffsetFetchResponse(version=version, throttle_time_ms=0, error_code=error, topics=[
        Topic(name=name, partitions=[Partition(**fields) for fields in partitions]) for name, partitions in topics.items()])


def _group(group_id: str, topics, require_stable: bool, state) -> tuple[str, int, dict[str, list[dict]]]:
    """One group's answer: its id, its error, and each topic's partitions as response fields."""
    wanted = None if topics is None else [(topic.name, index) for topic in topics for index in topic.partition_indexes]
    try:
        fetched = state.groups.fetch_offsets(group_id, wanted, require_stable)
    except ApiError as exc:
        return group_id, exc.code, {}
    answer: dict[str, list[dict]] = {}
    for (name, index), (offset, leader_epoch, metadata, error) in fetched.items():
        answer.setdefault(name, []).append(dict(partition_index=index, committed_offset=offset,
                                                committed_leader_epoch=leader_epoch, metadata=metadata,
                                                error_code=error))
    return group_id, 0, answer


def _nothing(index: int, error: int) -> dict:
    return dict(partition_index=index, committed_offset=-1, committed_leader_epoch=-1, metadata="", error_code=error)
