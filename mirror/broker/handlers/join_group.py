"""JoinGroup (key 11), v0-9: join a classic group, or rejoin it for a rebalance.

The request is long-polled: it is answered when the join phase ends (every member rejoined,
or the rebalance timeout passed), which is why the handler awaits
(:meth:`GroupCoordinator.join_group`; see :mod:`mirror.broker.groups.rebalance`). The
leader's answer lists every member with its subscription, for the client to run the assignor.

Versions: v0 has no rebalance timeout (the session timeout serves as one); from v4 a new
member is first answered MEMBER_ID_REQUIRED with its id and joins again with it (KIP-394);
v5 adds ``group.instance.id`` (recorded, not enforced: no static membership); v7 answers the
protocol type too (KIP-559); v8 adds a reason (logged); v9's SkipAssignment is always false
(it is for static leaders). Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside
``group.min/max.session.timeout.ms``), INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID,
MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS (a retry superseded this request),
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR (the broker is stopping).
"""

from __future__ import annotations

import logging

from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

from ..groups import JoinRequest, JoinResult
from ..state import client_host
from ._api import Api

API = Api(key=11, min_version=0, max_version=9, request=JoinGroupRequest)

log = logging.getLogger(__name__)


async def handle(request, version: int, state) -> JoinGroupResponse:
    if version >= 8 and request.reason:
        log.info("group %s: member %r joins: %s", request.group_id, request.member_id, request.reason)
    result = await state.groups.join_group(JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        instance_id=request.group_instance_id if version >= 5 else None,
        client_id=request.header.client_id or "",
        client_host=client_host.get(),
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=tuple((protocol.name, bytes(protocol.metadata)) for protocol in request.protocols),
        requires_known_member_id=version >= 4,
    ))
    return _response(result, version)


def _response(result: JoinResult, version: int) -> JoinGroupResponse:
    members = [JoinGroupResponse.JoinGroupResponseMember(member_id=m.member_id, group_instance_id=m.instance_id,
                                                         metadata=m.metadata)
               for m in result.members]
    protocol_name = result.protocol_name if version >= 7 else result.protocol_name or ""  # nullable from v7
    return JoinGroupResponse(version=version, throttle_time_ms=0, error_code=result.error,
                             generation_id=result.generation, protocol_type=result.protocol_type,
                             protocol_name=protocol_name, leader=result.leader, skip_assignment=False,
                             member_id=result.member_id, members=members)
