"""The copy reads committed data only (issue 10).

- A fetched set routed on hand-built fetches: aborted transactions left out and counted,
  commits forwarded as plain data, markers dropped, across fetch boundaries, from a fetch
  offset inside a transaction, and whatever the slices it is routed in.
- ``copy_ranges`` between embedded brokers, over a range planned past the last stable offset
  (the source's fetch handler made to answer as if a transaction were open, then a real one
  of librdkafka's): the copy waits there (no false truncation or corruption error) and
  finishes once the transaction ends; the fetcher gives up on a transaction open too long.
- End to end: librdkafka's transactional producer commits and aborts at the source, and the
  destination holds exactly what librdkafka's read_committed consumer reads there.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from kafka.record.default_records import DefaultRecordBatch

import kcodecs
from kcodecs import ControlType, Record, control_record
from mirror.broker import EmbeddedBroker
from mirror.broker.handlers import fetch as fetch_handler
from mirror.config import load_config
from mirror.engine import CopyRequest, TopicRoute, copy_ranges, sync_destination_topics
from mirror.engine.fetched_set import FetchedSet
from mirror.kafka import (
    READ_COMMITTED,
    FetchedData,
    Fetcher,
    HangingTransactionError,
    IdempotentProducer,
    KafkaClient,
    NewTopic,
    TopicPartition,
    wait_readable,
)
from mirror.routing import RouteClass, RouteCounters, RoutingPolicy

from conftest import unconnected_producer

A, B = 7001, 7002  # transactional producers
OURS = 9000  # the copy's own idempotent producer
TP = TopicPartition("t", 0)
ROUTE = TopicRoute("t", "t.copy", 1, RoutingPolicy(destination_partitions=1, partitioning="preserve"))


# ---- FetchedSet, pure ----------------------------------------------------------------------------


def _data(base: int, pid: int, count: int) -> bytes:
    records = [Record(value=b"%d@%d" % (pid, base + i)) for i in range(count)]
    if pid < 0:
        return kcodecs.build_batch(records, base_offset=base)
    return kcodecs.build_batch(records, base_offset=base, producer_id=pid, producer_epoch=0, base_sequence=base,
                               transactional=True)


def _marker(base: int, pid: int, kind: ControlType) -> bytes:
    return kcodecs.build_batch([control_record(kind)], base_offset=base, control=True, transactional=True,
                               producer_id=pid, producer_epoch=0)


# A aborts [0, 12], B commits, a plain batch in between; then A commits [13, 16].
LOG = [_data(0, A, 3), _data(3, B, 2), _data(5, -1, 2), _data(7, A, 3), _marker(10, B, ControlType.COMMIT),
       _data(11, A, 1), _marker(12, A, ControlType.ABORT), _data(13, A, 2), _marker(15, A, ControlType.COMMIT)]
ABORTED = ((A, 0),)
COMMITTED = [b"%d@%d" % (B, 3), b"%d@%d" % (B, 4), b"-1@5", b"-1@6", b"%d@13" % A, b"%d@14" % A]


def _fetched(batches: list[bytes], aborted=ABORTED) -> FetchedData:
    return FetchedData(memoryview(bytearray(b"".join(batches))), 16, 0, 16, aborted)


def _copy(fetches: list[FetchedData], offset: int = 0, end: int = 16, slice_: int | None = None
          ) -> tuple[list[bytes], RouteCounters]:
    """Route fetch after fetch, as the copy does, ``slice_`` batches at a time (None: each fetch
    at once); the values of the outgoing batches."""
    counters, values, outgoing = RouteCounters(), [], []
    for fetched in fetches:
        fetched_set = FetchedSet(fetched, TP, offset, end, ROUTE, counters)
        while not fetched_set.done:
            outgoing += fetched_set.route_slice(slice_)
        offset = fetched_set.offset
    producer = unconnected_producer(OURS)
    for out in outgoing:
        producer.enqueue(out.tp, out.data, out.records)  # its stamp, over the source's producer state
        batch = DefaultRecordBatch(bytes(out.data))  # kafka-python reads what the destination would get
        assert out.tp == TopicPartition("t.copy", 0) and batch.validate_crc()
        assert (batch.producer_id, batch.is_transactional, batch.is_control_batch) == (OURS, False, False)
        values += [record.value for record in batch]
    assert offset == end
    return values, counters


@pytest.mark.parametrize("slice_", [None, 1, 2])
def test_aborted_transactions_are_left_out_and_counted(slice_):
    # In slices, the transactions' state carries from one slice to the next.
    values, counters = _copy([_fetched(LOG)], slice_=slice_)
    assert values == COMMITTED
    classes = counters.by_class
    assert (classes[RouteClass.ABORTED].batches, classes[RouteClass.ABORTED].records) == (3, 7)
    assert (classes[RouteClass.DROPPED].batches, classes[RouteClass.DROPPED].records) == (3, 3)  # the markers
    assert classes[RouteClass.PASSED_THROUGH].records == 6


def test_an_aborted_transaction_spanning_two_fetches():
    # Each fetch lists the transaction: the broker includes every one overlapping its range.
    values, counters = _copy([_fetched(LOG[:4]), _fetched(LOG[4:])])
    assert values == COMMITTED
    assert counters.by_class[RouteClass.ABORTED].batches == 3


def test_a_fetch_beginning_inside_a_transaction():
    # From offset 8, inside A's batch [7, 9]: the broker returns that whole batch, and lists
    # the transaction begun at 0. The batch goes with the range holding its last offset.
    values, counters = _copy([_fetched(LOG[3:])], offset=8)
    assert values == COMMITTED[-2:]
    assert counters.by_class[RouteClass.ABORTED].batches == 2


def test_without_the_list_nothing_is_left_out():
    # A read_uncommitted fetch lists nothing: aborted data would be copied (the bug this fixes).
    values, counters = _copy([_fetched(LOG, aborted=())])
    assert len(values) == 13 and counters.by_class[RouteClass.ABORTED].batches == 0


# ---- the copy at an open transaction -----------------------------------------------------------


@pytest.fixture
def clusters(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
            yield src, dst, source, destination


class OpenTransaction:
    """The source's fetch handler answering read_committed fetches of ``t/0`` as a broker with a
    transaction open at ``stable`` would (nothing at or past it), ``answers`` times; then the
    transaction has ended and the broker answers as it is. Records every isolation level asked."""

    def __init__(self, monkeypatch, stable: int, answers: int | None):
        self.stable, self.answers, self.isolation_levels = stable, answers, []
        self.original = fetch_handler.handle
        monkeypatch.setattr(fetch_handler, "handle", self.handle)

    async def handle(self, request, version, state):
        response = await self.original(request, version, state)
        self.isolation_levels.append(request.isolation_level)
        if request.isolation_level != READ_COMMITTED or self.answers == 0:
            return response
        if self.answers is not None:
            self.answers -= 1
        return dataclasses.replace(response, partitions=[self._stable(p) for p in response.partitions])

    def _stable(self, part):
        if (part.topic, part.partition) != ("t", 0):
            return part
        cut = sum(b.size for b in kcodecs.iter_batches(part.records) if b.last_offset < self.stable)
        return dataclasses.replace(part, last_stable_offset=self.stable, records=part.records[:cut])


def _source(source: KafkaClient, batches: int = 3) -> list[bytes]:
    source.create_topics([NewTopic("t", 1)])
    values = []
    for b in range(batches):
        records = [Record(value=b"v%d" % (10 * b + i)) for i in range(10)]
        source.produce([(TP, kcodecs.build_batch(records))])
        values += [r.value for r in records]
    return values


def test_the_copy_waits_at_an_open_transaction_then_finishes(clusters, monkeypatch, caplog):
    src, dst, source, destination = clusters
    values = _source(source)
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "topics": "t"})
    routes = sync_destination_topics(config, source, destination)
    # A range planned past the last stable offset (20) while the high watermark is 30.
    fetches = OpenTransaction(monkeypatch, stable=20, answers=12)
    producer = IdempotentProducer(destination)
    try:
        (stats,) = copy_ranges([CopyRequest(TP, 0, 30)], routes, source, producer, fetch_max_bytes=1 << 20).ranges
    finally:
        producer.close()
    assert fetches.answers == 0  # it waited through every answer held at the LSO
    assert set(fetches.isolation_levels) == {READ_COMMITTED}
    assert stats.counters.total_records == 30
    assert "waiting at offset 20 for the source transaction open at offset 20" in caplog.text
    with KafkaClient(dst.bootstrap) as reader:
        copied = reader.fetch(TopicPartition("t", 0), 0, max_bytes=1 << 20).records
    assert [r.value for b in kcodecs.iter_batches(copied) for r in b.records()] == values


def test_a_range_past_a_real_open_transaction_is_copied_once_it_commits(clusters, caplog):
    from confluent_kafka import Producer

    src, dst, source, destination = clusters
    source.create_topics([NewTopic("t", 1)])
    producer = Producer({"bootstrap.servers": src.bootstrap, "transactional.id": "slow-app", "linger.ms": 1})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(10):
        producer.produce("t", value=b"v%d" % i, partition=0)
    producer.flush(30)
    high_watermark = source.list_offsets([TP], "latest")[TP]
    assert (high_watermark, source.list_offsets([TP], "latest", isolation_level=READ_COMMITTED)[TP]) == (10, 0)
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "topics": "t"})
    routes = sync_destination_topics(config, source, destination)
    committer = threading.Timer(1.0, producer.commit_transaction, (30,))
    committer.start()
    mirror = IdempotentProducer(destination)
    try:  # planned past the last stable offset: the copy waits for the commit, then copies
        (stats,) = copy_ranges([CopyRequest(TP, 0, 10)], routes, source, mirror, fetch_max_bytes=1 << 20).ranges
    finally:
        mirror.close()
        committer.join()
    assert "waiting at offset 0 for the source transaction open at offset 0" in caplog.text
    assert stats.counters.by_class[RouteClass.PASSED_THROUGH].records == stats.counters.total_records == 10
    with KafkaClient(dst.bootstrap) as reader:
        copied = reader.fetch(TopicPartition("t", 0), 0, max_bytes=1 << 20).records
    assert [r.value for b in kcodecs.iter_batches(copied) for r in b.records()] == [b"v%d" % i for i in range(10)]


def test_a_transaction_open_too_long_stops_the_fetch(clusters, monkeypatch):
    _, _, source, _ = clusters
    _source(source)
    OpenTransaction(monkeypatch, stable=20, answers=None)
    fetcher = Fetcher(source, max_bytes=1 << 20, isolation_level=READ_COMMITTED, max_transaction_wait_s=0.5)
    began, offset = time.monotonic(), 0
    try:
        with pytest.raises(HangingTransactionError) as caught:
            while True:
                fetcher.send({TP: offset})
                for conn in wait_readable(fetcher.connections(), 1.0):
                    for fetched in fetcher.on_readable(conn).values():
                        offset = max([offset] + [b.last_offset + 1 for b in kcodecs.iter_batches(fetched.records)])
    finally:
        fetcher.close()
    assert time.monotonic() - began >= 0.5
    error = caught.value
    assert (error.tp, error.offset, error.last_stable_offset) == (TP, 20, 20) and error.waited_s > 0.5
    assert "t/0" in str(error) and "kafka-transactions.sh" in str(error)


# ---- end to end: librdkafka's transactions -----------------------------------------------------


def test_the_destination_holds_what_a_read_committed_consumer_reads_at_the_source(clusters):
    from confluent_kafka import Producer
    from librdkafka_reader import read_values

    src, dst, source, destination = clusters
    source.create_topics([NewTopic("t", 2)])
    producer = Producer({"bootstrap.servers": src.bootstrap, "transactional.id": "source-app", "linger.ms": 1,
                         "compression.type": "zstd"})
    producer.init_transactions(30)
    idempotent = Producer({"bootstrap.servers": src.bootstrap, "enable.idempotence": True, "linger.ms": 1})

    def transaction(name: str, records: int, commit: bool) -> None:
        producer.begin_transaction()
        for i in range(records):
            producer.produce("t", value=f"{name}-{i}".encode(), key=f"k{i % 5}".encode(), partition=i % 2)
            if i % 4 == 3:
                producer.flush(30)  # several batches per transaction and partition
                idempotent.produce("t", value=f"{name}-plain-{i}".encode(), partition=i % 2)  # in between
                idempotent.flush(30)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)

    transaction("a", 12, commit=True)
    transaction("b", 20, commit=False)
    transaction("c", 9, commit=True)
    transaction("d", 6, commit=False)
    transaction("e", 5, commit=True)
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "topics": "t", "partitioning": "preserve"})
    routes = sync_destination_topics(config, source, destination)
    ends = source.list_offsets([TopicPartition("t", p) for p in range(2)], "latest", isolation_level=READ_COMMITTED)
    assert ends == {TopicPartition("t", 0): 32, TopicPartition("t", 1): 42}  # records and markers
    mirror = IdempotentProducer(destination)
    try:
        # Two micro-batches split at the middle of each partition, which lies inside the aborted
        # transaction "b" (offsets 7-16 of 32, 10-25 of 42), and small fetches: aborted
        # transactions span several, and the second micro-batch's first fetch starts inside one.
        middle = {tp: end // 2 for tp, end in ends.items()}
        stats = [copy_ranges([CopyRequest(tp, 0, middle[tp]) for tp in ends], routes, source, mirror,
                             fetch_max_bytes=256),
                 copy_ranges([CopyRequest(tp, middle[tp], end) for tp, end in ends.items()], routes, source, mirror,
                             fetch_max_bytes=256)]
    finally:
        mirror.close()
    expected = read_values(src.bootstrap, "t", 2, isolation="read_committed")
    assert sum(map(len, expected.values())) == 12 + 9 + 5 + 12  # the committed transactions, every plain record
    assert read_values(dst.bootstrap, "t", 2, isolation="read_uncommitted") == expected
    aborted = sum(r.counters.by_class[RouteClass.ABORTED].records for task in stats for r in task.ranges)
    assert aborted == 20 + 6
