"""DeleteGroups (key 42), v0-2: remove groups without members, with all their committed offsets.

Per group: GROUP_ID_NOT_FOUND if it does not exist, NON_EMPTY_GROUP while it has members,
COORDINATOR_NOT_AVAILABLE if the deletion could not be persisted. A group named twice is
answered once, as Kafka does.
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse

from ._api import Api

API = Api(key=42, min_version=0, max_version=2, request=DeleteGroupsRequest)

Result = DeleteGroupsResponse.DeletableGroupResult


async def handle(request, version: int, state) -> DeleteGroupsResponse:
    results = state.groups.delete_groups(list(dict.fromkeys(request.groups_names)))
    return DeleteGroupsResponse(version=version, throttle_time_ms=0,
                                results=[Result(group_id=group_id, error_code=code) for group_id, code in results.items()])
