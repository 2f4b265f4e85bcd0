"""Where each copied source offset landed at the destination, and group offsets translated with it.

Each produce acknowledgement says where a batch went, so the copy knows, per batch, that the
records of source offsets ``[first, last]`` of partition ``p`` went to destination partition
``d`` from offset ``base`` on (:class:`SyncEntry`). A forwarded batch (passed through or
inspected) is **exact**: contiguous and one for one, record ``first + i`` is at ``base + i``.
A coalesced batch whose records fill its span, all to one partition, is exact too. A rebuilt
batch, a coalesced one with holes in its span, or a run of them merged, is only a **bound**:
every record of the span that went to ``d`` lies at or after ``base``. Consecutive entries
merge (:class:`SyncLog`), so a micro-batch of forwarded batches is usually one entry per
partition.

The entries go to ``kmirror-offset-syncs.<job>`` on the destination, one record per source
partition and task, in the task's transaction under exactly-once. The driver reads them
(:class:`OffsetSyncStore`) and translates a consumer group's committed source offsets into
destination offsets (:meth:`OffsetSyncStore.translate`): for each destination partition, the
lowest offset that cannot skip a record the group has not consumed. That is exact where one
source partition feeds the destination partition through exact entries (``preserve``, no
rebuilt batches); elsewhere it is a bound, and the consumer re-reads a little, never skips.
MirrorMaker 2 syncs one offset pair every ``offset.lag.max`` records and rounds down, so a
group that fails over always re-reads.

Each record names the id of the source topic its offsets are of (KIP-516), where known. A
topic deleted and made again under its name starts its offsets again, so its syncs are kept
apart from the old topic's, and a group's offsets are translated with the syncs of the topic
the source lists under the name now: never the old topic's onto the new one.
"""

from __future__ import annotations

import bisect
import json
import time
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Iterable, Mapping

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

import kcodecs
from kcodecs import KMirrorError, Record

from ..kafka import IdempotentProducer, KafkaClient, NewTopic, TopicPartition
from .own_batches import chunks
from .topic_tail import CommittedTail

__all__ = ["SyncEntry", "SyncLog", "OffsetSyncStore", "Translation", "Precision", "OffsetSyncError",
           "OFFSET_SYNCS_TOPIC_PREFIX", "offset_syncs_topic", "offset_syncs_topic_spec", "encode_syncs",
           "decode_syncs", "write_syncs", "MAX_ENTRIES_PER_PAIR"]

OFFSET_SYNCS_TOPIC_PREFIX = "kmirror-offset-syncs."
MAX_ENTRIES_PER_PAIR = 100_000
"""Entries the driver keeps per (source, destination) partition pair; a group offset older than
the oldest kept is not translated (never guessed)."""


class OffsetSyncError(KMirrorError):
    """An offset-sync record kmirror did not write, or one that contradicts itself."""


def offset_syncs_topic(job: str) -> str:
    return OFFSET_SYNCS_TOPIC_PREFIX + job


SYNCS_RETENTION_MS = 7 * 24 * 3600 * 1000
"""How long the destination keeps offset syncs: a week, Kafka's default retention."""


def offset_syncs_topic_spec(job: str) -> NewTopic:
    """One partition, like the offsets topic. Keys are unique per micro-batch, so compaction
    would never remove a record: the topic is time-retained instead, or a job running for
    weeks would make every driver start read all its history. A group that committed nothing
    for longer than the retention is not translated (its offsets are older than every sync)."""
    return NewTopic(offset_syncs_topic(job), 1,
                    configs={"cleanup.policy": "delete", "retention.ms": str(SYNCS_RETENTION_MS)})


@dataclass(frozen=True)
class SyncEntry:
    """Records of source offsets ``[first, last]`` of ``source`` went to ``destination``'s
    offsets ``[base, end)``; ``exact``: one for one, ``first + i`` is at ``base + i``."""

    source: TopicPartition
    first: int
    last: int
    destination: TopicPartition
    base: int
    end: int
    exact: bool
    topic_id: str | None = None
    """The id of the source topic the offsets are of, as the record said; None: not known (a
    cluster without ids, an entry not yet written, a record from before ids were kept)."""
    destination_id: str | None = None
    """The id of the destination topic the records went to, likewise: a destination topic made
    again after a loss (:mod:`.destination_loss`) is not placed by the lost one's syncs."""

    def __post_init__(self) -> None:
        problem = _span_problem(self.first, self.last, self.base, self.end, self.exact)
        if problem:
            raise OffsetSyncError(f"{problem}: {self}")


def _span_problem(first: int, last: int, base: int, end: int, exact: bool) -> str | None:
    """What makes a sync impossible, or None: said by the caller, which knows the partitions."""
    if not (0 <= first <= last and 0 <= base < end):
        return "impossible offset sync"
    if exact and last - first != end - base - 1:
        return "an exact offset sync maps as many source offsets as destination ones"
    return None


_PartitionPair = tuple[TopicPartition, TopicPartition]


@dataclass(slots=True)
class _OpenEntry:
    """A pair's newest entry, still growing: a :class:`SyncEntry` without its partitions."""

    first: int
    last: int
    base: int
    end: int
    exact: bool

    def continued_by(self, first: int, base: int, exact: bool) -> bool:
        """Whether the next batch's span extends this entry without losing anything: exact
        runs only when both sides are contiguous; bounds stay bounds (the earlier base covers
        both) when the next lands after this one, as a partition's acknowledgements do (a
        report read back may say anything: merged out of order, it would be impossible); an
        exact entry and a bound never merge."""
        return first > self.last and exact == self.exact and (first == self.last + 1 and base == self.end
                                                              if exact else base >= self.end)

    def closed(self, pair: _PartitionPair) -> SyncEntry:
        return SyncEntry(pair[0], self.first, self.last, pair[1], self.base, self.end, self.exact)


@dataclass
class SyncLog:
    """A task's entries, merged as they come (acknowledgements of one partition come in order).

    Each pair's newest entry stays open (:class:`_OpenEntry`) and grows with every
    acknowledgement that continues it: a frozen :class:`SyncEntry` per acknowledged batch,
    built and merged, was a noticeable share of the copy's CPU per forwarded batch (figures:
    docs/performance.md, "Small costs behind choices in the code"). :attr:`entries` closes them."""

    closed: dict[_PartitionPair, list[SyncEntry]] = field(default_factory=dict)
    open: dict[_PartitionPair, _OpenEntry] = field(default_factory=dict)

    def add(self, source: TopicPartition, first: int, last: int, destination: TopicPartition, base: int, end: int,
            exact: bool) -> None:
        """Source offsets ``[first, last]`` went to ``[base, end)`` of ``destination`` (see :class:`SyncEntry`)."""
        problem = _span_problem(first, last, base, end, exact)
        if problem:
            raise OffsetSyncError(f"{problem}: {source} [{first}, {last}] to {destination} [{base}, {end}), "
                                  f"exact={exact}")
        pair = (source, destination)
        entry = self.open.get(pair)
        if entry is not None:
            if entry.continued_by(first, base, exact):
                entry.last, entry.end = last, end
                return
            self.closed.setdefault(pair, []).append(entry.closed(pair))
        self.open[pair] = _OpenEntry(first, last, base, end, exact)

    def seal(self, source: TopicPartition, topic_id: str | None, destination_id: str | None) -> None:
        """The entries of ``source`` so far are of the source topic ``topic_id``, copied into the
        destination topic ``destination_id``: said now, when the copy of ``source`` gives way to
        one of another topic of the name, since the entries added from now on are of that one
        (the ids written with a sync are otherwise the task's as of the write, :func:`encode_syncs`)."""
        for pair in [pair for pair in self.open if pair[0] == source]:
            self.closed.setdefault(pair, []).append(self.open.pop(pair).closed(pair))
        for pair, entries in self.closed.items():
            if pair[0] == source:
                entries[:] = [e if e.topic_id is not None or e.destination_id is not None
                              else replace(e, topic_id=topic_id, destination_id=destination_id) for e in entries]

    @property
    def entries(self) -> dict[_PartitionPair, list[SyncEntry]]:
        """Every pair's entries, in source order."""
        pairs = sorted(set(self.closed) | set(self.open))
        return {pair: [*self.closed.get(pair, ()), *((self.open[pair].closed(pair),) if pair in self.open else ())]
                for pair in pairs}

    def by_source(self) -> dict[TopicPartition, list[SyncEntry]]:
        out: dict[TopicPartition, list[SyncEntry]] = {}
        for (source, _), entries in sorted(self.entries.items()):
            out.setdefault(source, []).extend(entries)
        return out

    @classmethod
    def of(cls, entries: Iterable[SyncEntry]) -> "SyncLog":
        """The log of ``entries`` added in order (merged as :meth:`add` merges them)."""
        log = cls()
        for e in entries:
            if e.topic_id is not None or e.destination_id is not None:  # sealed (:meth:`seal`): kept as it is
                log.closed.setdefault((e.source, e.destination), []).append(e)
            else:
                log.add(e.source, e.first, e.last, e.destination, e.base, e.end, e.exact)
        return log

    @classmethod
    def __get_pydantic_core_schema__(cls, source: type, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        """As data (a copier's report, :mod:`.copier.messages`): its entries, in order, each
        pair's open one closed; read back by :meth:`of`, which merges them as they were. Its
        dicts are keyed by partition pairs, which JSON cannot key by."""
        entries = handler.generate_schema(list[SyncEntry])
        as_list = core_schema.plain_serializer_function_ser_schema(
            lambda log: [e for pair in log.entries.values() for e in pair], return_schema=entries)
        return core_schema.no_info_after_validator_function(cls.of, entries, serialization=as_list)


def encode_syncs(log: SyncLog, now_ms: int, topic_ids: Mapping[str, str] | None = None,
                 destination_ids: Mapping[str, str] | None = None) -> bytearray | None:
    """One batch of :func:`sync_records`; None when there is nothing to say."""
    records = sync_records(log, now_ms, topic_ids, destination_ids)
    return bytearray(kcodecs.build_batch(records, compression="zstd")) if records else None


def sync_records(log: SyncLog, now_ms: int, topic_ids: Mapping[str, str] | None = None,
                 destination_ids: Mapping[str, str] | None = None) -> list[Record]:
    """A record per source partition (and per generation of its topics, :meth:`SyncLog.seal`).

    Key ``{"topic", "partition", "first"}`` (the source partition and its first offset here;
    the syncs topic is ``cleanup.policy=delete``, so two generations' records of one key are
    both kept), value ``{"syncs": [[first, last,
    destination topic, destination partition, base, end, exact], ...]}``, ``"topic_id"`` where
    ``topic_ids`` has the source topic's, and ``"destination_id"`` where ``destination_ids`` (by
    source topic) has its destination topic's."""
    topic_ids, destination_ids = topic_ids or {}, destination_ids or {}
    records = []
    for source, entries in log.by_source().items():
        # Entries sealed with another topic's ids (:meth:`SyncLog.seal`) go in records of their own.
        generations: dict[tuple[str | None, str | None], list[SyncEntry]] = {}
        for e in entries:
            ids = (e.topic_id or topic_ids.get(source.topic), e.destination_id or destination_ids.get(source.topic))
            generations.setdefault(ids, []).append(e)
        for (topic_id, destination_id), same in generations.items():
            key = {"topic": source.topic, "partition": source.partition, "first": same[0].first}
            value: dict = {"syncs": [[e.first, e.last, e.destination.topic, e.destination.partition, e.base, e.end,
                                      e.exact] for e in same]}
            if topic_id is not None:
                value["topic_id"] = topic_id
            if destination_id is not None:
                value["destination_id"] = destination_id
            records.append(Record(key=json.dumps(key, sort_keys=True).encode(), value=json.dumps(value).encode(),
                                  timestamp=now_ms))
    return records


def write_syncs(producer: IdempotentProducer, to: TopicPartition, log: SyncLog,
                topic_ids: Mapping[str, str] | None = None, destination_ids: Mapping[str, str] | None = None) -> None:
    """Enqueue ``log`` for the offset-syncs partition ``to`` (in the producer's transaction, if it
    has one), each record with the ids of its source and destination topics (:func:`encode_syncs`)."""
    records = sync_records(log, time.time_ns() // 1_000_000, topic_ids, destination_ids)
    for some in chunks(records):  # bounded batches (:mod:`.own_batches`)
        producer.enqueue(to, bytearray(kcodecs.build_batch(some, compression="zstd")), len(some))


def decode_syncs(record: Record) -> list[SyncEntry]:
    try:
        key = json.loads(bytes(record.key or b""))
        source = TopicPartition(str(key["topic"]), int(key["partition"]))
        if record.value is None:
            return []
        value = json.loads(bytes(record.value))
        topic_id = None if value.get("topic_id") is None else str(value["topic_id"])
        destination_id = None if value.get("destination_id") is None else str(value["destination_id"])
        return [SyncEntry(source, int(first), int(last), TopicPartition(str(topic), int(partition)), int(base), int(end),
                          bool(exact), topic_id, destination_id)
                for first, last, topic, partition, base, end, exact in value["syncs"]]
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise OffsetSyncError(f"record at offset {record.offset} of the offset-syncs topic is not kmirror's: "
                              f"key {record.key!r}, value {record.value!r}") from exc


class Precision(str, Enum):
    """How a translated offset relates to the group's position."""

    EXACT = "exact"
    """The destination offset of the record the group would read next: no re-read, no gap."""
    CONSERVATIVE = "conservative"
    """Lower than exact (rebuilt batches, or several source partitions feed this one): the
    group re-reads some records it had consumed, and skips none."""


@dataclass(frozen=True)
class Translation:
    offset: int
    precision: Precision
    clamped: bool = False
    """The group was ahead of what the mirror had copied: it resumes where the copy is."""


@dataclass
class _Pair:
    """One (source, destination) partition pair's entries, in source order."""

    entries: list[SyncEntry] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    pruned: bool = False

    def add(self, entry: SyncEntry) -> None:
        """Keep ``entry`` in source order. One that overlaps an entry kept is a replayed
        micro-batch of at-least-once, copied again: the first copy is the lower bound, and it
        is dropped. One before the newest that overlaps none is placed: a failback's syncs
        are seeded with a reconciled tail's, which lie between its own (:mod:`.failback`)."""
        if not self.entries or entry.first > self.entries[-1].last:
            at = len(self.entries)
        else:
            at = bisect.bisect_left(self.lasts, entry.first)
            if self.entries[at].first <= entry.last:
                return
        self.entries.insert(at, entry)
        self.lasts.insert(at, entry.last)
        if len(self.entries) > MAX_ENTRIES_PER_PAIR:
            del self.entries[0], self.lasts[0]
            self.pruned = True

    def bound(self, offset: int) -> tuple[int, bool] | None:
        """The lowest destination offset holding a record of source offset >= ``offset``, and
        whether it is exact; None when ``offset`` is older than the history kept."""
        if self.pruned and offset < self.entries[0].first:
            return None
        at = bisect.bisect_left(self.lasts, offset)
        if at == len(self.entries):
            return self.entries[-1].end, True  # nothing copied at or after it yet: the next record lands here
        entry = self.entries[at]
        if offset <= entry.first:
            return entry.base, entry.exact
        return (entry.base + offset - entry.first, True) if entry.exact else (entry.base, False)


class OffsetSyncStore:
    """The driver's view of the offset-syncs topic; :meth:`refresh` reads what is new."""

    def __init__(self, client: KafkaClient | None, topic: str, *, max_wait_s: float = 60.0):
        self._tail = CommittedTail(client, TopicPartition(topic, 0), max_wait_s=max_wait_s) if client else None
        self._pairs: dict[tuple[TopicPartition, TopicPartition, str | None], _Pair] = {}
        """Per (source, destination) partition pair and source topic id, its entries."""

    def refresh(self) -> list[SyncEntry]:
        """Add the entries committed since the previous call and return them, as read (for a
        caller that shows them too: ``kmirror groups translate``). Nothing without a client."""
        if self._tail is None:
            return []
        entries = [entry for record in self._tail.read_to_end() for entry in decode_syncs(record)]
        self.add(entries)
        return entries

    def add(self, entries: Iterable[SyncEntry]) -> None:
        for entry in entries:
            self._pairs.setdefault((entry.source, entry.destination, entry.topic_id, entry.destination_id),
                                   _Pair()).add(entry)

    def translate(self, group_offsets: Mapping[TopicPartition, int], copied_to: Mapping[TopicPartition, int],
                  topic_ids: Mapping[str, str] | None = None,
                  destination_ids: Mapping[str, str] | None = None) -> dict[TopicPartition, Translation]:
        """Destination offsets for a group that committed ``group_offsets`` at the source.

        ``topic_ids``: the id the source lists for each topic now. Syncs of another id (a topic
        since deleted and made again under the name) are not used: the group's offsets are the
        new topic's. ``destination_ids``: the id the destination lists for each of its topics
        now; syncs into a destination topic since lost are not used either. Syncs without an id
        are used for any.

        Per destination partition fed by those source partitions: the lowest of the bounds
        each feeding source partition gives (several feed one under ``by-key``). ``copied_to``
        is each source partition's copy frontier (the offsets topic): a group offset past it is
        clamped there, not invented. A destination partition is left out when one of its
        feeding source partitions has no group offset (where the group would start there is
        unknown) or history pruned past the group's offset.
        """
        topic_ids, destination_ids = topic_ids or {}, destination_ids or {}
        feeders: dict[TopicPartition, list[tuple[TopicPartition, _Pair]]] = {}
        for (source, destination, topic_id, destination_id), pair in self._pairs.items():
            if topic_id is not None and topic_ids.get(source.topic, topic_id) != topic_id:
                continue  # another topic's, under the same name
            if destination_id is not None and destination_ids.get(destination.topic, destination_id) != destination_id:
                continue  # into a destination topic since lost
            feeders.setdefault(destination, []).append((source, pair))
        out = {}
        for destination, pairs in feeders.items():
            if not any(source in group_offsets for source, _ in pairs):
                continue
            bounds = [self._bound(source, pair, group_offsets, copied_to) for source, pair in pairs]
            if None in bounds:
                continue
            offset = min(b[0] for b in bounds)
            exact = len(bounds) == 1 and bounds[0][1]
            out[destination] = Translation(offset, Precision.EXACT if exact else Precision.CONSERVATIVE,
                                           any(b[2] for b in bounds))
        return out

    @staticmethod
    def _bound(source: TopicPartition, pair: _Pair, group_offsets: Mapping[TopicPartition, int],
               copied_to: Mapping[TopicPartition, int]) -> tuple[int, bool, bool] | None:
        if source not in group_offsets:
            return None
        offset = group_offsets[source]
        frontier = copied_to.get(source, offset)
        found = pair.bound(min(offset, frontier))
        return None if found is None else (*found, offset > frontier)
