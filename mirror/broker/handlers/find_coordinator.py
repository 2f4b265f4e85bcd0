"""FindCoordinator (key 10), v0-6: this broker for groups and transactional ids.

Key types 0 (group, and v0's only kind) and 1 (transaction): this node, at its advertised
address, coordinates every group (:mod:`mirror.broker.groups`) and every transactional id
(:mod:`mirror.broker.transactions`). Key type 2 (share groups) and unknown types get
INVALID_REQUEST, as from a Kafka broker without a share coordinator. (librdkafka also takes
a listed FindCoordinator as the sign of a broker new enough for LZ4, its
``RD_KAFKA_FEATURE_LZ4`` probe, and otherwise sends lz4 batches uncompressed.)

v0-3 ask for one key; v4+ for a batch of keys of one type, answered one by one (KIP-699).
"""

from __future__ import annotations

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from ..errors import kerr
from ._api import Api

API = Api(key=10, min_version=0, max_version=6, request=FindCoordinatorRequest)

GROUP, TRANSACTION = 0, 1


async def handle(request, version: int, state) -> FindCoordinatorResponse:
    key_type = request.key_type if version >= 1 else GROUP
    error, message, (node_id, host, port) = _answer(key_type, state)
    if version >= 4:
        coordinators = [FindCoordinatorResponse.Coordinator(key=key, node_id=node_id, host=host, port=port,
                                                            error_code=error, error_message=message)
                        for key in request.coordinator_keys]
        return FindCoordinatorResponse(version=version, throttle_time_ms=0, coordinators=coordinators)
    return FindCoordinatorResponse(version=version, throttle_time_ms=0, error_code=error, error_message=message,
                                   node_id=node_id, host=host, port=port)


def _answer(key_type: int, state) -> tuple[int, str | None, tuple[int, str, int]]:
    if key_type in (GROUP, TRANSACTION):
        return 0, None, (state.config.node_id, *state.advertised)
    return kerr.InvalidRequestError.errno, f"coordinator key type {key_type} is not supported", (-1, "", -1)
