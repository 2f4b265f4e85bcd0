"""AlterConfigs (key 33), v0-2: replace a topic's dynamic configs with the ones given.

Configs not named go back to their defaults, as Kafka's ``legacyAlterConfigs`` deletes them
(clients that change one config use IncrementalAlterConfigs, or send all the others too).
Checked and applied as IncrementalAlterConfigs is (:mod:`._config_changes`): INVALID_REQUEST
for a malformed resource or a null value, INVALID_CONFIG for an unknown name or a bad value,
UNKNOWN_TOPIC_OR_PARTITION, ``validate_only``; persisted and applied at once.
"""

from __future__ import annotations

from kafka.protocol.admin import AlterConfigsRequest, AlterConfigsResponse

from ._api import Api
from ._config_changes import answer

API = Api(key=33, min_version=0, max_version=2, request=AlterConfigsRequest)


async def handle(request, version: int, state) -> AlterConfigsResponse:
    def change(topic: str, resource) -> None:
        configs = {config.name: config.value for config in resource.configs}
        state.topics.alter_configs(topic, configs, now_ms=state.clock(), validate_only=request.validate_only)

    responses = answer(request, state, AlterConfigsResponse, change, null_allowed=lambda config: False)
    return AlterConfigsResponse(version=version, throttle_time_ms=0, responses=responses)
