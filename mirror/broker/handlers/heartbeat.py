"""Heartbeat (key 12), v0-4: a member keeps its session; REBALANCE_IN_PROGRESS tells it to rejoin.

Errors as Kafka's classic group coordinator gives them: UNKNOWN_MEMBER_ID (unknown group or
member: join anew), ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS, INVALID_GROUP_ID,
COORDINATOR_NOT_AVAILABLE. v3 adds ``group.instance.id`` (not enforced).
"""

from __future__ import annotations

from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from ..errors import ApiError
from ._api import Api

API = Api(key=12, min_version=0, max_version=4, request=HeartbeatRequest)


async def handle(request, version: int, state) -> HeartbeatResponse:
    code = 0
    try:
        state.groups.heartbeat(request.group_id, request.generation_id, request.member_id)
    except ApiError as exc:
        code = exc.code
    return HeartbeatResponse(version=version, throttle_time_ms=0, error_code=code)
