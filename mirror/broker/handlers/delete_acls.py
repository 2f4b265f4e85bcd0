"""DeleteAcls (key 31), v1-3: every filter SECURITY_DISABLED, "No Authorizer is configured.",
matching nothing.

As Kafka without an authorizer answers (``AclApis.handleDeleteAcls``); see :mod:`.describe_acls`.
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteAclsRequest, DeleteAclsResponse

from ..errors import kerr
from ._api import Api

API = Api(key=31, min_version=1, max_version=3, request=DeleteAclsRequest)


async def handle(request, version: int, state) -> DeleteAclsResponse:
    results = [DeleteAclsResponse.DeleteAclsFilterResult(error_code=kerr.SecurityDisabledError.errno,
                                                         error_message="No Authorizer is configured.", matching_acls=[])
               for _ in request.filters]
    return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=results)
