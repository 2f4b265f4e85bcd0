"""LeaveGroup (key 13), v0-5: members leave (a consumer closing) and the group rebalances.

v0-2 name one member and answer with one error code; v3+ name a batch of members and answer
per member (KIP-345's admin removal of static members by ``group.instance.id`` alone finds
no one here: UNKNOWN_MEMBER_ID); v5 adds a reason, logged. Errors: UNKNOWN_MEMBER_ID,
INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import logging

from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

from ..errors import ApiError
from ._api import Api

API = Api(key=13, min_version=0, max_version=5, request=LeaveGroupRequest)

log = logging.getLogger(__name__)

MemberResponse = LeaveGroupResponse.MemberResponse


async def handle(request, version: int, state) -> LeaveGroupResponse:
    leaving = [(request.member_id, None, None)] if version < 3 else \
        [(m.member_id, m.group_instance_id, m.reason if version >= 5 else None) for m in request.members]
    for member_id, _, reason in leaving:
        if reason:
            log.info("group %s: member %r leaves: %s", request.group_id, member_id, reason)
    try:
        codes = state.groups.leave_group(request.group_id, [member_id for member_id, _, _ in leaving])
    except ApiError as exc:
        return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=exc.code, members=[])
    if version < 3:  # one member: its error is the request's
        return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=codes[0], members=[])
    members = [MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code)
               for (member_id, instance_id, _), code in zip(leaving, codes)]
    return LeaveGroupResponse(version=version, throttle_time_ms=0, error_code=0, members=members)
