"""Destination topics: created when missing, with the source's partitions and the configs that
change what the bytes mean, and one :class:`TopicRoute` per mirrored source topic.

Runs on the driver before each micro-batch's copy, so a topic that appeared at the source
exists at the destination before any task produces to it.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Mapping

from ..config import MirrorConfig
from ..kafka import KafkaClient, NewTopic, TopicPartition
from ..routing import RoutingPolicy
from .errors import TopicMismatchError

__all__ = ["TopicRoute", "COPIED_CONFIGS", "selected_topics", "sync_destination_topics", "resolve_partitioning"]

log = logging.getLogger(__name__)

COPIED_CONFIGS = ("message.timestamp.type", "cleanup.policy", "compression.type", "max.message.bytes",
                  "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "max.compaction.lag.ms", "delete.retention.ms")
"""Configs a destination topic takes from its source when kmirror creates it: they decide how
records are stamped, kept, compacted and sized, so a mirror without them is a different topic
(a compacted source mirrored into a topic that never compacts grows without end, and one
whose tombstones expire sooner hides deletions from slower consumers)."""


@dataclass(frozen=True)
class TopicRoute:
    """Where one source topic goes and how its batches are routed."""

    source_topic: str
    topic: str
    source_partitions: int
    policy: RoutingPolicy

    @functools.cached_property
    def destinations(self) -> tuple[TopicPartition, ...]:
        """The destination's partitions, one object each for the route's life: the copy hands
        one to the producer with every batch instead of building a new one per batch."""
        return tuple(TopicPartition(self.topic, p) for p in range(self.policy.destination_partitions))


def selected_topics(config: MirrorConfig, source: KafkaClient) -> dict[str, int]:
    """The source topics the job mirrors, with their partition counts, from fresh metadata."""
    return {topic: count for topic, count in source.topics().items() if config.selects(topic)}


def sync_destination_topics(config: MirrorConfig, source: KafkaClient, destination: KafkaClient,
                            known: Mapping[str, TopicRoute] | None = None) -> dict[str, TopicRoute]:
    """Routes for every selected source topic, creating destination topics that are missing.

    ``known`` routes are reused while the source partition count is unchanged, so a steady job
    costs one metadata request per micro-batch.
    """
    selected = selected_topics(config, source)
    known = known or {}
    routes = {t: known[t] for t, n in selected.items() if t in known and known[t].source_partitions == n}
    todo = {t: n for t, n in selected.items() if t not in routes}
    if not todo:
        return routes
    existing = destination.topics()
    missing = sorted(t for t in todo if config.destination_topic(t) not in existing)
    if missing:
        source_configs = source.describe_topic_configs(missing)
        created = [
            NewTopic(config.destination_topic(t), config.destination_partitions or todo[t],
                     configs={k: v for k, v in source_configs.get(t, {}).items() if k in COPIED_CONFIGS},
                     replication_factor=config.replication_factor)
            for t in missing
        ]
        destination.create_topics(created)
        for new in created:
            log.info("created destination topic %s: %d partitions, %s", new.name,
                     new.partitions, ", ".join(f"{k}={v}" for k, v in sorted(new.configs.items())) or "broker defaults")
        existing = destination.topics()
    for topic, count in sorted(todo.items()):
        routes[topic] = _route(config, topic, count, existing[config.destination_topic(topic)])
    return routes


def resolve_partitioning(choice: str, source_partitions: int, destination_partitions: int) -> str:
    """``auto`` keeps each record's partition where the counts match (MirrorMaker 2's
    behaviour, and nothing is decompressed) and routes by key where they differ."""
    if choice != "auto":
        return choice
    return "preserve" if source_partitions == destination_partitions else "by-key"


def _route(config: MirrorConfig, topic: str, source_partitions: int, destination_partitions: int) -> TopicRoute:
    name = config.destination_topic(topic)
    partitioning = resolve_partitioning(config.partitioning, source_partitions, destination_partitions)
    if partitioning == "preserve" and destination_partitions < source_partitions:
        raise TopicMismatchError(
            f"partitioning 'preserve' needs destination topic {name} to have at least the {source_partitions} "
            f"partitions of {topic}, it has {destination_partitions}; add partitions or use --partitioning by-key")
    if partitioning != config.partitioning:
        log.info("%s -> %s: %d and %d partitions, partitioning auto is %s", topic, name, source_partitions,
                 destination_partitions, partitioning)
    policy = RoutingPolicy(partitioning=partitioning, destination_partitions=destination_partitions,
                           compression=None if config.compression == "source" else config.compression,
                           coalesce_below_bytes=config.coalesce_below_bytes,
                           coalesce_target_bytes=config.coalesce_target_bytes)
    return TopicRoute(topic, name, source_partitions, policy)
