"""Where a mirrored topic came from, kept on the cluster it was mirrored to: ``kmirror-provenance``.

Under the ``identity`` policy a topic's name does not say that kmirror mirrored it there, so
two jobs A -> B and B -> A over ``.*`` would copy each other's copies back and forth for
ever. MirrorMaker 2 leaves that to the operator (its ``IdentityReplicationPolicy`` cannot
detect cycles). kmirror records, before it creates a destination topic, the clusters the
topic's records have been on: one record per topic in a compacted topic of one partition,
key the topic's name, value ``{"path": [cluster ids], "source_topic": ...}``. A job reading
a source topic whose provenance path holds its destination's cluster id leaves it out: those
records started there. A path grows by one cluster per hop, so A -> B -> C -> A is caught
too, as MM2's ``isCycle`` walks its chain of aliases.

Cluster ids (Kafka's ``cluster.id``, from Metadata), not aliases: the two jobs of a pair may
reach one cluster by different addresses, but never see two ids for it.

Written before the topic is created, so a job on the other side never sees the topic
without its provenance; read to its end whenever the job meets source topics it has not
classified yet (a handful of records: one per mirrored topic).

The record also keeps what kmirror decided about the destination topic, so that a restart, a
lost checkpoint or a source that grew while the job was down never decides it again
(issue 47):

- ``created``: kmirror created the topic. A topic it found is the user's: it is written into
  but never reshaped (no partitions added; configs and ACLs only with ``sync.existing_topics``).
  A found topic gets its record the first time a job copies into it, so its provenance is
  known to the job mirroring the other way as well.
- ``partitioning``: how the records are laid out there, ``preserve`` or ``by-key``, chosen when
  the pair was first seen (``auto``: by the partition counts then).

Records written before these two keys existed were written only for topics kmirror created,
so a record without ``created`` reads as created, and one without ``partitioning`` as
undecided (:mod:`.topics` decides it once and writes it back).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Iterable, Mapping

import kcodecs
from kcodecs import KMirrorError, Record

from ..kafka import KafkaClient, NewTopic, TopicPartition
from .own_batches import chunks
from .topic_tail import CommittedTail

__all__ = ["PROVENANCE_TOPIC", "provenance_topic_spec", "Provenance", "ProvenanceLog", "ProvenanceError", "hop", "cycles"]

log = logging.getLogger(__name__)

PROVENANCE_TOPIC = "kmirror-provenance"
_TP = TopicPartition(PROVENANCE_TOPIC, 0)
_COMPACTED = {"cleanup.policy": "compact"}


class ProvenanceError(KMirrorError):
    """A provenance record kmirror did not write."""


@dataclass(frozen=True)
class Provenance:
    """The clusters a topic's records have been on, oldest first (the cluster it is on now excluded)."""

    path: tuple[str, ...]
    source_topic: str
    created: bool = True
    """kmirror created the destination topic (False: it was there before, and stays the user's)."""
    partitioning: str | None = None
    """``preserve`` or ``by-key``: the layout chosen for the topic when the pair was first seen
    (None: a record from before kmirror remembered it)."""
    topic_id: str | None = None
    """The destination topic's id (KIP-516) once the job has seen it there (None: not yet, a
    cluster without ids, or a record from before kmirror kept them): a topic of this name
    missing, or of another id, is not the one the job copied into
    (:mod:`.destination_loss`)."""

    def came_from(self, cluster_id: str) -> bool:
        return cluster_id in self.path


class ProvenanceLog:
    """``kmirror-provenance`` on one cluster: read (what came here from where) and, on a
    destination, written (before each topic kmirror creates)."""

    def __init__(self, client: KafkaClient, *, max_wait_s: float = 30.0):
        self._client = client
        self._tail: CommittedTail | None = None
        self._max_wait_s = max_wait_s
        self.known: dict[str, Provenance] = {}
        """Topic -> its provenance, as far as read."""

    def refresh(self) -> Mapping[str, Provenance]:
        """Read what was added since the last call (the caller knows the topic exists)."""
        if self._tail is None:
            self._tail = CommittedTail(self._client, _TP, max_wait_s=self._max_wait_s)
        self._tail.update_latest(self.known, _decode)
        return self.known

    def record(self, entries: Mapping[str, Provenance]) -> None:
        """Write ``entries`` (destination topic -> provenance) and wait for their acknowledgement."""
        if not entries:
            return
        self._client.create_topics([provenance_topic_spec()])
        now_ms = int(time.time() * 1000)
        records = [Record(key=topic.encode(), timestamp=now_ms, value=_encode(p)) for topic, p in sorted(entries.items())]
        # Batches of a bounded size (:mod:`.own_batches`): a whole cluster's topics in one
        # batch would pass the broker's message.max.bytes past a few thousand topics.
        self._client.produce([(_TP, kcodecs.build_batch(some)) for some in chunks(records)])
        self.known.update(entries)


def provenance_topic_spec() -> NewTopic:
    """One partition, compacted: the last record per topic is what the cluster knows of it."""
    return NewTopic(PROVENANCE_TOPIC, 1, configs=dict(_COMPACTED))


def hop(source_cluster: str, source_topic: str, upstream: Provenance | None) -> Provenance:
    """The provenance of a copy of ``source_topic``: its own path, if it is a copy itself, and
    the source cluster."""
    return Provenance((upstream.path if upstream else ()) + (source_cluster,), source_topic)


def cycles(topics: Iterable[str], provenance: Mapping[str, Provenance], destination_cluster: str) -> set[str]:
    """The ``topics`` whose records started at the destination, or passed through it."""
    return {t for t in topics if (p := provenance.get(t)) is not None and p.came_from(destination_cluster)}


def _encode(provenance: Provenance) -> bytes:
    value = {"path": list(provenance.path), "source_topic": provenance.source_topic, "created": provenance.created}
    if provenance.partitioning is not None:
        value["partitioning"] = provenance.partitioning
    if provenance.topic_id is not None:
        value["topic_id"] = provenance.topic_id
    return json.dumps(value).encode()


def _decode(record: Record) -> tuple[str, Provenance | None]:
    try:
        topic = bytes(record.key or b"").decode()
        if record.value is None:
            return topic, None
        value = json.loads(bytes(record.value))
        partitioning = value.get("partitioning")
        if partitioning not in (None, "preserve", "by-key") or not isinstance(value.get("created", True), bool):
            raise ValueError(f"created {value.get('created')!r}, partitioning {partitioning!r}")
        topic_id = value.get("topic_id")
        return topic, Provenance(tuple(str(c) for c in value["path"]), str(value["source_topic"]),
                                 value.get("created", True), partitioning, None if topic_id is None else str(topic_id))
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ProvenanceError(f"{PROVENANCE_TOPIC} at offset {record.offset}: not a kmirror provenance record "
                              f"({exc})") from exc
