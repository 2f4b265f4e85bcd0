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
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator, TypeVar

from kcodecs import KMirrorError, Record, iter_batches

from ..kafka import KafkaClient, OffsetOutOfRangeError, TopicPartition
from ..kafka.client import READ_COMMITTED
from ..routing.transactions import ReadCommitted

K = TypeVar("K")
V = TypeVar("V")

__all__ = ["CommittedTail", "TopicTailError", "latest_by_key"]

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
        deadline = time.monotonic() + self._max_wait_s
        pause = 0.01
        while self.position < end:
            try:
                fetched = self._client.fetch(self.tp, self.position, max_bytes=_FETCH_BYTES,
                                             isolation_level=READ_COMMITTED)
            except OffsetOutOfRangeError as exc:
                if exc.log_start_offset <= self.position:
                    raise
                # Cleaned away below the log start: compaction keeps every key's last value after it.
                self.position = exc.log_start_offset
                continue
            start = self.position
            yield from self._committed(fetched)
            if self.position > start:
                continue
            if time.monotonic() > deadline:
                raise TopicTailError(
                    f"{self.tp}: open transactions kept offsets {self.position} to {end} unreadable for "
                    f"{self._max_wait_s:g} s (a copy task's transaction neither committed nor timed out)")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def _committed(self, fetched) -> Iterator[Record]:
        """The data records of one fetch; markers and aborted batches move the position too
        (read_committed returns only what lies below the last stable offset, all of it decided)."""
        read_committed = ReadCommitted(fetched.aborted_transactions or ())
        for batch in iter_batches(fetched.records):
            if batch.last_offset < self.position:
                continue
            if not read_committed.is_aborted(batch) and not batch.is_control:
                yield from batch.records()
            self.position = batch.last_offset + 1


def latest_by_key(client: KafkaClient, tp: TopicPartition, decode: Callable[[Record], Iterable[tuple[K, V | None]]],
                  wanted: Iterable[K], *, max_wait_s: float) -> dict[K, tuple[V, Record]]:
    """The latest value of each ``wanted`` key (and the record that said it), read from the end
    of ``tp`` backwards: the last :data:`_TAIL_SPAN` offsets, then four times as many, until
    every wanted key is seen or the log's start is reached. ``decode`` gives a record's
    ``(key, value)`` pairs, a value None for a tombstone (which decides its key too). Keys
    never seen are left out. For topics whose writers say every key they own at every write
    (kmirror's offsets and offset syncs), the last write alone answers."""
    wanted = set(wanted)
    end = client.list_offsets([tp], "latest")[tp]
    start = client.list_offsets([tp], "earliest")[tp]
    span = _TAIL_SPAN
    while True:
        since = max(start, end - span)
        tail = CommittedTail(client, tp, max_wait_s=max_wait_s)
        tail.position = since
        found: dict[K, tuple[V, Record]] = {}
        seen: set[K] = set()
        for record in tail.read_to_end():
            for key, value in decode(record):
                seen.add(key)
                if value is None:
                    found.pop(key, None)
                else:
                    found[key] = (value, record)
        if wanted <= seen or since <= start:
            return {key: found[key] for key in found if key in wanted}
        span *= 4
