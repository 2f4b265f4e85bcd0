"""OffsetCommit (key 8), v2-9: a consumer's committed offsets, with their metadata strings.

Checks as Kafka's: partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the rest
go to the coordinator (:meth:`GroupCoordinator.commit_offsets`), which refuses the whole
commit with UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (the group waits for
its assignment), GROUP_ID_NOT_FOUND (a member commit to a group that does not exist; v0-8
get ILLEGAL_GENERATION for it, as from Kafka) or COORDINATOR_NOT_AVAILABLE, and one
partition's with OFFSET_METADATA_TOO_LARGE. Commits with generation -1 come from outside
group management (assign() consumers, admins) and are taken while the group has no members.

v2-4's retention time is ignored (offsets do not expire here); v6 adds the leader epoch,
stored and returned by OffsetFetch; v7 adds ``group.instance.id`` (not enforced). v10 names
topics by id, which this broker does not have.
"""

from __future__ import annotations

from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from ..errors import ApiError, kerr
from ._api import Api
from ._offset_commits import all_partitions, by_topic, known_partitions

API = Api(key=8, min_version=2, max_version=9, request=OffsetCommitRequest)

Topic = OffsetCommitResponse.OffsetCommitResponseTopic
Partition = Topic.OffsetCommitResponsePartition


async def handle(request, version: int, state) -> OffsetCommitResponse:
    commits, codes = known_partitions(request.topics, state)
    try:
        if commits:
            codes.update(state.groups.commit_offsets(request.group_id, request.generation_id_or_member_epoch,
                                                     request.member_id, commits))
    except ApiError as exc:
        code = exc.code
        if exc.error is kerr.GroupIdNotFoundError and version < 9:
            code = kerr.IllegalGenerationError.errno
        codes.update(all_partitions(request.topics, code))
    return OffsetCommitResponse(version=version, throttle_time_ms=0, topics=by_topic(codes, Topic, Partition))
