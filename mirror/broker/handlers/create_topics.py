"""CreateTopics (key 19), v2-6: partitions and topic configs; replication factor 1 (or -1 = default).

Per-topic errors: TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
INVALID_CONFIG (unknown name or bad value), INVALID_TOPIC_EXCEPTION. ``validate_only`` checks
without creating. From v5 the response echoes the resulting configs.

A request past a KRaft controller's caps is refused whole, POLICY_VIOLATION for every topic
with Kafka's own messages (:mod:`mirror.protocol.controller_limits`): more than 10,000
partitions named, or more than 10,000 metadata records for the topics it would create.
"""

from __future__ import annotations

from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

from ...protocol.controller_limits import (MAX_PARTITIONS_PER_REQUEST, MAX_RECORDS_PER_REQUEST, TOO_MANY_PARTITIONS,
                                           TOO_MANY_RECORDS, creation_records)
from ..errors import ApiError, kerr
from ..topic_config import TopicConfig
from ._api import Api

API = Api(key=19, min_version=2, max_version=6, request=CreateTopicsRequest)

_DYNAMIC_TOPIC_CONFIG = 1
_DEFAULT_CONFIG = 5


async def handle(request, version: int, state) -> CreateTopicsResponse:
    too_large = _too_large(request, state)
    if too_large is not None:
        return CreateTopicsResponse(version=version, throttle_time_ms=0, topics=[
            CreateTopicsResponse.CreatableTopicResult(name=wanted.name, error_code=kerr.PolicyViolationError.errno,
                                                      error_message=too_large, num_partitions=-1,
                                                      replication_factor=-1, configs=None)
            for wanted in request.topics])
    results = []
    for wanted in request.topics:
        partitions = _partitions(wanted, state)
        error, message, configs = 0, None, None
        try:
            if wanted.replication_factor not in (1, -1):
                raise ApiError(kerr.InvalidReplicationFactorError,
                               f"replication factor must be 1 on this single-node broker, got {wanted.replication_factor}")
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


def _partitions(wanted, state) -> int:
    if wanted.assignments:
        return len(wanted.assignments)
    return wanted.num_partitions if wanted.num_partitions != -1 else state.config.default_partitions


def _too_large(request, state) -> str | None:
    """Kafka's message if the controller would refuse the whole request: every topic's
    partitions count, the records only of topics that do not exist yet."""
    partitions = sum(max(0, _partitions(wanted, state)) for wanted in request.topics)
    if partitions > MAX_PARTITIONS_PER_REQUEST:
        return TOO_MANY_PARTITIONS
    records = sum(creation_records(max(0, _partitions(wanted, state)), len(wanted.configs or ()))
                  for wanted in request.topics if wanted.name not in state.topics.topics)
    return TOO_MANY_RECORDS if records > MAX_RECORDS_PER_REQUEST else None


def _describe(config: TopicConfig) -> list:
    explicit = config.explicit()
    return [
        CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs(
            name=name, value=value, read_only=False, is_sensitive=False,
            config_source=_DYNAMIC_TOPIC_CONFIG if name in explicit else _DEFAULT_CONFIG,
        )
        for name, value in config.as_kafka().items()
    ]
