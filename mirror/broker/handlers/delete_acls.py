"""DeleteAcls (key 31), v1-3: every filter SECURITY_DISABLED, "No Authorizer is configured.",
matching nothing.

As Kafka without an authorizer answers (``AclApis.handleDeleteAcls``); see :mod:`.describe_acls`.
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteAclsRequest, DeleteAclsResponse

from ..errors import kerr

API_KEY = 31
MIN_VERSION = 1
MAX_VERSION = 3
REQUEST = DeleteAclsRequest


async def handle(request, version: int, state) -> DeleteAclsResponse:
    results = [DeleteAclsResponse.DeleteAclsFilterResult(error_code=kerr.SecurityDisabledError.errno,
                                                         error_message="No Authorizer is configured.", matching_acls=[])
               for _ in request.filters]
    return DeleteAclsResponse(version=version, throttle_time_ms=0, filter_results=results)
