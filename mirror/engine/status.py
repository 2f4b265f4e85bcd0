"""How far behind a mirror is, from what it keeps on the clusters, with no running job needed
(``kmirror status``, issue 52).

Per source partition of the job's topics:

- mirrored up to: the next source offset the job has committed. Exactly-once jobs commit it to
  ``kmirror-offsets.<job>`` with their records; at-least-once jobs leave only their offset
  syncs (``kmirror-offset-syncs.<job>``), whose last entry for a partition says where its copy
  got to (records copied since then, not yet synced, show as lag);
- the source's end as a read_committed consumer sees it (the last stable offset), and the lag
  between the two, in offsets (a transaction's markers count as offsets);
- when that was committed (the record's time).

Per topic pair, from ``kmirror-provenance`` on the destination: the partitioning chosen for it,
and whether kmirror created the destination topic or found it. A source topic made again under
its name since the job's last commit of it (the commits and the offset syncs name the topic's id) is
*made again*: those commits are the old topic's, and say nothing of how far the new one is
copied (the job follows it from its log start). A source topic the job copied that the source
no longer lists (deleted, not made again) is *gone*: listed with no partitions and no lag, since
nothing more of it will be copied (the provenance says which topics the job copied from this
source).

Both of the job's topics are read from their end backwards (:func:`~.topic_tail.latest_by_key`):
every commit names every partition its copier follows, so a few records answer however long the
job has run.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcodecs import KMirrorError, Record

from ..config import MirrorConfig
from ..kafka import KafkaClient, TopicPartition
from ..kafka.types import listed_ids
from ..kafka.client import READ_COMMITTED
from .offset_syncs import decode_syncs, offset_syncs_topic
from .destination_loss import lost_destinations
from .offsets_topic import Commit, CommittedOffsets, offsets_topic
from .own_topics import mirrored
from .provenance import PROVENANCE_TOPIC, ProvenanceLog
from .topic_tail import latest_by_key
from .topics import selected_listings

__all__ = ["PartitionStatus", "TopicStatus", "NoSuchJobError", "mirror_status"]

_READ_WAIT_S = 30.0


class NoSuchJobError(KMirrorError):
    """The destination holds no state of the job named: neither its offsets nor its syncs."""


@dataclass(frozen=True)
class PartitionStatus:
    source: TopicPartition
    mirrored_to: int | None
    """The next source offset the job has committed; None: nothing of the partition yet."""
    start: int
    """The source's log start: where a job copying from the beginning starts."""
    end: int
    """The source's last stable offset."""
    committed_ms: int | None
    """When the job last committed the partition (ms since the epoch)."""

    @property
    def lag(self) -> int:
        return max(0, self.end - (self.mirrored_to if self.mirrored_to is not None else self.start))


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    destination_topic: str
    partitions: tuple[PartitionStatus, ...]
    partitioning: str | None
    """``preserve`` or ``by-key``, as the job chose it for the pair; None: not chosen yet."""
    created: bool | None
    """kmirror created the destination topic (False: found it); None: the job has not seen it yet."""
    made_again: bool = False
    """The source topic was deleted and made again since the job last committed it: another id."""
    gone: bool = False
    """The source topic was deleted and is not made again: nothing more of it is copied."""
    topic_id: str | None = None
    """The source topic's id as the source lists it (None: a cluster without ids, or gone)."""
    destination_lost: bool = False
    """The destination topic the job copied into is not there any more (deleted under the job):
    a running job makes it again, or, the user's, does not copy its source any more."""

    @property
    def lag(self) -> int:
        return sum(p.lag for p in self.partitions)

    @property
    def committed_ms(self) -> int | None:
        return max((p.committed_ms for p in self.partitions if p.committed_ms is not None), default=None)


def mirror_status(config: MirrorConfig, source: KafkaClient, destination: KafkaClient) -> list[TopicStatus]:
    """Every mirrored topic's status, by source topic name. Raises :class:`NoSuchJobError` when
    the destination has no state of the job (``config.job_name``)."""
    job = config.job_name
    present = destination.listings()
    if offsets_topic(job) not in present and offset_syncs_topic(job) not in present:
        raise NoSuchJobError(f"no job {job} on the destination: neither {offsets_topic(job)} nor "
                             f"{offset_syncs_topic(job)} exists there (give the job's --name, or its --checkpoint, "
                             f"from which the name is derived)")
    listings = selected_listings(config, source)
    counts = {topic: listing.partitions for topic, listing in listings.items()}
    tps = [TopicPartition(topic, p) for topic, count in sorted(counts.items()) for p in range(count)]
    ends = source.list_offsets(tps, "latest", isolation_level=READ_COMMITTED) if tps else {}
    starts = source.list_offsets(tps, "earliest") if tps else {}
    committed = _committed(destination, job, present, tps)
    ids = listed_ids(listings)
    provenance = dict(ProvenanceLog(destination, max_wait_s=_READ_WAIT_S).refresh()) \
        if PROVENANCE_TOPIC in present else {}
    named = config.clusters.destination_topic
    gone_there = {loss.source_topic for loss in lost_destinations({t: named(t) for t in counts}, present, provenance)
                  if not loss.made_again}
    out = []
    for topic in sorted(counts):
        ours = {tp: committed.get(tp) for tp in tps if tp.topic == topic}
        old = {tp for tp, found in ours.items() if found is not None and not found[0].of(ids.get(topic))}
        partitions = tuple(_partition(tp, None if tp in old else found, starts[tp], ends[tp])
                           for tp, found in ours.items())
        to = named(topic)
        known = provenance.get(to)
        out.append(TopicStatus(topic, to, partitions, known.partitioning if known else None,
                               known.created if known else None, made_again=bool(old), topic_id=ids.get(topic),
                               destination_lost=topic in gone_there))
    here = source.cluster_id() if provenance else None
    for name, record in sorted(provenance.items()):
        topic = record.source_topic
        if (record.path and record.path[-1] == here and topic not in listings and mirrored(config, topic)
                and config.clusters.destination_topic(topic) == name):
            out.append(TopicStatus(topic, name, (), record.partitioning, record.created, gone=True))
    return sorted(out, key=lambda status: status.topic)


def _committed(destination: KafkaClient, job: str, present, tps) -> dict[TopicPartition, tuple[Commit, int]]:
    """Each partition's commit (its next offset, and its topic's id if known) and when: from the
    offsets topic (exactly-once), else from the offset syncs (at-least-once: the last entry's
    last offset, plus one, and the id the syncs name)."""
    if not tps:
        return {}
    if offsets_topic(job) in present:
        return CommittedOffsets(destination, offsets_topic(job), max_wait_s=_READ_WAIT_S).latest_commits(tps)
    found = latest_by_key(destination, TopicPartition(offset_syncs_topic(job), 0), _synced_to, tps,
                          max_wait_s=_READ_WAIT_S)
    return {tp: (commit, record.timestamp) for tp, (commit, record) in found.items()}


def _synced_to(record: Record) -> list[tuple[TopicPartition, Commit]]:
    """A sync record's source partition, the next offset after its last entry and its topic's id."""
    entries = decode_syncs(record)
    return [(entries[0].source, Commit(max(e.last for e in entries) + 1, entries[0].topic_id))] if entries else []


def _partition(tp: TopicPartition, found: tuple[Commit, int] | None, start: int, end: int) -> PartitionStatus:
    mirrored_to, committed_ms = (found[0].offset, found[1]) if found is not None else (None, None)
    return PartitionStatus(tp, mirrored_to=mirrored_to, start=start, end=end, committed_ms=committed_ms)
