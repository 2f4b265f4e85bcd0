"""DescribeAcls (key 29), v1-3: SECURITY_DISABLED, "No Authorizer is configured on the broker".

This broker has no authorizer (authenticated clients may do anything), and Kafka without one
answers every ACL request so (``AclApis.handleDescribeAcls``); admin clients report it as
"security features are disabled" rather than as an unsupported API.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse

from ..errors import kerr
from ._api import Api

API = Api(key=29, min_version=1, max_version=3, request=DescribeAclsRequest)


async def handle(request, version: int, state) -> DescribeAclsResponse:
    return DescribeAclsResponse(version=version, throttle_time_ms=0, error_code=kerr.SecurityDisabledError.errno,
                                error_message="No Authorizer is configured on the broker", resources=[])
