"""IncrementalAlterConfigs (key 44), v0-1 (KIP-339): change topic configs one by one.

SET, DELETE (back to the default), APPEND and SUBTRACT (items of a list config, here
``cleanup.policy``; on any other config INVALID_CONFIG "Can't APPEND to key ... because its
type is not LIST."), checked as Kafka's broker checks a request (:mod:`._config_changes`) and
validated as a whole through :class:`~mirror.broker.topic_config.TopicConfig` (an unknown
name or a bad value is INVALID_CONFIG). ``validate_only`` checks without changing. A change
is persisted and applied before the answer: retention and roll limits act on the existing
partition logs at once, DescribeConfigs reports the new values as dynamic.
"""

from __future__ import annotations

from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

from ...protocol.configs import ConfigChange, ConfigOp
from ._api import Api
from ._config_changes import answer

API = Api(key=44, min_version=0, max_version=1, request=IncrementalAlterConfigsRequest)


async def handle(request, version: int, state) -> IncrementalAlterConfigsResponse:
    def change(topic: str, resource) -> None:
        changes = [ConfigChange(config.name, config.config_operation, config.value) for config in resource.configs]
        state.topics.incremental_alter_configs(topic, changes, now_ms=state.clock(),
                                               validate_only=request.validate_only)

    responses = answer(request, state, IncrementalAlterConfigsResponse, change,
                       null_allowed=lambda config: config.config_operation == ConfigOp.DELETE)
    return IncrementalAlterConfigsResponse(version=version, throttle_time_ms=0, responses=responses)
