"""ListGroups (key 16), v0-5: every group this coordinator knows, with its protocol type
("consumer" for consumer groups, "" for simple groups that only commit offsets).

v4 adds a filter on states (KIP-518: "Stable", "Empty", ..., case-insensitive) and the state
in the answer; v5 a filter on types (KIP-848) and the type, always "classic" here.
"""

from __future__ import annotations

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from ..errors import ApiError
from ._api import Api

API = Api(key=16, min_version=0, max_version=5, request=ListGroupsRequest)

Listed = ListGroupsResponse.ListedGroup


async def handle(request, version: int, state) -> ListGroupsResponse:
    states = request.states_filter if version >= 4 else []
    types = request.types_filter if version >= 5 else []
    try:
        listed = state.groups.list_groups(states, types)
    except ApiError as exc:
        return ListGroupsResponse(version=version, throttle_time_ms=0, error_code=exc.code, groups=[])
    return ListGroupsResponse(version=version, throttle_time_ms=0, error_code=0, groups=[
        Listed(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type)
        for g in listed])
