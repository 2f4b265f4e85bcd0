"""CreateTopics (key 19), v2-6: partitions and topic configs; replication factor 1 (or -1 = default).

Per-topic errors: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_CONFIG (unknown name or bad value), INVALID_TOPIC_EXCEPTION. ``validate_only`` checks
without creating. From v5 the response echoes the resulting configs.
"""

from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from ..errors import ApiError, kerr
from ..topic_config import TopicConfig
from ._api import Api

API = Api(key=19, min_version=2, max_version=6, request=CreateTopicsRequest)

_DYNAMIC_TOPIC_CONFIG = 1
_DEFAULT_CONFIG = 5


async def handle(request, version: int, state) -> CreateTopicsResponse:
    results = []
    for wanted in request.topics:
        partitions = wanted.num_partitions if wanted.num_partitions != -1 else state.config.default_partitions
        error, message, configs = 0, None, None
        try:
            if wanted.replication_factor not in (1, -1):
                raise ApiError(kerr.InvalidReplicationFactorError,
                               f"replication factor must be 1 on this single-node broker, got {wanted.replication_factor}")
            if wanted.assignments:
                partitions = len(wanted.assignments)
            topic = state.topics.create(wanted.name, partitions, {c.name: c.value for c in wanted.configs},
                                        validate_only=request.validate_only)
            if topic is not None:
                configs = _describe(topic.config)
        except ApiError as exc:
            error, message = exc.code, exc.message
        results.append(CreateTopicsResponse.CreatableTopicResult(
            name=wanted.name, error_code=error, error_message=message,
            num_partitions=partitions if not error else -1, replication_factor=1 if not error else -1, configs=configs,
        ))
    return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=results)


def _describe(config: TopicConfig) -> list:
    explicit = config.explicit()
    return [
        CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs(
            name=name, value=value, read_only=False, is_sensitive=False,
            config_source=_DYNAMIC_TOPIC_CONFIG if name in explicit else _DEFAULT_CONFIG,
        )
        for name, value in config.as_kafka().items()
    ]
