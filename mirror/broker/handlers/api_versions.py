"""ApiVersions (key 18), v0-3: the version ranges of every handler in :data:`HANDLERS`.

A client that asks with a version above ours gets a v0 response with UNSUPPORTED_VERSION
and the full list, as Kafka does (KIP-511), so it can retry with a version we speak.
"""

from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..errors import kerr
from ._api import Api

API = Api(key=18, min_version=0, max_version=3, request=ApiVersionsRequest)


def supported() -> list:
    from . import HANDLERS

    return [
        ApiVersionsResponse.ApiVersion(api_key=key, min_version=module.API.min_version,
                                       max_version=module.API.max_version)
        for key, module in sorted(HANDLERS.items())
    ]


def fallback_response() -> ApiVersionsResponse:
    """The v0 answer to an ApiVersions request of a version we do not know."""
    return ApiVersionsResponse(version=0, error_code=kerr.UnsupportedVersionError.errno, api_keys=supported())


async def handle(request, version: int, state) -> ApiVersionsResponse:
    return ApiVersionsResponse(version=version, error_code=0, api_keys=supported(), throttle_time_ms=0)
