"""ReadCommitted: the batches of aborted transactions are left out, as Kafka's consumer leaves them.

Logs are written batch by batch with kcodecs (transactional data, commit and abort markers,
plain and idempotent batches in between), together with the aborted-transaction index a
broker keeps. Fetches are cut out of them as a broker serves a read_committed Fetch: from
the batch holding the fetch offset, up to ``max_bytes`` (at least one whole batch, KIP-74),
with every aborted transaction overlapping the fetched range (Kafka's
``collectAbortedTransactions``). What ReadCommitted keeps must be what the log's writer
committed, and what kafka-python's consumer (``Fetcher.PartitionRecords`` under
read_committed, an independent reader) returns from the same fetches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import TopicPartition as KTP
from kafka.consumer.fetcher import Fetcher as TheirFetcher
from kafka.protocol.consumer import IsolationLevel
from kafka.record import MemoryRecords

import kcodecs
from kcodecs import ControlType, Record, control_record
from mirror.routing import ReadCommitted

A, B, C = 4001, 4002, 4003  # transactional producer ids
IDEMPOTENT = 5001  # a producer id without transactions


@dataclass
class Log:
    """One partition's log, written as producers and the transaction coordinator would."""

    data: bytearray = field(default_factory=bytearray)
    end: int = 0
    open: dict[int, int] = field(default_factory=dict)
    """Producer id -> first offset of its open transaction."""
    aborted: list[tuple[int, int, int]] = field(default_factory=list)
    """The leader's aborted-transaction index: (producer_id, first_offset, last_offset)."""
    pending: dict[int, list[tuple[int, bytes]]] = field(default_factory=dict)
    committed: list[tuple[int, bytes]] = field(default_factory=list)
    """(offset, value) of every record a read_committed reader must see, in log order."""
    sequences: dict[int, int] = field(default_factory=dict)

    def _append(self, count: int, **options) -> list[tuple[int, bytes]]:
        values = [(self.end + i, b"%d@%d" % (options.get("producer_id", -1), self.end + i)) for i in range(count)]
        pid = options.get("producer_id", -1)
        if pid >= 0:
            options["base_sequence"] = self.sequences.get(pid, 0)
            self.sequences[pid] = options["base_sequence"] + count
        self.data += kcodecs.build_batch([Record(value=v) for _, v in values], base_offset=self.end,
                                         producer_epoch=0 if pid >= 0 else -1, **options)
        self.end += count
        return values

    def plain(self, count: int) -> None:
        self.committed += self._append(count)

    def idempotent(self, count: int, producer_id: int = IDEMPOTENT) -> None:
        self.committed += self._append(count, producer_id=producer_id)

    def send(self, producer_id: int, count: int) -> None:
        """Transactional data; the first batch of a producer begins its transaction."""
        self.open.setdefault(producer_id, self.end)
        self.pending.setdefault(producer_id, []).extend(self._append(count, producer_id=producer_id, transactional=True))

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        kind = ControlType.COMMIT if commit else ControlType.ABORT
        self.data += kcodecs.build_batch([control_record(kind, timestamp=0)], base_offset=self.end, control=True,
                                         transactional=True, producer_id=producer_id, producer_epoch=0)
        first = self.open.pop(producer_id)
        values = self.pending.pop(producer_id)
        if commit:
            self.committed = sorted(self.committed + values)
        else:
            self.aborted.append((producer_id, first, self.end))
        self.end += 1

    def fetch(self, offset: int, max_bytes: int) -> tuple[memoryview, list[tuple[int, int]]]:
        """What a read_committed Fetch from ``offset`` returns (every transaction of the log is
        decided, so the last stable offset is its end): the record set, maybe cut inside its last
        batch, and the aborted transactions overlapping it."""
        batches = list(kcodecs.iter_batches(self.data))
        first = next(b for b in batches if b.last_offset >= offset)
        start = first.position
        stop = min(len(self.data), start + max(max_bytes, first.size))
        whole = [b for b in batches if start <= b.position and b.position + b.size <= stop]
        upper = whole[-1].last_offset + 1
        aborted = [(pid, begin) for pid, begin, last in self.aborted if last >= offset and begin < upper]
        return memoryview(self.data)[start:stop], aborted


def ours(records: memoryview, aborted: list[tuple[int, int]], offset: int) -> tuple[list[tuple[int, bytes]], int]:
    """The records at or after ``offset`` that ReadCommitted keeps, and the offset to fetch next."""
    committed = ReadCommitted(aborted)
    kept, next_offset = [], offset
    for batch in kcodecs.iter_batches(records):
        skipped = committed.is_aborted(batch)
        if not skipped and not batch.is_control:
            kept += [(r.offset, r.value) for r in batch.records() if r.offset >= offset]
        next_offset = max(next_offset, batch.last_offset + 1)
    return kept, next_offset


def theirs(records: memoryview, aborted: list[tuple[int, int]], offset: int) -> tuple[list[tuple[int, bytes]], int]:
    """kafka-python's consumer reading the same fetch under read_committed."""
    txns = [SimpleNamespace(producer_id=pid, first_offset=first) for pid, first in aborted]
    fetched = TheirFetcher.PartitionRecords(offset, KTP("t", 0), MemoryRecords(bytes(records)),
                                            isolation_level=IsolationLevel.READ_COMMITTED, aborted_transactions=txns)
    kept = [(r.offset, r.value) for r in fetched.take()]
    return kept, fetched.next_fetch_offset


def read_all(log: Log, reader, start: int = 0, max_bytes: int = 1 << 20) -> list[tuple[int, bytes]]:
    """Fetch after fetch from ``start`` to the end of the log, as a read_committed consumer."""
    kept, offset = [], start
    while offset < log.end:
        records, aborted = log.fetch(offset, max_bytes)
        got, offset = reader(records, aborted, offset)
        kept += got
    return kept


def values(log: Log, start: int = 0) -> list[tuple[int, bytes]]:
    return [(offset, value) for offset, value in log.committed if offset >= start]


def interleaved() -> Log:
    """A aborts, B commits, their batches interleaved with plain and idempotent ones; then A commits."""
    log = Log()
    log.send(A, 3)          # 0-2   A's first transaction, to be aborted
    log.plain(2)            # 3-4
    log.send(B, 2)          # 5-6   B's transaction, to be committed
    log.send(A, 1)          # 7
    log.idempotent(2)       # 8-9
    log.send(B, 1)          # 10
    log.end_transaction(B, commit=True)   # 11
    log.send(A, 2)          # 12-13
    log.end_transaction(A, commit=False)  # 14
    log.send(A, 2)          # 15-16 A's second transaction, committed
    log.plain(1)            # 17
    log.end_transaction(A, commit=True)   # 18
    return log


# ---- one fetch ---------------------------------------------------------------------------------


def test_interleaved_transactions_of_two_producers():
    log = interleaved()
    records, aborted = log.fetch(0, 1 << 20)
    assert aborted == [(A, 0)]
    kept, next_offset = ours(records, aborted, 0)
    assert [offset for offset, _ in kept] == [3, 4, 5, 6, 8, 9, 10, 15, 16, 17]
    assert kept == values(log) == theirs(records, aborted, 0)[0]
    assert next_offset == log.end


def _two_transactions_of_a(first_commits: bool, second_commits: bool):
    """A's two transactions of two records each, ended as told, fetched whole: (records, aborted)."""
    log = Log()
    for commit in (first_commits, second_commits):
        log.send(A, 2)
        log.end_transaction(A, commit=commit)
    return log.fetch(0, 1 << 20)


def test_the_abort_marker_ends_the_aborted_transaction():
    # Without the marker, A's next (committed) transaction would be skipped too.
    records, aborted = _two_transactions_of_a(False, True)
    assert ours(records, aborted, 0)[0] == [(3, b"%d@3" % A), (4, b"%d@4" % A)] == theirs(records, aborted, 0)[0]


def test_a_committed_transaction_before_an_aborted_one_of_the_same_producer_is_kept():
    # The aborted transaction becomes current only at its first offset, not at the fetch's start.
    records, aborted = _two_transactions_of_a(True, False)
    assert aborted == [(A, 3)]
    assert ours(records, aborted, 0)[0] == [(0, b"%d@0" % A), (1, b"%d@1" % A)] == theirs(records, aborted, 0)[0]


def test_non_transactional_batches_of_an_aborted_producer_id_are_kept():
    # Kafka skips only transactional batches: the bit, not the producer id alone, decides.
    log = Log()
    log.send(A, 2)
    log.idempotent(2, producer_id=A)
    log.end_transaction(A, commit=False)
    records, aborted = log.fetch(0, 1 << 20)
    assert ours(records, aborted, 0)[0] == values(log) == [(2, b"%d@2" % A), (3, b"%d@3" % A)]


def test_control_batches_are_never_aborted_data():
    log = interleaved()
    records, aborted = log.fetch(0, 1 << 20)
    committed = ReadCommitted(aborted)
    markers = [b for b in kcodecs.iter_batches(records) if not committed.is_aborted(b) and b.is_control]
    assert [b.base_offset for b in markers] == [11, 14, 18]


def test_without_aborted_transactions_everything_is_kept():
    log = interleaved()
    records, _ = log.fetch(0, 1 << 20)
    committed = ReadCommitted([])
    assert not any(committed.is_aborted(b) for b in kcodecs.iter_batches(records))


def test_legacy_batches_have_no_transactions():
    data = kcodecs.build_batch([Record(value=b"v")], magic=1, base_offset=3)
    assert not ReadCommitted([(A, 0)]).is_aborted(kcodecs.read_batch(data))


# ---- fetches that start or end inside a transaction --------------------------------------------


@pytest.mark.parametrize("start", range(19))
def test_a_fetch_that_begins_inside_a_transaction(start):
    # From 1 (inside A's aborted transaction) or 12 (after B's commit, A still open), the broker
    # lists A's transaction, begun before the fetch offset.
    log = interleaved()
    records, aborted = log.fetch(start, 1 << 20)
    assert (A, 0) in aborted or start > 14
    assert ours(records, aborted, start)[0] == values(log, start) == theirs(records, aborted, start)[0]


@pytest.mark.parametrize("max_bytes", [1, 100, 150, 250, 400, 700])
def test_an_aborted_transaction_spanning_several_fetches(max_bytes):
    log = interleaved()
    assert read_all(log, ours, max_bytes=max_bytes) == values(log) == read_all(log, theirs, max_bytes=max_bytes)


# ---- any log -----------------------------------------------------------------------------------

_EVENT = st.one_of(
    st.tuples(st.just("send"), st.sampled_from([A, B, C]), st.integers(1, 3)),
    st.tuples(st.just("end"), st.sampled_from([A, B, C]), st.booleans()),
    st.tuples(st.just("plain"), st.integers(1, 3)),
    st.tuples(st.just("idempotent"), st.integers(1, 2)),
)


def _write(events) -> Log:
    log = Log()
    for event in events:
        if event[0] == "send":
            log.send(event[1], event[2])
        elif event[0] == "end" and event[1] in log.open:
            log.end_transaction(event[1], commit=event[2])
        elif event[0] == "plain":
            log.plain(event[1])
        elif event[0] == "idempotent":
            log.idempotent(event[1])
    for producer_id in list(log.open):  # every transaction decided: the last stable offset is the end
        log.end_transaction(producer_id, commit=producer_id != B)
    return log


@settings(max_examples=200, deadline=None)
@given(events=st.lists(_EVENT, min_size=1, max_size=30), max_bytes=st.integers(1, 600), start=st.integers(0, 40))
def test_any_log_reads_as_its_writer_committed_it_and_as_kafka_python_reads_it(events, max_bytes, start):
    log = _write(events)
    start = min(start, log.end)
    expected = values(log, start)
    assert read_all(log, ours, start, max_bytes) == expected
    assert read_all(log, theirs, start, max_bytes) == expected
