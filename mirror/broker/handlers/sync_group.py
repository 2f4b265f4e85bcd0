"""SyncGroup (key 14), v0-5: the leader hands in the assignments, every member gets its own.

Long-polled like JoinGroup: a member's request waits until the leader's arrives
(:meth:`GroupCoordinator.sync_group`). v3 adds ``group.instance.id`` (not enforced); from
v5 the request must name the protocol type and name, which must be the group's
(INCONSISTENT_GROUP_PROTOCOL otherwise, as Kafka's ``KafkaApis`` checks), and the answer
names them. Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS (a new
rebalance began: rejoin), INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
"""

from __future__ import annotations

from kafka.protocol.consumer import SyncGroupRequest, SyncGroupResponse

from ..errors import kerr
from ._api import Api

API = Api(key=14, min_version=0, max_version=5, request=SyncGroupRequest)


async def handle(request, version: int, state) -> SyncGroupResponse:
    protocol_type = request.protocol_type if version >= 5 else None
    protocol_name = request.protocol_name if version >= 5 else None
    if version >= 5 and (protocol_type is None or protocol_name is None):
        return SyncGroupResponse(version=version, throttle_time_ms=0,
                                 error_code=kerr.InconsistentGroupProtocolError.errno, assignment=b"")
    result = await state.groups.sync_group(
        request.group_id, request.generation_id, request.member_id, protocol_type, protocol_name,
        {a.member_id: bytes(a.assignment) for a in request.assignments})
    return SyncGroupResponse(version=version, throttle_time_ms=0, error_code=result.error,
                             protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                             assignment=result.assignment)
