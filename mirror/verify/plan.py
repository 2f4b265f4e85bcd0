"""What ``kmirror verify`` compares: for each mirrored topic pair, the source ranges the job has
committed as copied and the destination ranges its records went to, from the job's offset syncs
(every acknowledged batch's source span and destination span, :mod:`~mirror.engine.offset_syncs`).

A source partition's range runs from the first offset its syncs cover (the job's start, the
oldest sync kept, or the first written at or after ``--from-time``) to the last one they cover
within the job's commits: a job commits several times between two syncs, and what it committed
since its last sync is not described yet. The read goes on to the source's end as it was once
the syncs were read (:attr:`Range.tail`), so records copied since are recognised at the
destination, where a by-key pair interleaves them with the verified ones.

A destination partition's range runs from the lowest destination offset of the pair's syncs
to the end of the last one within the committed ranges, so a live job's records copied past
its last commit are not compared. Every partition of the destination topic is planned, with or
without syncs: what a consumer reads outside its range, from the log's start to its end when
planned (:attr:`Range.tail`), is counted as not covered. Each side's spans keep their entry's
id, with which a reader tags its rows (:class:`~.rows.Spans`). A destination record in the
range but in no span was written by one of the job's producers (:attr:`PairPlan.producers`,
those that wrote its offset syncs: a copy writes its syncs with the producer that wrote its
records), and then lies in a span not verified (a transaction committed since the job's commits
were read), or by another producer: it is **foreign**.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..config import MirrorConfig
from ..kafka import KafkaClient, TopicPartition
from ..kafka.client import READ_COMMITTED
from ..engine.offset_syncs import SyncEntry, decode_syncs, offset_syncs_topic
from ..engine.status import mirror_status
from ..engine.topic_tail import CommittedTail
from .rows import Spans

__all__ = ["Range", "PairPlan", "JobSyncs", "plan_pair", "plan_mirror"]


@dataclass(frozen=True)
class Range:
    partition: int
    start: int
    end: int
    tail: int | None = None
    """The partition's end when planned (None: unknown). A source range's read goes on to here:
    the records of ``[end, tail)`` may have been copied since the syncs were read, and a
    destination record found among them is not a finding. A destination partition's records
    outside ``[start, end)``, from its log start to here, are counted, not compared."""

    @property
    def read_to(self) -> int:
        return max(self.end, self.tail or 0)


@dataclass(frozen=True)
class PairPlan:
    source_topic: str
    destination_topic: str
    by_key: bool
    destination_partitions: int
    sources: tuple[Range, ...]
    destinations: tuple[Range, ...]
    source_spans: Mapping[int, Spans] = field(default_factory=dict)
    destination_spans: Mapping[int, Spans] = field(default_factory=dict)
    producers: frozenset[int] = frozenset()
    """The producer ids of the job's copies (those that wrote its offset syncs)."""
    created: bool | None = None
    """kmirror created the destination topic (False: it found it there; None: unknown)."""
    topic_id: str | None = None
    """The id of the source topic compared: the one the source lists now (None: not known)."""
    earlier_ids: tuple[str, ...] = ()
    """Ids of earlier source topics of the name (deleted, and made again since) whose copies the
    job's syncs describe: their source is gone, so their destination records are not compared."""
    lost_ids: tuple[str, ...] = ()
    """Ids of destination topics of the name lost since (deleted under the job): the syncs of
    the copies into them describe records gone with them, and are not compared."""

    @property
    def records(self) -> int:
        """Source offsets to verify (markers and aborted records included)."""
        return sum(r.end - r.start for r in self.sources)


def plan_mirror(config: MirrorConfig, source: KafkaClient, destination: KafkaClient, *,
                from_ms: int | None = None) -> tuple[list[PairPlan], JobSyncs | None]:
    """Every pair of the job ``config`` names whose partitioning the job has chosen, and the
    job's syncs as read (to read on from, :meth:`JobSyncs.producers_since`). The committed
    offsets are read before the syncs, so every sync of a committed range is read, and a live
    job's later ones are left out by :func:`plan_pair`. Raises :class:`~mirror.engine.status.NoSuchJobError`
    for a job the destination has no state of."""
    topics = [topic for topic in mirror_status(config, source, destination) if topic.partitioning is not None]
    if not topics:
        return [], None
    syncs = JobSyncs(destination, config.job_name, from_ms=from_ms)
    by_pair: dict[tuple[str, str], list[SyncEntry]] = {}
    for entry in syncs.read():  # each pair's own: planning a thousand pairs reads the syncs once, not a thousand times
        by_pair.setdefault((entry.source.topic, entry.destination.topic), []).append(entry)
    tps = [p.source for topic in topics for p in topic.partitions]
    ends = source.list_offsets(tps, "latest", isolation_level=READ_COMMITTED) if tps else {}
    listed = destination.listings()
    counts = {name: listing.partitions for name, listing in listed.items()}
    destination_tps = [TopicPartition(topic.destination_topic, p) for topic in topics
                       for p in range(counts.get(topic.destination_topic, 0))]
    destination_ends = (destination.list_offsets(destination_tps, "latest", isolation_level=READ_COMMITTED)
                        if destination_tps else {})
    plans = [plan_pair(topic.topic, topic.destination_topic, by_key=topic.partitioning == "by-key",
                       destination_partitions=counts[topic.destination_topic],
                       entries=by_pair.get((topic.topic, topic.destination_topic), ()),
                       committed={p.source.partition: p.mirrored_to for p in topic.partitions
                                  if p.mirrored_to is not None},
                       tails={p.source.partition: ends[p.source] for p in topic.partitions},
                       destination_tails={tp.partition: end for tp, end in destination_ends.items()
                                          if tp.topic == topic.destination_topic},
                       producers=frozenset(syncs.producers), created=topic.created, topic_id=topic.topic_id,
                       destination_id=listed[topic.destination_topic].id_text)
             for topic in topics if topic.destination_topic in counts]
    return plans, syncs


class JobSyncs:
    """The job's offset syncs (``kmirror-offset-syncs.<job>``), committed ones only: every one
    kept, or those written at or after ``from_ms``, and the producers that wrote them."""

    def __init__(self, destination: KafkaClient, job: str, *, from_ms: int | None = None, max_wait_s: float = 30.0):
        self.max_wait_s = max_wait_s
        self.tail = CommittedTail(destination, TopicPartition(offset_syncs_topic(job), 0), max_wait_s=max_wait_s)
        if from_ms is not None:
            self.tail.position = destination.list_offsets([self.tail.tp], from_ms)[self.tail.tp]

    def read(self) -> list[SyncEntry]:
        """The entries from where the last read stopped to the end."""
        return [entry for record in self.tail.read_to_end() for entry in decode_syncs(record)]

    @property
    def producers(self) -> set[int]:
        return set(self.tail.producers)

    def producers_since(self, destination: KafkaClient) -> set[int]:
        """The producers that wrote syncs after the last read (a copier started since): read
        once the destination's rows are, a copy's records are then described here too."""
        seen = self.producers
        tail = CommittedTail(destination, self.tail.tp, max_wait_s=self.max_wait_s)
        tail.position = self.tail.position
        for _ in tail.read_to_end():
            pass
        return tail.producers - seen


def plan_pair(source_topic: str, destination_topic: str, *, by_key: bool, destination_partitions: int,
              entries: Iterable[SyncEntry], committed: Mapping[int, int], tails: Mapping[int, int] | None = None,
              destination_tails: Mapping[int, int] | None = None, producers: frozenset[int] = frozenset(),
              created: bool | None = None, topic_id: str | None = None,
              destination_id: str | None = None) -> PairPlan:
    """The ranges of one topic pair: ``entries`` the job's syncs (those of other pairs, and of
    source topics of the name other than ``topic_id``, are skipped), ``committed`` each source
    partition's committed next offset, ``tails`` each source partition's end once the syncs
    were read, ``destination_tails`` each destination partition's end when planned,
    ``producers`` those of the job's copies; syncs into a destination topic other than
    ``destination_id`` (one lost since) are skipped too."""
    earlier: set[str] = set()
    lost: set[str] = set()
    firsts: dict[int, int] = {}
    lasts: dict[int, int] = {}
    spans: dict[int, tuple[int, int]] = {}
    source_spans: dict[int, list[tuple[int, int, int]]] = {}
    destination_spans: dict[int, list[tuple[int, int, int]]] = {}
    for number, entry in enumerate(entries):
        if entry.source.topic != source_topic or entry.destination.topic != destination_topic:
            continue
        if None not in (topic_id, entry.topic_id) and entry.topic_id != topic_id:
            earlier.add(entry.topic_id)  # a copy of a topic since deleted: no source to compare it with
            continue
        if None not in (destination_id, entry.destination_id) and entry.destination_id != destination_id:
            lost.add(entry.destination_id)  # a copy into a destination topic since lost: gone with it
            continue
        end = committed.get(entry.source.partition)
        if end is None or entry.first >= end:
            continue
        source, destination = entry.source.partition, entry.destination.partition
        firsts[source] = min(firsts.get(source, entry.first), entry.first)
        lasts[source] = max(lasts.get(source, entry.last), entry.last)
        low, high = spans.get(destination, (entry.base, entry.end))
        spans[destination] = (min(low, entry.base), max(high, entry.end))
        source_spans.setdefault(source, []).append((entry.first, entry.last + 1, number))
        destination_spans.setdefault(destination, []).append((entry.base, entry.end, number))
    return PairPlan(
        source_topic, destination_topic, by_key, destination_partitions,
        sources=tuple(Range(p, first, min(committed[p], lasts[p] + 1), (tails or {}).get(p))
                      for p, first in sorted(firsts.items())),
        destinations=tuple(Range(p, *spans.get(p, (0, 0)), (destination_tails or {}).get(p))
                           for p in range(destination_partitions)),
        source_spans={p: Spans.of(s) for p, s in source_spans.items()},
        destination_spans={p: Spans.of(s) for p, s in destination_spans.items()},
        producers=producers, created=created, topic_id=topic_id, earlier_ids=tuple(sorted(earlier)),
        lost_ids=tuple(sorted(lost)))
