"""Reading one partition of a destination topic kmirror keeps for itself, committed records only,
to its end and from where the last read stopped.

Both of the mirror's own topics (``kmirror-offsets.<job>``, ``kmirror-offset-syncs.<job>``) are
written in the copy tasks' transactions, so they are read as a ``read_committed`` consumer
reads them. "To its end" means the end as it was when the read began, *including* what lies
behind a transaction that is still open: read_committed stops at the last stable offset, and
a record another task committed may sit after a transaction still open below it, so the read
waits for those transactions to end (up to ``max_wait_s``: a transaction a dead task left
open ends when its transactional id is taken over or the destination times it out) rather
than miss that record.

:func:`latest_by_key`, which asks only for some keys, reads read_uncommitted instead and
decides each transaction by its marker: it waits only for an open transaction that wrote one
of the keys it asks for.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator, TypeVar

from kcodecs import Batch, KMirrorError, Record, iter_batches

from ..kafka import KafkaClient, OffsetOutOfRangeError, TopicPartition
from ..kafka.client import READ_COMMITTED, READ_UNCOMMITTED
from ..routing.transactions import ReadCommitted, is_abort_marker

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["CommittedTail", "TopicTailError", "latest_by_key", "fetch_from"]

_FETCH_BYTES = 1024 * 1024
_TAIL_SPAN = 1024
"""Offsets :func:`latest_by_key` reads first, from the end; four times more each time a wanted
key is not among them."""


class TopicTailError(KMirrorError):
    """The topic could not be read to its end in time."""


class CommittedTail:
    """The committed records of ``tp`` after the position the previous read ended at."""

    def __init__(self, client: KafkaClient, tp: TopicPartition, *, max_wait_s: float):
        self._client = client
        self.tp = tp
        self._max_wait_s = max_wait_s
        self.position = 0
        self.producers: set[int] = set()
        """The producer ids of the committed data batches read so far (who wrote them)."""

    def update_latest(self, table: dict[K, V], decode: Callable[[Record], tuple[K, V | None]]) -> None:
        """``table`` brought up to the end of the partition as a compacted topic's view: every
        key's latest value, a key whose latest value is None (a tombstone) removed."""
        for record in self.read_to_end():
            key, value = decode(record)
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value

    def read_to_end(self) -> Iterator[Record]:
        """Every committed data record from the position to the end of the partition as it is now."""
        end = self._client.list_offsets([self.tp], "latest")[self.tp]
        patience = _Patience(self._max_wait_s)
        while self.position < end:
            self.position, fetched = fetch_from(self._client, self.tp, self.position, READ_COMMITTED)
            start = self.position
            yield from self._committed(fetched)
            if self.position == start:
                patience.wait(lambda: f"{self.tp}: open transactions kept offsets {self.position} to {end} unreadable "
                                      f"for {self._max_wait_s:g} s (a copy task's transaction neither committed nor "
                                      "timed out)")

    def _committed(self, fetched) -> Iterator[Record]:
        """The data records of one fetch; markers and aborted batches move the position too
        (read_committed returns only what lies below the last stable offset, all of it decided)."""
        read_committed = ReadCommitted(fetched.aborted_transactions or ())
        for batch in iter_batches(fetched.records):
            if batch.last_offset < self.position:
                continue
            if not read_committed.is_aborted(batch) and not batch.is_control:
                self.producers.add(batch.producer_id)
                yield from batch.records()
            self.position = batch.last_offset + 1


def latest_by_key(client: KafkaClient, tp: TopicPartition, decode: Callable[[Record], Iterable[tuple[K, V | None]]],
                  wanted: Iterable[K], *, max_wait_s: float) -> dict[K, tuple[V, Record]]:
    """The latest committed value of each ``wanted`` key (and the record that said it), read from
    the end of ``tp`` backwards: the last :data:`_TAIL_SPAN` offsets, then four times as many,
    until every wanted key is seen or the log's start is reached. ``decode`` gives a record's
    ``(key, value)`` pairs, a value None for a tombstone (which decides its key too). Keys
    never seen are left out. For topics whose writers say every key they own at every write
    (kmirror's offsets and offset syncs), the last write alone answers.

    The read is read_uncommitted and decides each transaction by its own marker
    (:func:`_decided_records`), so a transaction still open holds up only the keys it wrote:
    a starting copier is not kept waiting by a sibling that died in the middle of its
    transaction (its partitions are not the copier's), only by one that wrote the copier's
    own partitions, and then for up to ``max_wait_s``."""
    wanted = set(wanted)
    patience = _Patience(max_wait_s)
    while True:
        found, undecided = _latest_decided(client, tp, decode, wanted)
        if not undecided:
            return found
        patience.wait(lambda: f"{tp}: open transactions kept the latest values of {len(undecided)} of the "
                              f"{len(wanted)} keys asked for undecided for {max_wait_s:g} s (a copy's transaction "
                              "neither committed nor timed out)")


def _latest_decided(client: KafkaClient, tp: TopicPartition, decode, wanted: set) -> tuple[dict, set]:
    """One look for :func:`latest_by_key`: what is decided, and the wanted keys whose latest
    write belongs to a transaction still open."""
    end = client.list_offsets([tp], "latest")[tp]
    start = client.list_offsets([tp], "earliest")[tp]
    span = _TAIL_SPAN
    while True:
        since = max(start, end - span)
        found: dict = {}
        seen: set = set()
        undecided: set = set()
        for record, still_open in _decided_records(client, tp, since, end):
            for key, value in decode(record):
                if still_open:
                    if key in wanted:
                        undecided.add(key)
                    continue
                seen.add(key)
                undecided.discard(key)  # a later committed write decides the key whatever the open one does
                if value is None:
                    found.pop(key, None)
                else:
                    found[key] = (value, record)
        if undecided:
            return found, undecided
        if wanted <= seen or since <= start:
            return {key: found[key] for key in found if key in wanted}, set()
        span *= 4


def _decided_records(client: KafkaClient, tp: TopicPartition, since: int, end: int) -> list[tuple[Record, bool]]:
    """The data records of ``tp`` from ``since`` to ``end`` (a high watermark), read_uncommitted,
    each with whether its transaction is still open; aborted transactions' records left out.

    A transactional batch is decided by the next marker of its producer id (KIP-98): the
    marker follows the transaction's last batch in the log, so one that lies in the range
    read decides it, and one that does not is still to come. Compaction keeps a marker while
    any record of its transaction remains."""
    batches: list[Batch | None] = []
    open_batches: dict[int, list[int]] = {}  # producer id -> indexes in ``batches``
    position = since
    while position < end:
        position, fetched = fetch_from(client, tp, position, READ_UNCOMMITTED)
        before = position
        for batch in iter_batches(fetched.records):
            if batch.last_offset < position:
                continue
            position = batch.last_offset + 1
            if batch.is_control:
                ended = open_batches.pop(batch.producer_id, [])
                if is_abort_marker(batch):
                    for index in ended:
                        batches[index] = None
            else:
                if batch.is_transactional:
                    open_batches.setdefault(batch.producer_id, []).append(len(batches))
                batches.append(batch)
        if position == before:
            break  # nothing below the high watermark came back: what was read is all there is
    still_open = {index for indexes in open_batches.values() for index in indexes}
    return [(record, index in still_open) for index, batch in enumerate(batches) if batch is not None
            for record in batch.records()]


def fetch_from(client: KafkaClient, tp: TopicPartition, position: int, isolation_level: int, *,
               max_bytes: int = _FETCH_BYTES):
    """``(position, fetched)``: a fetch at ``position``, or at the log's start where retention or
    compaction cleaned away what lay below it (compaction keeps every key's last value after it)."""
    while True:
        try:
            return position, client.fetch(tp, position, max_bytes=max_bytes, isolation_level=isolation_level)
        except OffsetOutOfRangeError as exc:
            if exc.log_start_offset <= position:
                raise
            position = exc.log_start_offset


class _Patience:
    """The waits between looks at a partition that an open transaction holds up: 10 ms, doubling
    to half a second, until ``max_wait_s`` is spent; then :class:`TopicTailError`."""

    def __init__(self, max_wait_s: float):
        self._deadline = time.monotonic() + max_wait_s
        self._pause = 0.01

    def wait(self, why: Callable[[], str]) -> None:
        if time.monotonic() > self._deadline:
            raise TopicTailError(why())
        time.sleep(self._pause)
        self._pause = min(self._pause * 2, 0.5)
