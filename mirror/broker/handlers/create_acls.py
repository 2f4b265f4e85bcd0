"""CreateAcls (key 30), v1-3: every creation SECURITY_DISABLED, "No Authorizer is configured.".

As Kafka without an authorizer answers (``AclApis.handleCreateAcls``, whose message differs
from DescribeAcls'); see :mod:`.describe_acls`.
"""

from __future__ import annotations

from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse

from ..errors import kerr

API_KEY = 30
MIN_VERSION = 1
MAX_VERSION = 3
REQUEST = CreateAclsRequest


async def handle(request, version: int, state) -> CreateAclsResponse:
    results = [CreateAclsResponse.AclCreationResult(error_code=kerr.SecurityDisabledError.errno,
                                                    error_message="No Authorizer is configured.")
               for _ in request.creations]
    return CreateAclsResponse(version=version, throttle_time_ms=0, results=results)
