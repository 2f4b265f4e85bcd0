"""Destination topics: created when missing, with the source's configs and partitions, grown
when the source grows, and one :class:`TopicRoute` per mirrored source topic.

Runs on the driver before each micro-batch's copy, so a topic or partition that appeared at
the source exists at the destination before any task produces to it. MirrorMaker 2 does the
same in ``MirrorSourceConnector.computeAndCreateTopicPartitions``: a new topic is created
with every config its source sets (:func:`.config_sync.creation_configs`), a topic whose
source has more partitions gets them (CreatePartitions), one with more stays as it is.

Which source topics are mirrored (:func:`selected_topics`): those the configuration selects
by name (:meth:`MirrorConfig.selects`, which also leaves out prefixed names that came from
the destination), less those whose provenance (:mod:`.provenance`) shows they came from the
destination or through it. Provenance is written at the destination before a topic is
created there, so that the job mirroring the other way never sees the topic without it.
"""

from __future__ import annotations

import functools
import logging
import weakref
from dataclasses import dataclass
from typing import Mapping

from ..config import MirrorConfig
from ..kafka import KafkaClient, NewTopic, TopicPartition
from ..kafka.admin import describe_topic_config_entries, grow_partitions
from ..routing import RoutingPolicy
from .clients import client_for
from .config_sync import ConfigFilter, creation_configs
from .errors import TopicMismatchError
from .provenance import PROVENANCE_TOPIC, Provenance, ProvenanceLog, cycles, hop

__all__ = ["TopicRoute", "selected_topics", "sync_destination_topics", "resolve_partitioning"]

log = logging.getLogger(__name__)

_provenance_logs: "weakref.WeakKeyDictionary[KafkaClient, ProvenanceLog]" = weakref.WeakKeyDictionary()
"""Per source client, its cluster's provenance as read so far: each later read takes only
what was added (one ListOffsets when nothing was)."""
_left_out: set[tuple[str, str]] = set()
"""(source bootstrap, topic) already logged as left out: once per process, not per micro-batch."""


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
    listed = source.topics()
    named = {topic: count for topic, count in listed.items() if config.selects(topic)}
    if PROVENANCE_TOPIC not in listed or not named:
        return named
    came_back = cycles(named, _source_provenance(source), _destination_cluster(config))
    for topic in sorted(came_back):
        if (source.bootstrap, topic) not in _left_out:
            _left_out.add((source.bootstrap, topic))
            log.info("leaving out source topic %s: its records came from the destination (%s)", topic,
                     PROVENANCE_TOPIC)
    return {topic: count for topic, count in named.items() if topic not in came_back}


def sync_destination_topics(config: MirrorConfig, source: KafkaClient, destination: KafkaClient,
                            known: Mapping[str, TopicRoute] | None = None) -> dict[str, TopicRoute]:
    """Routes for every selected source topic, creating destination topics that are missing
    and adding partitions a destination lacks.

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
        _create(config, source, destination, {t: todo[t] for t in missing})
    short = {config.destination_topic(t): n for t, n in todo.items()
             if t not in missing and existing[config.destination_topic(t)] < n}
    if short and config.destination_partitions is None and config.partitioning != "by-key":
        # By key, a record's partition is its key's hash modulo the count: growing the
        # destination would move keys while their earlier records stay where they were.
        _grow(destination, short, existing)
    if missing or short:
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


def _create(config: MirrorConfig, source: KafkaClient, destination: KafkaClient, counts: Mapping[str, int]) -> None:
    """Create the destination topics of ``counts`` (source topic -> partitions) with their
    source's configs, their provenance recorded first."""
    chosen = ConfigFilter(config.config_properties_exclude)
    entries = describe_topic_config_entries(source, sorted(counts))
    upstream = _source_provenance(source) if PROVENANCE_TOPIC in source.topics() else {}
    here = source.cluster_id()
    ProvenanceLog(destination).record({config.destination_topic(t): hop(here, t, upstream.get(t)) for t in counts})
    created = [NewTopic(config.destination_topic(t), config.destination_partitions or n,
                        configs=creation_configs(entries.get(t, []), chosen), replication_factor=config.replication_factor)
               for t, n in sorted(counts.items())]
    destination.create_topics(created)
    for new in created:
        log.info("created destination topic %s: %d partitions, %s", new.name, new.partitions,
                 ", ".join(f"{k}={v}" for k, v in sorted(new.configs.items())) or "broker defaults")


def _grow(destination: KafkaClient, counts: Mapping[str, int], existing: Mapping[str, int]) -> None:
    """Give each destination topic of ``counts`` as many partitions as its source has, so that
    every record keeps its partition (``auto`` stays ``preserve``). A refusal because the
    topic already has them (another job, an operator) is fine; another one raises: copying
    the new partitions' records elsewhere would break their order and placement."""
    for topic, refusal in grow_partitions(destination, counts).items():
        if refusal is not None and refusal.error_name != "INVALID_PARTITIONS":
            raise TopicMismatchError(f"could not add partitions to destination topic {topic} "
                                     f"({existing[topic]} -> {counts[topic]}): {refusal}")
        if refusal is None:
            log.info("added partitions to destination topic %s: %d -> %d, as its source has", topic,
                     existing[topic], counts[topic])


def _source_provenance(source: KafkaClient) -> Mapping[str, Provenance]:
    provenance = _provenance_logs.get(source)
    if provenance is None:
        provenance = _provenance_logs[source] = ProvenanceLog(source)
    return provenance.refresh()


def _destination_cluster(config: MirrorConfig) -> str:
    return client_for(config.destination, config.retry).cluster_id()
