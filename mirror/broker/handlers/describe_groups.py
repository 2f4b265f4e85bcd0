"""DescribeGroups (key 15), v0-6: a group's state, protocol and members, as Kafka reports a
classic group.

The chosen protocol (the assignor) and the members' subscriptions are only reported while
the group is Stable; assignments always. A group that does not exist is reported Dead, with
GROUP_ID_NOT_FOUND from v6 (KIP-1043). v3+ may ask for the authorized operations: with no
authorizer, every operation on a group. v4 adds the members' ``group.instance.id``.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from ..errors import kerr
from ._api import Api

API = Api(key=15, min_version=0, max_version=6, request=DescribeGroupsRequest)

Described = DescribeGroupsResponse.DescribedGroup
Member = Described.DescribedGroupMember

NOT_REQUESTED = None
"""kafka-python's bitfield for Kafka's INT32_MIN: operations not asked for."""
_GROUP_OPERATIONS = {3, 6, 8, 10, 11}
"""READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: the ``AclOperation`` bits of a group."""


async def handle(request, version: int, state) -> DescribeGroupsResponse:
    operations = _GROUP_OPERATIONS if version >= 3 and request.include_authorized_operations else NOT_REQUESTED
    return DescribeGroupsResponse(version=version, throttle_time_ms=0,
                                  groups=[_describe(group_id, version, operations, state) for group_id in request.groups])


def _describe(group_id: str, version: int, operations: set[int] | None, state) -> Described:
    description = state.groups.describe(group_id)
    if description is None:
        error, message = (kerr.GroupIdNotFoundError.errno, f"group {group_id} not found") if version >= 6 else (0, None)
        return Described(error_code=error, error_message=message, group_id=group_id, group_state="Dead",
                         protocol_type="", protocol_data="", members=[], authorized_operations=NOT_REQUESTED)
    return Described(error_code=0, error_message=None, group_id=group_id, group_state=description.state,
                     protocol_type=description.protocol_type, protocol_data=description.protocol_data,
                     authorized_operations=operations, members=[
                         Member(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                                client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                         for m in description.members])
