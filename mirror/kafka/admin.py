"""What keeps a destination shaped like its source, beyond creating topics: topic configs as
the broker reports them (with where each value comes from), config changes
(IncrementalAlterConfigs, KIP-339) and partition growth (CreatePartitions, KIP-195).

MirrorMaker 2 does the same with Kafka's ``Admin`` (``MirrorSourceConnector.syncTopicConfigs``
and ``computeAndCreateTopicPartitions``). Each call answers per topic: one topic the
destination refuses (a config its brokers do not know, a partition count already reached)
must not keep the others from being synced, so refusals come back as data and only a call
that could not be made at all raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import kafka.errors as kerr
from kafka.protocol.admin import CreatePartitionsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest

from ..protocol.codes import KafkaCode
from ..protocol.configs import ConfigChange, ConfigOp
from .client import KafkaClient
from .errors import BrokerApiError, UnknownTopicError

__all__ = ["ConfigSource", "ConfigEntry", "ConfigOp", "ConfigChange", "describe_topic_config_entries", "describe_topic_configs",
           "alter_topic_configs", "grow_partitions"]

_TOPIC_RESOURCE = 2


class ConfigSource(KafkaCode):
    """Where a config's value comes from (DescribeConfigs v1+ ``config_source``)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


@dataclass(frozen=True)
class ConfigEntry:
    """One topic config as a broker describes it."""

    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    sensitive: bool

    @property
    def is_default(self) -> bool:
        """Kafka's ``ConfigEntry.isDefault``: the value is the config's own default, nobody set it."""
        return self.source is ConfigSource.DEFAULT_CONFIG


def describe_topic_config_entries(client: KafkaClient, topics: Sequence[str]) -> dict[str, list[ConfigEntry]]:
    """Topic -> every config its broker reports; raises :class:`UnknownTopicError` for a
    topic that is gone."""
    resource = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(resources=[resource(resource_type=_TOPIC_RESOURCE, resource_name=name,
                                                         configuration_keys=None) for name in topics],
                                     include_synonyms=False, include_documentation=False)

    def attempt() -> dict[str, list[ConfigEntry]]:
        results = client.call(request).results
        for result in results:
            if result.error_code == kerr.UnknownTopicOrPartitionError.errno:
                raise UnknownTopicError(result.resource_name)
            if result.error_code:
                raise BrokerApiError.from_code("DescribeConfigs", result.error_code, topic=result.resource_name,
                                               detail=result.error_message)
        return {r.resource_name: [ConfigEntry(c.name, c.value, ConfigSource.of(c.config_source), bool(c.read_only),
                                              bool(c.is_sensitive)) for c in r.configs]
                for r in results}

    return client.retrying("describe topic configs", attempt) if topics else {}


def describe_topic_configs(client: KafkaClient, topics: Sequence[str]) -> dict[str, dict[str, str]]:
    """Topic -> config name -> value, every config the broker reports with a value."""
    return {topic: {e.name: e.value for e in entries if e.value is not None}
            for topic, entries in describe_topic_config_entries(client, topics).items()}


def alter_topic_configs(client: KafkaClient, changes: Mapping[str, Sequence[ConfigChange]]
                        ) -> dict[str, BrokerApiError | None]:
    """Apply each topic's changes (IncrementalAlterConfigs: configs not named stay as they are);
    topic -> None where they took, else the broker's refusal."""
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    config = resource.AlterableConfig
    wanted = {topic: list(ops) for topic, ops in changes.items() if ops}
    request = IncrementalAlterConfigsRequest(
        resources=[resource(resource_type=_TOPIC_RESOURCE, resource_name=topic,
                            configs=[config(name=c.name, config_operation=int(c.op), value=c.value) for c in ops])
                   for topic, ops in wanted.items()],
        validate_only=False)

    def attempt() -> dict[str, BrokerApiError | None]:
        # Topic configs may go to any broker: it forwards them to the controller (KIP-590).
        return {r.resource_name: _refusal("IncrementalAlterConfigs", r.resource_name, r.error_code, r.error_message)
                for r in client.call(request).responses}

    return client.retrying("alter topic configs", attempt) if wanted else {}


def grow_partitions(client: KafkaClient, counts: Mapping[str, int]) -> dict[str, BrokerApiError | None]:
    """Raise each topic's partition count to ``counts[topic]`` (CreatePartitions); topic ->
    None where it grew, else the broker's refusal (INVALID_PARTITIONS if it already has as
    many: another mirror, or an operator, got there first)."""
    topic = CreatePartitionsRequest.CreatePartitionsTopic
    request = CreatePartitionsRequest(topics=[topic(name=name, count=count, assignments=None)
                                              for name, count in counts.items()],
                                      timeout_ms=int(client.request_timeout_s * 1000), validate_only=False)

    def attempt() -> dict[str, BrokerApiError | None]:
        return {r.name: _refusal("CreatePartitions", r.name, r.error_code, r.error_message)
                for r in client.call(request).results}

    return client.retrying("create partitions", attempt) if counts else {}


def _refusal(api: str, topic: str, code: int, message: str | None) -> BrokerApiError | None:
    """None for success; a retriable error raises (the call is retried as a whole, which is
    safe: both APIs are idempotent for the same target state); others come back as data."""
    if not code:
        return None
    error = BrokerApiError.from_code(api, code, topic=topic, detail=message)
    if error.retriable:
        raise error
    return error
