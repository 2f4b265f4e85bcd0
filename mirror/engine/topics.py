"""Destination topics: created when missing, with the source's configs and partitions, grown
when the source grows, and one :class:`TopicRoute` per mirrored source topic.

Runs on the driver before each micro-batch's copy, so a topic or partition that appeared at
the source exists at the destination before any task produces to it. MirrorMaker 2 does the
same in ``MirrorSourceConnector.computeAndCreateTopicPartitions``: a new topic is created
with every config its source sets (:func:`.config_sync.creation_configs`), a topic whose
source has more partitions gets them (CreatePartitions), one with more stays as it is.

Unlike MirrorMaker 2, kmirror reshapes only what it created (issue 47). A destination topic
that was there before the job is the user's: it is never given partitions, and its configs
and ACLs are synced only with ``sync.existing_topics``. Each pair's partitioning is decided
once, when the job first sees it, and kept in the destination's provenance
(:mod:`.provenance`): ``auto`` picks ``preserve`` for equal counts and ``by-key`` otherwise, so
a destination the user made smaller than its source is routed by key rather than grown, and
a ``preserve`` pair whose source grows (while the job runs or while it is down) is followed,
where kmirror created the destination, or refused with a line that says what to do.

Which source topics are mirrored (:func:`selected_topics`): those the configuration selects
by name (:func:`.own_topics.mirrored`: kmirror's own topics never are, nor prefixed names
that came from the destination), less those whose provenance (:mod:`.provenance`) shows they came from the
destination or through it. Provenance is written at the destination before a topic is
created there, so that the job mirroring the other way never sees the topic without it.
"""

from __future__ import annotations

import functools
import logging
import weakref
from dataclasses import dataclass, replace
from typing import Callable, Mapping

from ..config import MirrorConfig
from ..kafka import KafkaClient, NewTopic, TopicListing, TopicPartition
from ..kafka.admin import describe_topic_config_entries, grow_partitions
from ..listing import SHOWN, some_of
from ..routing import RoutingPolicy
from .clients import client_for
from .config_sync import ConfigFilter, creation_configs
from .destination_loss import DestinationLoss, lost_destinations
from .errors import TopicMismatchError
from .own_topics import mirrored
from .provenance import PROVENANCE_TOPIC, Provenance, ProvenanceLog, cycles, hop

__all__ = ["TopicRoute", "selected_topics", "selected_listings", "sync_destination_topics", "resolve_partitioning"]

log = logging.getLogger(__name__)

_provenance_logs: "weakref.WeakKeyDictionary[KafkaClient, ProvenanceLog]" = weakref.WeakKeyDictionary()
"""Per source client, its cluster's provenance as read so far: each later read takes only
what was added (one ListOffsets when nothing was)."""
_left_out: set[tuple[str, str]] = set()
"""(source bootstrap, topic) already logged as left out: once per process, not per micro-batch."""
_told_found: set[tuple[str, str]] = set()
"""(destination bootstrap, topic) already logged as found (left as the user shaped it): once
per process, not per micro-batch."""


@dataclass(frozen=True)
class TopicRoute:
    """Where one source topic goes and how its batches are routed."""

    source_topic: str
    topic: str
    source_partitions: int
    policy: RoutingPolicy
    created: bool = False
    """kmirror created the destination topic; one it found is never reshaped (:func:`_pair`)."""
    topic_id: str | None = None
    """The destination topic's id (KIP-516) as the route was made, None from a cluster without
    ids: commits name it, so a commit into a topic since lost is not taken for the new one's."""

    @functools.cached_property
    def destinations(self) -> tuple[TopicPartition, ...]:
        """The destination's partitions, one object each for the route's life: the copy hands
        one to the producer with every batch instead of building a new one per batch."""
        return tuple(TopicPartition(self.topic, p) for p in range(self.policy.destination_partitions))


def selected_topics(config: MirrorConfig, source: KafkaClient) -> dict[str, int]:
    """The source topics the job mirrors, with their partition counts, from fresh metadata."""
    return {topic: listing.partitions for topic, listing in selected_listings(config, source).items()}


def selected_listings(config: MirrorConfig, source: KafkaClient) -> dict[str, TopicListing]:
    """The source topics the job mirrors, with their partition counts and ids, from fresh metadata."""
    listed = source.listings()
    named = {topic: listing for topic, listing in listed.items() if mirrored(config, topic)}
    if PROVENANCE_TOPIC not in listed or not named:
        return named
    # A flow's topics after a failover (:mod:`.failback`): from the promotion point on their
    # records are the source's own, though their provenance names the destination.
    came_back = cycles(named, _provenance(source), _destination_cluster(config)) - set(config.clusters.flow_topics)
    for topic in sorted(came_back):
        if (source.bootstrap, topic) not in _left_out:
            _left_out.add((source.bootstrap, topic))
            log.info("leaving out source topic %s: its records came from the destination (%s)", topic,
                     PROVENANCE_TOPIC)
    return {topic: listing for topic, listing in named.items() if topic not in came_back}


def sync_destination_topics(config: MirrorConfig, source: KafkaClient, destination: KafkaClient,
                            known: Mapping[str, TopicRoute] | None = None,
                            on_lost: Callable[[list[DestinationLoss]], None] | None = None) -> dict[str, TopicRoute]:
    """Routes for every selected source topic, creating destination topics that are missing
    and adding partitions that a destination topic kmirror created lacks.

    ``known`` routes are reused while the source partition count is unchanged, so a steady job
    costs one metadata request per micro-batch. A destination topic the job copied into that is
    gone, or of another id now (:mod:`.destination_loss`), is told to ``on_lost`` before any topic
    is made (it raises to stop the job, or sees that the source is copied again); a topic of the
    user's that is gone gets no route, and is not made again.
    """
    selected = selected_topics(config, source)
    known = known or {}
    routes = {t: known[t] for t, n in selected.items() if t in known and known[t].source_partitions == n}
    todo = {t: n for t, n in selected.items() if t not in routes}
    if not todo:
        return routes
    named = config.clusters.destination_topic
    listed = destination.listings()
    records = _provenance(destination) if PROVENANCE_TOPIC in listed else {}
    losses = lost_destinations({t: named(t) for t in todo}, listed, records)
    if losses and on_lost is not None:
        on_lost(losses)
    todo = {t: n for t, n in todo.items() if t not in {loss.source_topic for loss in losses if not loss.copied_again}}
    missing = {t: n for t, n in todo.items() if named(t) not in listed}
    # Each topic's path at the source, read once for what is created and what is remembered.
    hops = functools.cache(lambda: _hops(source, todo))
    if missing:
        _create(config, source, destination, missing, hops(), records)
        listed = destination.listings()
        records = _provenance(destination)
    pairs = {t: _pair(config, t, n, listed[named(t)], records.get(named(t))) for t, n in sorted(todo.items())}
    remember = [pair for pair in pairs.values() if pair.remember]
    if remember:
        _remember(config, destination, remember, hops())
    short = {pair.topic: pair.source_partitions for pair in pairs.values() if pair.grows}
    if short:
        _grow(destination, short, {name: listing.partitions for name, listing in listed.items()})
        listed = destination.listings()
        pairs = {t: replace(pair, destination_partitions=listed[pair.topic].partitions) for t, pair in pairs.items()}
    _tell(config, list(pairs.values()))
    for topic, pair in pairs.items():
        routes[topic] = _route(config, pair)
    return routes


def resolve_partitioning(choice: str, source_partitions: int, destination_partitions: int) -> str:
    """``auto`` keeps each record's partition where the counts match (MirrorMaker 2's
    behaviour, and nothing is decompressed) and routes by key where they differ."""
    if choice != "auto":
        return choice
    return "preserve" if source_partitions == destination_partitions else "by-key"


@dataclass(frozen=True)
class _Pair:
    """One source topic and its destination topic, as this sync found and decided them."""

    source_topic: str
    topic: str
    source_partitions: int
    destination_partitions: int
    partitioning: str
    created: bool
    remember: bool
    """The destination's provenance does not say this yet (a found topic seen for the first
    time, a record from before the decision or the topic's id was kept, a new explicit choice)."""
    topic_id: str | None = None
    """The destination topic's id (KIP-516), None from a cluster without ids."""

    @property
    def grows(self) -> bool:
        return self.partitioning == "preserve" and self.destination_partitions < self.source_partitions


def _pair(config: MirrorConfig, topic: str, source_partitions: int, listing: TopicListing,
          record: Provenance | None) -> _Pair:
    """The pair's partitioning: an explicit choice as given; under ``auto`` the one remembered,
    or decided now from the counts (issue 47: decided once, so a destination the user made
    smaller than its source is routed by key rather than grown, and a ``preserve`` pair whose
    source grew while the job was down stays ``preserve``). Raises
    :class:`TopicMismatchError` where ``preserve`` needs partitions kmirror may not add."""
    name = config.clusters.destination_topic(topic)
    destination_partitions = listing.partitions
    topic_id = listing.id_text
    created = record is not None and record.created
    remembered = record.partitioning if record is not None else None
    if record is not None and remembered is None:
        remembered = _undecided(config, source_partitions, destination_partitions)
    partitioning = (config.routing.partitioning if config.routing.partitioning != "auto"
                    else remembered or resolve_partitioning("auto", source_partitions, destination_partitions))
    if remembered is not None and partitioning != remembered:
        log.warning("%s -> %s: partitioning %s, where earlier records were copied %s: keys copied before keep "
                    "their partitions", topic, name, partitioning, remembered)
    pair = _Pair(topic, name, source_partitions, destination_partitions, partitioning, created,
                 remember=record is None or record.partitioning != partitioning or record.topic_id != topic_id,
                 topic_id=topic_id)
    if pair.grows and not (created and config.routing.destination_partitions is None):
        raise TopicMismatchError(_cannot_grow(config, pair))
    return pair


def _undecided(config: MirrorConfig, source_partitions: int, destination_partitions: int) -> str:
    """The partitioning of a topic kmirror created before it kept its decision: created with the
    source's count (unless ``destination_partitions`` set one), so fewer partitions than the
    source means the source grew since, and the copy preserved."""
    if config.routing.destination_partitions is None and destination_partitions < source_partitions:
        return "preserve"
    return resolve_partitioning("auto", source_partitions, destination_partitions)


def _cannot_grow(config: MirrorConfig, pair: _Pair) -> str:
    needs = (f"partitioning 'preserve' needs destination topic {pair.topic} to have at least the "
             f"{pair.source_partitions} partitions of {pair.source_topic}, it has {pair.destination_partitions}")
    if config.routing.partitioning == "preserve":
        return f"{needs}; add partitions or use --partitioning by-key"
    owner = ("its partition count was set by --destination-partitions" if pair.created
             else "kmirror did not create it, so it does not add partitions to it")
    return (f"{needs} (preserve was chosen when the job first saw the pair, with equal counts; {owner}): add "
            f"{pair.source_partitions - pair.destination_partitions} partitions to {pair.topic} at the destination "
            f"(kafka-topics.sh --alter --topic {pair.topic} --partitions {pair.source_partitions}) and start the job "
            f"again")


def _tell(config: MirrorConfig, pairs: list[_Pair]) -> None:
    """What the job decided about pairs it had not routed yet, in a few lines however many
    topics (a whole cluster is thousands): the found topics left as the user shaped them (once
    per process), and the partitionings ``auto`` chose."""
    bootstrap = ",".join(config.clusters.destination.bootstrap)
    found = [pair for pair in pairs if not pair.created and (bootstrap, pair.topic) not in _told_found]
    _told_found.update((bootstrap, pair.topic) for pair in found)
    synced = ("configs and ACLs synced (--sync-existing-topics)" if config.sync.existing_topics
              else "configs and ACLs left as they are (--sync-existing-topics syncs them)")
    if 0 < len(found) <= SHOWN:
        for pair in found:
            log.info("destination topic %s was there before kmirror: its %d partitions kept, %s; partitioning %s "
                     "(source %s has %d)", pair.topic, pair.destination_partitions, synced, pair.partitioning,
                     pair.source_topic, pair.source_partitions)
    elif found:
        log.info("%d destination topics were there before kmirror: their partitions kept, %s: %s", len(found),
                 synced, some_of(f"{p.topic} ({p.destination_partitions} partitions, {p.partitioning})" for p in found))
    chosen: dict[str, list[_Pair]] = {}
    for pair in pairs:
        if pair.created and pair.partitioning != config.routing.partitioning:
            chosen.setdefault(pair.partitioning, []).append(pair)
    for partitioning, same in sorted(chosen.items()):
        log.info("partitioning auto is %s for %d topic%s: %s", partitioning, len(same), "s" if len(same) > 1 else "",
                 some_of(f"{p.source_topic} -> {p.topic} ({p.source_partitions} and {p.destination_partitions} "
                         f"partitions)" for p in same))


def _route(config: MirrorConfig, pair: _Pair) -> TopicRoute:
    policy = RoutingPolicy(partitioning=pair.partitioning, destination_partitions=pair.destination_partitions,
                           compression=None if config.routing.compression == "source" else config.routing.compression,
                           coalesce_below_bytes=config.routing.coalesce_below_bytes,
                           coalesce_target_bytes=config.routing.coalesce_target_bytes,
                           coalesce_under_backlog=config.routing.coalesce_under_backlog)
    return TopicRoute(pair.source_topic, pair.topic, pair.source_partitions, policy, created=pair.created,
                      topic_id=pair.topic_id)


def _create(config: MirrorConfig, source: KafkaClient, destination: KafkaClient, counts: Mapping[str, int],
            hops: Mapping[str, Provenance], records: Mapping[str, Provenance]) -> None:
    """Create the destination topics of ``counts`` (source topic -> partitions) with their
    source's configs, their provenance recorded first (created, how ``auto`` lays them out, and
    the id of a topic of the name that was lost, until the new one's is known: a run that ends
    in between still finds the loss, :mod:`.destination_loss`)."""
    chosen = ConfigFilter(config.sync.config_properties_exclude)
    entries = describe_topic_config_entries(source, sorted(counts))
    partitions = {t: config.routing.destination_partitions or n for t, n in counts.items()}
    named, routing = config.clusters.destination_topic, config.routing
    _provenance_log(destination).record({
        named(t): replace(hops[t], created=True,
                          partitioning=resolve_partitioning(routing.partitioning, n, partitions[t]),
                          topic_id=(lost := records.get(named(t))) and lost.topic_id)
        for t, n in counts.items()})
    created = [NewTopic(named(t), partitions[t], configs=creation_configs(entries.get(t, []), chosen),
                        replication_factor=routing.replication_factor)
               for t in sorted(counts)]
    found = destination.create_topics(created)
    if found:
        # Made by someone else since the destination's metadata was read: theirs, so the
        # provenance just written must not say kmirror created them, or the job would lay
        # their records out (and grow them) as its own. Their pairs are decided from the
        # counts they really have (:func:`_pair`).
        _provenance_log(destination).record({name: replace(hops[t], created=False)
                                             for t in counts if (name := named(t)) in found})
        log.info("destination topics %s appeared before kmirror created them: they are left as their maker "
                 "shaped them", ", ".join(sorted(found)))
    made = [new for new in created if new.name not in found]
    if made:
        log.info("created %d destination topic%s (%d partitions): %s", len(made), "s" if len(made) > 1 else "",
                 sum(new.partitions for new in made),
                 some_of(f"{new.name} ({new.partitions} partitions, "
                         f"{', '.join(f'{k}={v}' for k, v in sorted(new.configs.items())) or 'broker defaults'})"
                         for new in made))


def _remember(config: MirrorConfig, destination: KafkaClient, pairs: list[_Pair],
              hops: Mapping[str, Provenance]) -> None:
    """Write what the destination's provenance does not say yet about ``pairs``: a found
    topic's first record (created false), a partitioning decided now, or the topic's id."""
    _provenance_log(destination).record({pair.topic: replace(hops[pair.source_topic], created=pair.created,
                                                             partitioning=pair.partitioning, topic_id=pair.topic_id)
                                         for pair in pairs})


def _hops(source: KafkaClient, topics: Mapping[str, int]) -> dict[str, Provenance]:
    """Each source topic's provenance at the destination: its own path at the source, plus the source."""
    upstream = _provenance(source) if PROVENANCE_TOPIC in source.topics() else {}
    here = source.cluster_id()
    return {t: hop(here, t, upstream.get(t)) for t in topics}


def _grow(destination: KafkaClient, counts: Mapping[str, int], existing: Mapping[str, int]) -> None:
    """Give each destination topic of ``counts`` as many partitions as its source has, so that
    every record keeps its partition. Only topics kmirror created, under ``preserve``
    (:func:`_pair`). A refusal because the topic already has them (another job, an operator)
    is fine; another one raises: copying the new partitions' records elsewhere would break
    their order and placement."""
    for topic, refusal in grow_partitions(destination, counts).items():
        if refusal is not None and refusal.error_name != "INVALID_PARTITIONS":
            raise TopicMismatchError(f"could not add partitions to destination topic {topic} "
                                     f"({existing[topic]} -> {counts[topic]}): {refusal}")
        if refusal is None:
            log.info("added partitions to destination topic %s: %d -> %d, as its source has", topic,
                     existing[topic], counts[topic])


def _provenance_log(client: KafkaClient) -> ProvenanceLog:
    provenance = _provenance_logs.get(client)
    if provenance is None:
        provenance = _provenance_logs[client] = ProvenanceLog(client)
    return provenance


def _provenance(client: KafkaClient) -> Mapping[str, Provenance]:
    """The cluster's provenance, read to its end (the caller knows the topic exists)."""
    return _provenance_log(client).refresh()


def _destination_cluster(config: MirrorConfig) -> str:
    return client_for(config.clusters.destination, config.limits.retry).cluster_id()
