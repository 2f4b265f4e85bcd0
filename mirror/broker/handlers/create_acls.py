"""CreateAcls (key 30), v1-3: every creation SECURITY_DISABLED, "No Authorizer is configured.".

As Kafka without an authorizer answers (``AclApis.handleCreateAcls``, whose message differs
from DescribeAcls'); see :mod:`.describe_acls`.
"""

from __future__ import annotations

from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse

from ..errors import kerr
from ._api import Api

API = Api(key=30, min_version=1, max_version=3, request=CreateAclsRequest)


async def handle(request, version: int, state) -> CreateAclsResponse:
    results = [CreateAclsResponse.AclCreationResult(error_code=kerr.SecurityDisabledError.errno,
                                                    error_message="No Authorizer is configured.")
               for _ in request.creations]
    return CreateAclsResponse(version=version, throttle_time_ms=0, results=results)
