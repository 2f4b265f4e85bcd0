"""The copy engine without Spark: one range at a time between two embedded brokers, read back
with kafka-python's consumer (an independent decoder)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KTP

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.engine import (
    CopyRequest,
    CorruptSourceError,
    DataLossError,
    SourceTruncatedError,
    copy_ranges,
    sync_destination_topics,
)
from mirror.engine.copy import TAIL, CopyLoop
from mirror.kafka import IdempotentProducer, KafkaClient, NewTopic, TopicPartition
from mirror.routing import RouteClass

FETCH = 1024 * 1024


@pytest.fixture
def clusters(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
            yield src, dst, source, destination


def copy_range(request: CopyRequest, route, source: KafkaClient, destination: KafkaClient, **options):
    """One range, copied as a task copies its group, by a producer of its own."""
    producer = IdempotentProducer(destination)
    try:
        (stats,) = copy_ranges([request], {route.source_topic: route}, source, producer, **options).ranges
    finally:
        producer.close()
    return stats


def _config(src, dst, **extra):
    """The job's config, with every batch forwarded as it is: these tests build small batches to
    check the classes the decision table gives them (tests/engine/test_coalesce.py coalesces)."""
    return load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                              "topics": ".*", "coalesce_below_bytes": 0, **extra})


def _fill(client: KafkaClient, topic: str, batches: int, per_batch: int, *, partition: int = 0, keyed=False,
          codec="zstd") -> list[Record]:
    """``batches`` batches of ``per_batch`` records each, so offsets of batch i are [i*n, (i+1)*n)."""
    produced = []
    for b in range(batches):
        records = [Record(key=b"k%d" % (i % 7) if keyed else None, value=b"value-%d-%d" % (b, i), timestamp=1_700_000_000_000 + i)
                   for i in range(per_batch)]
        client.produce([(TopicPartition(topic, partition), kcodecs.build_batch(records, compression=codec))])
        produced += records
    return produced


def _consume(bootstrap: str, topic: str, partition: int = 0) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, consumer_timeout_ms=1500,
                             auto_offset_reset="earliest")
    consumer.assign([KTP(topic, partition)])
    records = list(consumer)
    consumer.close()
    return records


def test_ranges_split_mid_batch_copy_every_batch_exactly_once(clusters):
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("t", 1)])
    produced = _fill(source, "t", batches=3, per_batch=10)
    routes = sync_destination_topics(_config(src, dst), source, destination)
    tp = TopicPartition("t", 0)
    # 15 and 25 cut batches [10, 20) and [20, 30) in two: each goes whole with the range holding its last offset.
    stats = [copy_range(CopyRequest(tp, a, b), routes["t"], source, destination, fetch_max_bytes=FETCH)
             for a, b in ((0, 15), (15, 25), (25, 30))]
    assert [s.counters.total_records for s in stats] == [10, 10, 10]
    copied = _consume(dst.bootstrap, "t")
    assert [r.value for r in copied] == [r.value for r in produced]
    assert [r.offset for r in copied] == list(range(30))
    assert stats[-1].lag == 0 and stats[-1].high_watermark == 30


def test_no_keys_flag_batches_pass_through(clusters):
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("nk", 2)])
    _fill(source, "nk", batches=2, per_batch=5, partition=1, codec="lz4")
    routes = sync_destination_topics(_config(src, dst), source, destination)
    stats = copy_range(CopyRequest(TopicPartition("nk", 1), 0, 10), routes["nk"], source, destination,
                       fetch_max_bytes=FETCH)
    assert stats.counters.by_class[RouteClass.PASSED_THROUGH].batches == 2
    assert len(_consume(dst.bootstrap, "nk", 1)) == 10  # unkeyed: same partition number


def _log_file(broker_dir: Path, topic: str) -> Path:
    return broker_dir / f"{topic}-0" / ("0" * 20 + ".log")


def test_a_corrupt_source_batch_stops_the_copy_naming_partition_and_offset(clusters, tmp_path):
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("bad", 1)])
    produced = _fill(source, "bad", batches=3, per_batch=4, codec="none")
    routes = sync_destination_topics(_config(src, dst), source, destination)
    log = _log_file(tmp_path / "src", "bad")
    data = bytearray(log.read_bytes())
    second = kcodecs.read_batch(data).size  # the second batch starts right after the first
    data[second + 70] ^= 0xFF  # a byte of its records: only the CRC can tell
    log.write_bytes(data)
    with pytest.raises(CorruptSourceError) as caught:
        copy_range(CopyRequest(TopicPartition("bad", 0), 0, 12), routes["bad"], source, destination,
                   fetch_max_bytes=FETCH)
    assert caught.value.tp == TopicPartition("bad", 0) and caught.value.offset == 4
    assert "bad/0" in str(caught.value) and "CRC" in str(caught.value)
    # The copy stops at the corrupt batch: what may have reached the destination is the
    # batch before it, whole (routed and produced in an earlier slice), and nothing after.
    copied = [record.value for record in _consume(dst.bootstrap, "bad")]
    assert copied in ([], [record.value for record in produced[:4]])


@pytest.fixture
def pruned(clusters):
    """A source partition whose first segments retention already deleted."""
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("old", 1, configs={"segment.bytes": "300", "retention.bytes": "600"})])
    _fill(source, "old", batches=12, per_batch=2, codec="none")
    earliest = source.list_offsets([TopicPartition("old", 0)], "earliest")[TopicPartition("old", 0)]
    assert earliest > 0
    return src, dst, source, destination, earliest


def test_deleted_source_data_is_an_error_by_default(pruned):
    src, dst, source, destination, earliest = pruned
    routes = sync_destination_topics(_config(src, dst), source, destination)
    with pytest.raises(DataLossError) as caught:
        copy_range(CopyRequest(TopicPartition("old", 0), 0, 24), routes["old"], source, destination,
                   fetch_max_bytes=FETCH)
    assert (caught.value.offset, caught.value.earliest) == (0, earliest)
    assert _consume(dst.bootstrap, "old") == []


def test_skip_to_earliest_counts_what_was_lost_and_copies_the_rest(pruned):
    src, dst, source, destination, earliest = pruned
    routes = sync_destination_topics(_config(src, dst), source, destination)
    stats = copy_range(CopyRequest(TopicPartition("old", 0), 0, 24), routes["old"], source, destination,
                       fetch_max_bytes=FETCH, on_data_loss="skip-to-earliest")
    assert stats.lost_records == earliest
    assert len(_consume(dst.bootstrap, "old")) == 24 - earliest


def test_a_range_past_the_source_log_end_is_reported(clusters):
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("short", 1)])
    _fill(source, "short", batches=1, per_batch=3)
    routes = sync_destination_topics(_config(src, dst), source, destination)
    with pytest.raises((SourceTruncatedError, DataLossError)):
        copy_range(CopyRequest(TopicPartition("short", 0), 0, 10), routes["short"], source, destination,
                   fetch_max_bytes=FETCH)


def test_objects_alive_before_a_copy_are_frozen_for_it_and_thawed_after(clusters):
    """A copy keeps the garbage collector off the objects that were alive before it (a full
    collection would walk every one of them), and gives them back afterwards, also when it
    fails; a copy inside a freeze someone else holds leaves that freeze alone."""
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("gc", 1)])
    _fill(source, "gc", batches=2, per_batch=5)
    routes = sync_destination_topics(_config(src, dst), source, destination)
    request = CopyRequest(TopicPartition("gc", 0), 0, 10)
    before = [object()]  # a container: the collector tracks it
    seen: list[tuple[int, bool]] = []

    def copy_watched(enqueue):
        """The copy, its producer's every enqueue (mid-copy) seeing the collector's state, or failing."""
        producer = IdempotentProducer(destination)
        producer.enqueue = enqueue(producer.enqueue)
        try:
            copy_ranges([request], {"gc": routes["gc"]}, source, producer, fetch_max_bytes=FETCH)
        finally:
            producer.close()

    def watching(enqueue):
        def watched(*args):
            seen.append((gc.get_freeze_count(), any(obj is before for obj in gc.get_objects())))
            return enqueue(*args)
        return watched

    def failing(_enqueue):
        def fails(*args):
            raise RuntimeError("enqueue failed")
        return fails

    assert gc.get_freeze_count() == 0
    copy_watched(watching)
    assert seen and all(frozen > 0 and not visible for frozen, visible in seen), seen
    assert gc.get_freeze_count() == 0
    assert any(obj is before for obj in gc.get_objects())

    with pytest.raises(RuntimeError, match="enqueue failed"):
        copy_watched(failing)
    assert gc.get_freeze_count() == 0

    gc.freeze()
    try:
        copy_range(request, routes["gc"], source, destination, fetch_max_bytes=FETCH)
        assert gc.get_freeze_count() > 0, "the copy thawed a freeze it did not make"
    finally:
        gc.unfreeze()


def _tail(loop: CopyLoop, tp: TopicPartition, until: int) -> None:
    """Turn a tailing loop until ``tp`` is routed to ``until`` and all of it acknowledged."""
    turns = 0
    while loop.position(tp) < until or not loop.producer.idle:
        loop.turn(max_wait_s=0.05)
        turns += 1
        assert turns < 10_000, f"stuck at {loop.position(tp)} of {until}"


@pytest.mark.parametrize("under_backlog", [True, False])
def test_a_tailing_copy_merges_the_batches_that_queue_and_only_those(clusters, under_backlog):
    """A resident copier's loop follows the source's end with one request in flight, so the
    batches of a burst queue at the producer: from the second slice on they are merged (under
    a backlog), while the catch-up before, which always has a queue, went byte for byte. The
    destination's records, read by kafka-python, are the source's, in order, either way."""
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("t", 1)])
    tp = TopicPartition("t", 0)
    before = _fill(source, "t", batches=24, per_batch=10, codec="lz4")
    routes = sync_destination_topics(_config(src, dst, coalesce_under_backlog=under_backlog), source, destination)
    producer = IdempotentProducer(destination, max_in_flight=1)
    loop = CopyLoop(routes, source, producer, fetch_max_bytes=FETCH)
    try:
        loop.assign(CopyRequest(tp, 0, TAIL))
        _tail(loop, tp, 240)
        caught_up = loop.take_stats().ranges[0].counters
        assert caught_up.by_class[RouteClass.PASSED_THROUGH].batches == 24
        while not loop.caught_up:
            loop.turn(max_wait_s=0.05)
        burst = _fill(source, "t", batches=24, per_batch=10, codec="lz4")
        _tail(loop, tp, 480)
        following = loop.take_stats().ranges[0].counters
    finally:
        loop.close()
        producer.close()
    merged = following.by_class[RouteClass.COALESCED].batches
    passed = following.by_class[RouteClass.PASSED_THROUGH].batches
    if under_backlog:
        assert merged >= 8 and passed + merged == 24
    else:
        assert (merged, passed) == (0, 24)
    copied = _consume(dst.bootstrap, "t")
    assert [r.value for r in copied] == [r.value for r in before + burst]
    assert [r.timestamp for r in copied] == [r.timestamp for r in before + burst]


def test_durable_is_where_the_oldest_unacknowledged_batch_begins(clusters):
    """At-least-once, a resident copier answers a waiting task from :meth:`CopyLoop.durable`,
    with no flush: it must never run ahead of the destination's acknowledgements. Under
    ``by-key`` a source batch becomes one batch per destination partition, acknowledged
    separately: the source batch is durable once all of them are."""
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("t", 1)])
    destination.create_topics([NewTopic("t", 3)])  # by-key: keyed batches split three ways
    tp = TopicPartition("t", 0)
    produced = _fill(source, "t", batches=12, per_batch=20, keyed=True)
    routes = sync_destination_topics(_config(src, dst, partitioning="by-key"), source, destination)
    producer = IdempotentProducer(destination, max_in_flight=1)
    loop = CopyLoop(routes, source, producer, fetch_max_bytes=FETCH)
    seen_behind = False
    try:
        loop.assign(CopyRequest(tp, 0, TAIL))
        assert loop.durable(tp) == 0
        turns = 0
        while loop.position(tp) < 240 or not producer.idle:
            loop.turn(max_wait_s=0.05)
            durable, position = loop.durable(tp), loop.position(tp)
            assert durable <= position and durable % 20 == 0  # batch starts only
            if not producer.idle:
                # Something routed is unacknowledged, so not all of it is durable.
                assert durable < position
                seen_behind = True
            turns += 1
            assert turns < 10_000
        assert loop.durable(tp) == 240
    finally:
        loop.close()
        producer.close()
    assert seen_behind
    copied = sorted(r.value for p in range(3) for r in _consume(dst.bootstrap, "t", p))
    assert copied == sorted(r.value for r in produced)
