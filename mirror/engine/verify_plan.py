"""What ``kmirror verify`` compares: for each mirrored topic pair, the source ranges the job has
committed as copied and the destination ranges its records went to, from the job's offset syncs
(every acknowledged batch's source span and destination span, :mod:`.offset_syncs`).

A source partition's range runs from the first offset its syncs cover (the job's start, the
oldest sync kept, or the first written at or after ``--from-time``) to the last one they cover
within the job's commits: a job commits several times between two syncs, and what it committed
since its last sync is not described yet. The read goes on to the source's end as it was once
the syncs were read (:attr:`Range.tail`), so records copied since are recognised at the
destination, where a by-key pair interleaves them with the verified ones.

A destination partition's range runs from the lowest destination offset of the pair's syncs
to the end of the last one within the committed ranges, so a live job's records copied past
its last commit are not read. Each side's spans keep their entry's id, with which a reader
tags its rows (:class:`~.verify_rows.Spans`): a destination row in no span was not written by
the verified range (another writer, or history older than the syncs), and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..config import MirrorConfig
from ..kafka import KafkaClient, TopicPartition
from ..kafka.client import READ_COMMITTED
from .offset_syncs import SyncEntry, decode_syncs, offset_syncs_topic
from .status import mirror_status
from .topic_tail import CommittedTail
from .verify_rows import Spans

__all__ = ["Range", "PairPlan", "plan_pair", "plan_mirror", "read_syncs"]


@dataclass(frozen=True)
class Range:
    partition: int
    start: int
    end: int
    tail: int | None = None
    """A source range's read goes on to here (the partition's end when planned): the records of
    ``[end, tail)`` may have been copied since the syncs were read, and a destination record
    found among them is not a finding."""

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

    @property
    def records(self) -> int:
        """Source offsets to verify (markers and aborted records included)."""
        return sum(r.end - r.start for r in self.sources)


def plan_mirror(config: MirrorConfig, source: KafkaClient, destination: KafkaClient, *,
                from_ms: int | None = None) -> list[PairPlan]:
    """Every pair of the job ``config`` names whose partitioning the job has chosen. The
    committed offsets are read before the syncs, so every sync of a committed range is read,
    and a live job's later ones are left out by :func:`plan_pair`. Raises
    :class:`~.status.NoSuchJobError` for a job the destination has no state of."""
    topics = [topic for topic in mirror_status(config, source, destination) if topic.partitioning is not None]
    entries = read_syncs(destination, config.job_name, from_ms=from_ms) if topics else []
    tps = [p.source for topic in topics for p in topic.partitions]
    ends = source.list_offsets(tps, "latest", isolation_level=READ_COMMITTED) if tps else {}
    counts = destination.topics()
    return [plan_pair(topic.topic, topic.destination_topic, by_key=topic.partitioning == "by-key",
                      destination_partitions=counts[topic.destination_topic], entries=entries,
                      committed={p.source.partition: p.mirrored_to for p in topic.partitions
                                 if p.mirrored_to is not None},
                      tails={p.source.partition: ends[p.source] for p in topic.partitions})
            for topic in topics if topic.destination_topic in counts]


def read_syncs(destination: KafkaClient, job: str, *, from_ms: int | None = None,
               max_wait_s: float = 30.0) -> list[SyncEntry]:
    """The job's committed offset syncs, every one kept, or those written at or after ``from_ms``."""
    tail = CommittedTail(destination, TopicPartition(offset_syncs_topic(job), 0), max_wait_s=max_wait_s)
    if from_ms is not None:
        tail.position = destination.list_offsets([tail.tp], from_ms)[tail.tp]
    return [entry for record in tail.read_to_end() for entry in decode_syncs(record)]


def plan_pair(source_topic: str, destination_topic: str, *, by_key: bool, destination_partitions: int,
              entries: Iterable[SyncEntry], committed: Mapping[int, int],
              tails: Mapping[int, int] | None = None) -> PairPlan:
    """The ranges of one topic pair: ``entries`` the job's syncs (those of other pairs are
    skipped), ``committed`` each source partition's committed next offset, ``tails`` each
    source partition's end once the syncs were read."""
    firsts: dict[int, int] = {}
    lasts: dict[int, int] = {}
    spans: dict[int, tuple[int, int]] = {}
    source_spans: dict[int, list[tuple[int, int, int]]] = {}
    destination_spans: dict[int, list[tuple[int, int, int]]] = {}
    for number, entry in enumerate(entries):
        if entry.source.topic != source_topic or entry.destination.topic != destination_topic:
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
        destinations=tuple(Range(p, low, high) for p, (low, high) in sorted(spans.items())),
        source_spans={p: Spans.of(s) for p, s in source_spans.items()},
        destination_spans={p: Spans.of(s) for p, s in destination_spans.items()})
