"""What ``kmirror verify`` compares: for each mirrored topic pair, the source ranges the job has
committed as copied and the destination ranges its records went to, from the job's offset syncs
(every acknowledged batch's source span and destination span, :mod:`.offset_syncs`).

A source partition's range runs from the first offset its syncs cover (the job's start, the
oldest sync kept, or the first written at or after ``--from-time``) to the job's committed
offset. A destination partition's range runs from the lowest destination offset of the pair's
syncs to the end of the last one within the committed ranges, so a live job's records copied
past its last commit are not read. Each side's spans keep their entry's id, with which a reader
tags its rows (:class:`~.verify_rows.Spans`): a destination row in no span was not written by
the verified range (another writer, or history older than the syncs), and is left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ..kafka import KafkaClient, TopicPartition
from .offset_syncs import SyncEntry, decode_syncs, offset_syncs_topic
from .topic_tail import CommittedTail
from .verify_rows import Spans

__all__ = ["Range", "PairPlan", "plan_pair", "read_syncs"]


@dataclass(frozen=True)
class Range:
    partition: int
    start: int
    end: int


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


def read_syncs(destination: KafkaClient, job: str, *, from_ms: int | None = None,
               max_wait_s: float = 30.0) -> list[SyncEntry]:
    """The job's committed offset syncs, every one kept, or those written at or after ``from_ms``."""
    tail = CommittedTail(destination, TopicPartition(offset_syncs_topic(job), 0), max_wait_s=max_wait_s)
    if from_ms is not None:
        tail.position = destination.list_offsets([tail.tp], from_ms)[tail.tp]
    return [entry for record in tail.read_to_end() for entry in decode_syncs(record)]


def plan_pair(source_topic: str, destination_topic: str, *, by_key: bool, destination_partitions: int,
              entries: Iterable[SyncEntry], committed: Mapping[int, int]) -> PairPlan:
    """The ranges of one topic pair: ``entries`` the job's syncs (those of other pairs are
    skipped), ``committed`` each source partition's committed next offset."""
    firsts: dict[int, int] = {}
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
        low, high = spans.get(destination, (entry.base, entry.end))
        spans[destination] = (min(low, entry.base), max(high, entry.end))
        source_spans.setdefault(source, []).append((entry.first, entry.last + 1, number))
        destination_spans.setdefault(destination, []).append((entry.base, entry.end, number))
    return PairPlan(
        source_topic, destination_topic, by_key, destination_partitions,
        sources=tuple(Range(p, first, committed[p]) for p, first in sorted(firsts.items())),
        destinations=tuple(Range(p, low, high) for p, (low, high) in sorted(spans.items())),
        source_spans={p: Spans.of(s) for p, s in source_spans.items()},
        destination_spans={p: Spans.of(s) for p, s in destination_spans.items()})
