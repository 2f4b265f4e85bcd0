"""FindCoordinator (key 10), v0-6: always COORDINATOR_NOT_AVAILABLE.

The embedded broker has no group or transaction coordinator. It still answers this API
because librdkafka takes a listed FindCoordinator as the sign of a broker new enough for
LZ4 (its ``RD_KAFKA_FEATURE_LZ4`` probe) and otherwise sends lz4 batches uncompressed.
Clients that really need a coordinator (consumer groups, transactions) get a retriable
error, as from a Kafka cluster whose coordinator is still loading; use manual assignment.
"""

from __future__ import annotations

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from ..errors import kerr

API_KEY = 10
MIN_VERSION = 0
MAX_VERSION = 6
REQUEST = FindCoordinatorRequest

_ERROR = kerr.CoordinatorNotAvailableError
_MESSAGE = "the embedded broker has no group or transaction coordinator"


async def handle(request, version: int, state) -> FindCoordinatorResponse:
    if version >= 4:
        coordinators = [FindCoordinatorResponse.Coordinator(key=key, node_id=-1, host="", port=-1,
                                                            error_code=_ERROR.errno, error_message=_MESSAGE)
                        for key in request.coordinator_keys]
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=_ERROR.errno,
                                   error_message=_MESSAGE, node_id=-1, host="", port=-1)
