"""DescribeConfigs (key 32), v1-4: topic configs (explicit ones as dynamic, the rest as defaults)
and a few broker configs. Other resource types get INVALID_REQUEST.
"""

from __future__ import annotations

from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from ..errors import kerr
from ._api import Api

API = Api(key=32, min_version=1, max_version=4, request=DescribeConfigsRequest)

TOPIC, BROKER = 2, 4
_DYNAMIC_TOPIC_CONFIG, _STATIC_BROKER_CONFIG, _DEFAULT_CONFIG = 1, 4, 5

Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = Result.DescribeConfigsResourceResult


async def handle(request, version: int, state) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(version=version, throttle_time_ms=0, results=[_one(r, state) for r in request.resources])


def _one(resource, state) -> Result:
    keys = set(resource.configuration_keys) if resource.configuration_keys is not None else None
    if resource.resource_type == TOPIC:
        topic = state.topics.topics.get(resource.resource_name)
        if topic is None:
            return _error(resource, kerr.UnknownTopicOrPartitionError.errno, f"unknown topic {resource.resource_name!r}")
        explicit = topic.config.explicit()
        values = {name: (value, _DYNAMIC_TOPIC_CONFIG if name in explicit else _DEFAULT_CONFIG)
                  for name, value in topic.config.as_kafka().items()}
    elif resource.resource_type == BROKER and resource.resource_name in ("", str(state.config.node_id)):
        config = state.config
        values = {
            "broker.id": (str(config.node_id), _STATIC_BROKER_CONFIG),
            "auto.create.topics.enable": (str(config.auto_create_topics).lower(), _STATIC_BROKER_CONFIG),
            "num.partitions": (str(config.default_partitions), _STATIC_BROKER_CONFIG),
            "socket.request.max.bytes": (str(config.max_request_bytes), _STATIC_BROKER_CONFIG),
        }
    else:
        return _error(resource, kerr.InvalidRequestError.errno,
                      f"resource type {resource.resource_type} {resource.resource_name!r} is not described by this broker")
    entries = [
        Entry(name=name, value=value, read_only=resource.resource_type == BROKER,
              config_source=source, is_default=source == _DEFAULT_CONFIG, is_sensitive=False, synonyms=[])
        for name, (value, source) in sorted(values.items())
        if keys is None or name in keys
    ]
    return Result(error_code=0, error_message=None, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=entries)


def _error(resource, code: int, message: str) -> Result:
    return Result(error_code=code, error_message=message, resource_type=resource.resource_type,
                  resource_name=resource.resource_name, configs=[])
