"""ApiVersions (key 18), v0-4: the version ranges of every handler in :data:`HANDLERS`, and
from v3 the finalized ``transaction.version`` feature (KIP-584, KIP-890).

A client that asks with a version above ours gets a v0 response with UNSUPPORTED_VERSION
and the full list, as Kafka does (KIP-511), so it can retry with a version we speak.

Under ``transaction.version`` 2 (the broker's default, as Kafka 4.x's) Produce v12 and EndTxn
v5 are offered; under 1 they are not, as Kafka offers them only when the feature is finalized
at 2: clients then add partitions with AddPartitionsToTxn and keep their epoch.
"""

from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..errors import kerr
from ._api import Api

API = Api(key=18, min_version=0, max_version=4, request=ApiVersionsRequest)

TRANSACTION_VERSION = "transaction.version"
_WITHOUT_V2 = {0: 11, 26: 4}
"""The highest Produce (0) and EndTxn (26) versions of a cluster without transactions v2."""


def supported(transaction_version: int = 2) -> list:
    from . import HANDLERS

    return [
        ApiVersionsResponse.ApiVersion(
            api_key=key, min_version=module.API.min_version,
            max_version=module.API.max_version if transaction_version >= 2 else
            min(module.API.max_version, _WITHOUT_V2.get(key, module.API.max_version)))
        for key, module in sorted(HANDLERS.items())
    ]


def fallback_response() -> ApiVersionsResponse:
    """The v0 answer to an ApiVersions request of a version we do not know."""
    return ApiVersionsResponse(version=0, error_code=kerr.UnsupportedVersionError.errno, api_keys=supported())


async def handle(request, version: int, state) -> ApiVersionsResponse:
    level = state.config.transaction_version
    response = ApiVersionsResponse(version=version, error_code=0, api_keys=supported(level), throttle_time_ms=0)
    if version >= 3:
        response.supported_features = [ApiVersionsResponse.SupportedFeatureKey(
            name=TRANSACTION_VERSION, min_version=0, max_version=2)]
        response.finalized_features_epoch = 0
        response.finalized_features = [ApiVersionsResponse.FinalizedFeatureKey(
            name=TRANSACTION_VERSION, max_version_level=level, min_version_level=level)]
    return response
