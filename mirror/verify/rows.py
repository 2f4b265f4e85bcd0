"""The rows ``kmirror verify`` compares: one small row per record of a partition range, never the
record itself, so a Spark shuffle of both sides of a mirror moves hashes, not data.

A record's **identity** is a 128-bit BLAKE2b of what a consumer sees of it: key, value, headers
and CreateTime (under LogAppendTime the broker stamps the time, so it is left out), each
length-prefixed so that a null and an empty field differ and no two fields run together. Its
**near** hash covers only the key and the time: a destination record whose identity the source
lacks but whose near hash an unmatched source record shares is that record, altered. Its **key
hash** groups a key's records for the order check. The offset says where it was; for a by-key
pair, the partition Kafka's murmur2 gives its key says where it should be.

Each row also names the **sync entry** it lies in (:mod:`.plan`): the job's record of which
source span went to which destination span, and its batch's **producer id**: a destination
record in no entry's span that none of the job's producers wrote is **foreign**, written by
another producer. A reader notes the entries whose span lost offsets from the log since the
copy (retention moved the log start, or compaction removed records): records missing from
such a span are "no longer there", not lost by the mirror.
A Kafka log's offsets run without a hole except where records were cleaned away; aborted
records and transaction markers keep their offsets, so they are no hole.

The reader here is kmirror's own (its client and kcodecs): tests/verify/test_verify_rows.py
proves it against librdkafka's reading of the same ranges, record for record. Outside the
ranges verified, :func:`count_records` counts what a consumer reads from batch headers alone.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import struct
from dataclasses import dataclass, field
from typing import Iterator, Sequence

from kcodecs import Batch, TimestampType, V2Batch, iter_batches, record_content

from ..engine.topic_tail import fetch_from
from ..kafka import KafkaClient, TopicPartition
from ..kafka.client import READ_COMMITTED
from ..routing.murmur2 import partition_for_key
from ..routing.transactions import ReadCommitted

__all__ = ["RecordRow", "Spans", "RangeReader", "CommittedBatches", "count_records", "identity", "content_identity",
           "near", "key_hash", "NO_ENTRY"]

_FETCH_BYTES = 4 * 1024 * 1024
_INT64 = struct.Struct(">q")
"""Lengths and times as hashed, and 8-byte digests read back as ints."""
_NULL = _INT64.pack(-1)
NO_ENTRY = -1
"""The entry of a row no sync entry covers."""


@dataclass(frozen=True, slots=True)
class RecordRow:
    identity: bytes
    near: int
    key_hash: int | None
    partition: int
    offset: int
    entry: int
    """The sync entry whose span holds the offset (:class:`Spans`), or :data:`NO_ENTRY`."""
    key_partition: int | None = None
    """``murmur2(key) % partitions`` for a keyed record when asked (by-key pairs); else None."""
    producer: int = -1
    """The producer id of the record's batch (-1: none, as a producer without idempotence writes):
    a destination record in no sync entry's span is the job's if one of its producers wrote it."""


def content_identity(encoded: bytes | memoryview, timestamp: int | None) -> bytes:
    digest = hashlib.blake2b(encoded, digest_size=16)
    digest.update(_NULL if timestamp is None else _INT64.pack(timestamp))
    return digest.digest()


def identity(key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]],
             timestamp: int | None) -> bytes:
    """What a consumer sees of a record, as 16 bytes (``timestamp`` None: LogAppendTime)."""
    return content_identity(record_content(key, value, headers), timestamp)


def near(key: bytes | None, timestamp: int | None) -> int:
    """Key and time only, as a signed 64-bit int: what an altered copy of a record still shares
    with it. (Ints, not bytes: Spark groups and aggregates them in fixed-width rows.)"""
    digest = hashlib.blake2b(_NULL if key is None else _INT64.pack(len(key)) + bytes(key), digest_size=8,
                             person=b"near")
    digest.update(_NULL if timestamp is None else _INT64.pack(timestamp))
    return _INT64.unpack(digest.digest())[0]


def key_hash(key: bytes | None) -> int | None:
    """A key as a signed 64-bit int, None for no key."""
    return None if key is None else _INT64.unpack(hashlib.blake2b(bytes(key), digest_size=8, person=b"key").digest())[0]


@dataclass(frozen=True)
class Spans:
    """A partition's sync entries as offset spans ``[low, high)``, sorted by ``low``, with ids."""

    lows: tuple[int, ...] = ()
    highs: tuple[int, ...] = ()
    ids: tuple[int, ...] = ()
    reach: tuple[int, ...] = ()
    """``reach[i]``: the highest ``high`` of spans ``0..i``, which ends a backward search."""

    @classmethod
    def of(cls, spans: Sequence[tuple[int, int, int]]) -> "Spans":
        """From ``(low, high, id)`` triples in any order."""
        ordered = sorted(spans)
        highs = tuple(s[1] for s in ordered)
        return cls(tuple(s[0] for s in ordered), highs, tuple(s[2] for s in ordered),
                   tuple(itertools.accumulate(highs, max)))

    def entry_at(self, offset: int) -> int:
        """The entry holding ``offset``: of those that do (merged bound entries may overlap),
        the one starting last; :data:`NO_ENTRY` if none."""
        index = bisect.bisect_right(self.lows, offset) - 1
        while index >= 0 and self.reach[index] > offset:
            if offset < self.highs[index]:
                return self.ids[index]
            index -= 1
        return NO_ENTRY

    def overlapping(self, low: int, high: int) -> set[int]:
        """The entries whose span meets ``[low, high)``."""
        first = bisect.bisect_right(self.reach, low)  # spans before it all end at or before low
        stop = bisect.bisect_left(self.lows, high)
        return {self.ids[i] for i in range(first, stop) if self.highs[i] > low}


def _contents(batch: Batch) -> Iterator[tuple[int, int, bytes | None, bytes | memoryview]]:
    """``(offset, timestamp, key, content)`` per record: v2 batches hand out their bytes as
    they are; older formats' records are decoded and encoded as v2 would."""
    if isinstance(batch, V2Batch):
        return batch.record_contents()
    return ((r.offset, r.timestamp, r.key, record_content(r.key, r.value, r.headers)) for r in batch.records())


class CommittedBatches:
    """The batches of ``tp`` a read_committed consumer's fetches walk through from ``start`` up to
    ``end``, each with whether its transaction aborted (markers and aborted batches keep their
    offsets: a reader decides what to do with them). A start below the log's start (retention
    or compaction since) begins at the log start. After the walk, :attr:`position` is how far
    the log was walked: the offset after the last batch seen, ``end`` if the next one starts
    there or later, or where the walk began. The one fetch loop of the verifier: its
    rows, its counts and the demo's reads all walk it."""

    def __init__(self, client: KafkaClient, tp: TopicPartition, start: int, end: int):
        self.client, self.tp, self.end = client, tp, end
        self.position = start

    def __iter__(self) -> Iterator[tuple[Batch, bool]]:
        while self.position < self.end:
            self.position, fetched = fetch_from(self.client, self.tp, self.position, READ_COMMITTED,
                                                max_bytes=_FETCH_BYTES)
            read_committed = ReadCommitted(fetched.aborted_transactions or ())
            moved = False
            for batch in iter_batches(fetched.records):
                if batch.next_offset <= self.position:
                    continue
                if batch.base_offset >= self.end:
                    self.position = self.end  # the log holds nothing before it: walked to the end
                    return
                moved = True
                yield batch, read_committed.is_aborted(batch)
                self.position = batch.next_offset
            if not moved:
                return  # nothing past the position: the partition ends there (its last stable offset)


def count_records(client: KafkaClient, tp: TopicPartition, start: int, end: int) -> int:
    """The data records a read_committed consumer reads in ``[start, end)`` of ``tp``: counted
    from the batch headers, decompressing only a batch that straddles an end."""
    if start >= end:
        return 0
    count = 0
    for batch, aborted in CommittedBatches(client, tp, start, end):
        if aborted or batch.is_control:
            continue
        whole = start <= batch.base_offset and batch.next_offset <= end and batch.record_count is not None
        count += batch.record_count if whole else sum(1 for offset, *_ in _contents(batch) if start <= offset < end)
    return count


@dataclass
class RangeReader:
    """The committed data records of ``tp`` in ``[start, end)`` as rows, as a read_committed
    consumer reads them (aborted transactions and markers left out), each tagged with its sync
    entry in ``spans`` and its batch's producer; with ``key_partitions``, each keyed record's
    murmur2 partition too. After :meth:`rows`, :attr:`cleaned` holds the entries whose spans
    lost offsets."""

    client: KafkaClient
    tp: TopicPartition
    start: int
    end: int
    spans: Spans = field(default_factory=Spans)
    key_partitions: int | None = None
    cleaned: set[int] = field(default_factory=set)
    _expected: int = field(default=0, init=False, repr=False)
    """The offset after the last one seen in the log, while :meth:`rows` reads."""

    def rows(self) -> Iterator[RecordRow]:
        self._expected = self.start
        batches = CommittedBatches(self.client, self.tp, self.start, self.end)
        for batch, aborted in batches:
            yield from self._batch_rows(batch, aborted)
        self._present(min(batches.position, self.end))

    def _batch_rows(self, batch: Batch, aborted: bool) -> Iterator[RecordRow]:
        if batch.is_control:
            self._present(batch.base_offset)
            self._expected = batch.next_offset
            return
        appended = batch.timestamp_type is TimestampType.LOG_APPEND_TIME
        producer = batch.producer_id
        for offset, timestamp, key, encoded in _contents(batch):
            if offset < self.start:
                continue
            if offset >= self.end:
                break
            self._present(offset)
            self._expected = offset + 1
            if aborted:
                continue
            if appended:
                timestamp = None
            placed = (partition_for_key(key, self.key_partitions)
                      if self.key_partitions is not None and key is not None else None)
            yield RecordRow(content_identity(encoded, timestamp), near(key, timestamp), key_hash(key),
                            self.tp.partition, offset, self.spans.entry_at(offset), placed, producer)
        # A cleaned batch keeps its offsets: the next one starts after its last.
        self._present(min(batch.next_offset, self.end))
        self._expected = max(self._expected, min(batch.next_offset, self.end))

    def _present(self, offset: int) -> None:
        """``offset`` is in the log: the offsets between the last one seen and it are not."""
        low = max(self._expected, self.start)
        if offset > low:
            self.cleaned |= self.spans.overlapping(low, offset)
