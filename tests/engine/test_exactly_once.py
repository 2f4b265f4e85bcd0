"""Exactly-once copying between two embedded brokers, without Spark: each task's records and its
source offsets commit in one destination transaction; replays skip what was committed; a zombie
attempt is fenced. Read back with librdkafka's read_committed consumer, an independent reader
of Kafka transactions."""

from __future__ import annotations

import json

import time

import pytest
from librdkafka_reader import read_values

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.config import load_config
from mirror.engine import (
    Committer,
    CommittedOffsets,
    CopyRequest,
    copy_exactly_once,
    offsets_topic,
    offsets_topic_spec,
    sync_destination_topics,
)
from mirror.engine.exactly_once import resume_requests
from mirror.engine.offsets_topic import Commit, OffsetsTopicError, decode_offsets, encode_offsets
from mirror.engine.topic_tail import TopicTailError
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.kafka.transactional_producer import TransactionalProducer
from mirror.kafka.client import READ_COMMITTED
from mirror.kafka.transactions import ProducerFencedError, TransactionError, TransactionManager

FETCH = 1024 * 1024
NOW_MS = int(time.time() * 1000)
"""Record timestamps: recent, or the destination's 7-day retention deletes their segment once a
transaction marker, stamped now, rolls it."""
JOB = "job1"


def test_resume_starts_each_range_at_its_committed_offset():
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
    requests = [CopyRequest(a, 10, 20), CopyRequest(b, 10, 20), CopyRequest(c, 5, 9)]
    todo, done = resume_requests(requests, {a: 10, b: 15, c: 9})
    assert todo == [CopyRequest(a, 10, 20), CopyRequest(b, 15, 20)]
    assert done == [CopyRequest(c, 5, 9)]
    # Nothing committed yet, or committed before the range: the range as planned.
    assert resume_requests(requests, {a: 3}) == (requests, [])


def test_offsets_records_decode_with_kafka_pythons_record_reader():
    from kafka.record import MemoryRecords

    orders_id = "1f0c7d2e-58a4-4f7e-9a55-2b7f3c6a9d10"
    data = encode_offsets({TopicPartition("orders", 3): 1234, TopicPartition("a.b", 0): 7}, now_ms=1_700_000_000_000,
                          topic_ids={"orders": orders_id})
    records = [r for batch in MemoryRecords(bytes(data)) for r in batch]
    assert [(r.key, json.loads(r.value)) for r in records] == [
        (b'{"partition": 0, "topic": "a.b"}', {"offset": 7}),
        (b'{"partition": 3, "topic": "orders"}', {"offset": 1234, "topic_id": orders_id})]
    ours = [decode_offsets(record) for batch in kcodecs.iter_batches(data) for record in batch.records()]
    assert ours == [(TopicPartition("a.b", 0), Commit(7, None)), (TopicPartition("orders", 3), Commit(1234, orders_id))]


def test_a_commit_of_another_topic_id_is_not_the_topics():
    """A topic deleted and made again under its name: the old topic's commit says nothing of it.
    A commit without an id (before kmirror kept them) is taken for any."""
    assert Commit(5, "old").of("old") and not Commit(5, "old").of("new")
    assert Commit(5, None).of("new") and Commit(5, "old").of(None)


def test_a_record_kmirror_did_not_write_is_a_named_error():
    with pytest.raises(OffsetsTopicError, match="not kmirror's"):
        decode_offsets(Record(key=b"junk", value=b"{}", offset=4))


@pytest.fixture
def clusters(tmp_path):
    with EmbeddedBroker(tmp_path / "src") as src, EmbeddedBroker(tmp_path / "dst") as dst:
        with KafkaClient(src.bootstrap) as source, KafkaClient(dst.bootstrap) as destination:
            yield src, dst, source, destination


def _filled(clusters):
    """Two partitions of 6 batches of 10 records at the source and the destination topics; their routes."""
    src, dst, source, destination = clusters
    source.create_topics([NewTopic("t", 2)])
    for partition in (0, 1):
        for b in range(6):
            records = [Record(key=None, value=b"p%d-b%d-r%d" % (partition, b, i), timestamp=NOW_MS + i)
                       for i in range(10)]
            source.produce([(TopicPartition("t", partition), kcodecs.build_batch(records, compression="lz4"))])
    # Every batch forwarded as it is (coalesce_below_bytes 0): the tests count produced batches.
    config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                "coalesce_below_bytes": 0,
                                "topics": "t"})
    return sync_destination_topics(config, source, destination)


@pytest.fixture
def mirror_setup(clusters):
    """:func:`_filled`, and the offsets topic as the driver creates it."""
    routes = _filled(clusters)
    clusters[3].create_topics([offsets_topic_spec(JOB)])
    return clusters, routes


def _producer(destination: KafkaClient, task: int = 0) -> TransactionalProducer:
    return TransactionalProducer(destination, f"{JOB}-{task}", transaction_timeout_ms=10_000)


def _offsets(destination: KafkaClient) -> CommittedOffsets:
    """A fresh view, as a new process (a replayed task on another worker) has."""
    return CommittedOffsets(destination, offsets_topic(JOB), max_wait_s=20)


def _read_committed(bootstrap: str, topic: str, partitions: int) -> dict[int, list[bytes]]:
    return read_values(bootstrap, topic, partitions)


def _copy(requests, routes, source, producer, destination):
    return copy_exactly_once(requests, routes, source, Committer(producer, offsets=_offsets(destination)),
                             fetch_max_bytes=FETCH)


def _expected(partition: int, start_batch: int = 0, end_batch: int = 6) -> list[bytes]:
    return [b"p%d-b%d-r%d" % (partition, b, i) for b in range(start_batch, end_batch) for i in range(10)]


def test_a_task_commits_its_records_and_offsets_together(mirror_setup):
    (src, dst, source, destination), routes = mirror_setup
    requests = [CopyRequest(TopicPartition("t", p), 0, 60) for p in (0, 1)]
    producer = _producer(destination)
    stats = _copy(requests, routes, source, producer, destination)
    assert sorted((r.tp.partition, r.start, r.end, r.already_committed) for r in stats.ranges) == [
        (0, 0, 60, False), (1, 0, 60, False)]
    assert _read_committed(dst.bootstrap, "t", 2) == {0: _expected(0), 1: _expected(1)}
    assert _offsets(destination).refresh() == {TopicPartition("t", 0): 60, TopicPartition("t", 1): 60}


def test_a_replayed_micro_batch_copies_only_what_was_not_committed(mirror_setup):
    (src, dst, source, destination), routes = mirror_setup
    first = _producer(destination)
    # The first micro-batch committed, then the process died before Spark checkpointed it.
    _copy([CopyRequest(TopicPartition("t", 0), 0, 30)], routes, source, first, destination)
    first.close()
    # The replay plans the same ranges (Spark's offset log), in a new process with a new producer.
    replay = [CopyRequest(TopicPartition("t", 0), 0, 30), CopyRequest(TopicPartition("t", 1), 0, 30)]
    stats = _copy(replay, routes, source, _producer(destination), destination)
    by_partition = {r.tp.partition: r for r in stats.ranges}
    assert by_partition[0].already_committed and by_partition[0].produced_batches == 0
    assert by_partition[1].produced_batches == 3
    # And the next micro-batch goes on from there.
    _copy([CopyRequest(TopicPartition("t", p), 30, 60) for p in (0, 1)], routes, source, _producer(destination),
          destination)
    assert _read_committed(dst.bootstrap, "t", 2) == {0: _expected(0), 1: _expected(1)}


def test_a_micro_batch_behind_what_the_destination_holds_neither_copies_nor_takes_the_offsets_back(mirror_setup):
    """A resident copier copied ahead of Spark's plan (to 60) and the job died; the replayed
    micro-batches plan [20, 40) and [40, 60) again. Both are done already, and the offsets
    stay at 60: writing the first one's end, 40, would make the second copy again."""
    (src, dst, source, destination), routes = mirror_setup
    ahead = _producer(destination, task=1)
    _copy([CopyRequest(TopicPartition("t", 0), 0, 60)], routes, source, ahead, destination)
    ahead.close()
    producer = _producer(destination)
    view = _offsets(destination)  # one worker's view, kept from one task to the next
    for start, end in ((20, 40), (40, 60)):
        stats = copy_exactly_once([CopyRequest(TopicPartition("t", 0), start, end)], routes, source,
                                  Committer(producer, offsets=view), fetch_max_bytes=FETCH)
        assert [r.already_committed for r in stats.ranges] == [True]
    assert _offsets(destination).refresh() == {TopicPartition("t", 0): 60}
    assert _read_committed(dst.bootstrap, "t", 2)[0] == _expected(0)


def test_an_attempt_that_died_before_committing_is_aborted_and_copied_again(mirror_setup):
    (src, dst, source, destination), routes = mirror_setup
    dead = _producer(destination)
    tp = TopicPartition("t", 0)
    # The attempt wrote batches (acknowledged, in its open transaction) and then died.
    fetched = source.fetch(tp, 0, max_bytes=FETCH)
    for batch in list(kcodecs.iter_batches(fetched.records))[:3]:
        dead.enqueue(TopicPartition("t", 0), bytearray(batch.raw), batch.record_count)
    dead.flush()
    # The next attempt takes the transactional id over: the open transaction is aborted.
    _copy([CopyRequest(tp, 0, 60)], routes, source, _producer(destination), destination)
    assert _read_committed(dst.bootstrap, "t", 2) == {0: _expected(0), 1: []}
    with pytest.raises(ProducerFencedError):
        dead.enqueue(TopicPartition("t", 0), bytearray(batch.raw), batch.record_count)
        dead.commit()


def test_offsets_committed_behind_an_open_transaction_are_waited_for(mirror_setup):
    (src, dst, source, destination), routes = mirror_setup
    offsets = TopicPartition(offsets_topic(JOB), 0)
    # Task 1 opens a transaction on the offsets topic and is slow to commit it; task 0 commits after it.
    slow, fast = _producer(destination, task=1), _producer(destination, task=0)
    slow.enqueue(offsets, encode_offsets({TopicPartition("t", 1): 5}, NOW_MS), 1)
    slow.flush()
    fast.enqueue(offsets, encode_offsets({TopicPartition("t", 0): 60}, NOW_MS), 1)
    fast.commit()
    # A reader must neither stop at task 1's open transaction (missing task 0's offsets) nor skip it.
    view = CommittedOffsets(destination, offsets_topic(JOB), max_wait_s=0.3)
    with pytest.raises(TopicTailError, match="open transactions"):
        view.refresh()
    slow.commit()
    assert view.refresh() == {TopicPartition("t", 0): 60, TopicPartition("t", 1): 5}


def test_a_transaction_the_destination_timed_out_cannot_commit(mirror_setup):
    (src, dst, source, destination), routes = mirror_setup
    producer = TransactionalProducer(destination, f"{JOB}-slow", transaction_timeout_ms=300)
    producer.enqueue(TopicPartition("t", 0), encode_offsets({TopicPartition("x", 0): 1}, NOW_MS), 1)
    producer.flush()
    # The destination aborts it once its timeout has passed, and bumps the epoch: the commit is refused.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and destination.list_offsets(
            [TopicPartition("t", 0)], "latest", isolation_level=READ_COMMITTED)[TopicPartition("t", 0)] == 0:
        time.sleep(0.1)
    with pytest.raises(ProducerFencedError):
        producer.commit()
    assert producer.failed is not None
    assert _read_committed(dst.bootstrap, "t", 2) == {0: [], 1: []}


def test_an_unknown_producer_id_is_a_named_transaction_error(mirror_setup):
    (src, dst, source, destination), routes = mirror_setup
    manager = TransactionManager(destination, f"{JOB}-never-initialised", timeout_ms=10_000)
    manager.producer_id, manager.epoch = 123456, 0
    with pytest.raises(TransactionError) as caught:
        manager.add_partitions([TopicPartition("t", 0)])
    assert caught.value.error_name and "never-initialised" in str(caught.value)


def test_one_producer_copies_micro_batch_after_micro_batch(mirror_setup):
    (src, dst, source, destination), routes = mirror_setup
    producer, offsets = _producer(destination), _offsets(destination)  # as a Python worker keeps them
    for start in (0, 20, 40):
        requests = [CopyRequest(TopicPartition("t", p), start, start + 20) for p in (0, 1)]
        copy_exactly_once(requests, routes, source, Committer(producer, offsets=offsets), fetch_max_bytes=FETCH)
    assert _read_committed(dst.bootstrap, "t", 2) == {0: _expected(0), 1: _expected(1)}
    assert offsets.refresh() == {TopicPartition("t", 0): 60, TopicPartition("t", 1): 60}


def test_the_offset_syncs_commit_in_the_same_transaction(mirror_setup):
    from mirror.engine import OffsetSyncStore, offset_syncs_topic, offset_syncs_topic_spec

    (src, dst, source, destination), routes = mirror_setup
    destination.create_topics([offset_syncs_topic_spec(JOB)])
    syncs_to = TopicPartition(offset_syncs_topic(JOB), 0)
    requests = [CopyRequest(TopicPartition("t", p), 0, 60) for p in (0, 1)]
    copy_exactly_once(requests, routes, source, Committer(_producer(destination), syncs_to, _offsets(destination)),
                      fetch_max_bytes=FETCH)
    store = OffsetSyncStore(destination, offset_syncs_topic(JOB))
    read = store.refresh()
    assert {entry.source.partition for entry in read} == {0, 1}
    assert store.refresh() == []  # only what is new since the previous read
    # A group that consumed 25 records of t/0 and none of t/1 resumes on the 26th and the 1st.
    translated = store.translate({TopicPartition("t", 0): 25, TopicPartition("t", 1): 0}, {})
    assert {tp.partition: (t.offset, t.precision.value) for tp, t in translated.items()} == {
        0: (25, "exact"), 1: (0, "exact")}


def test_replays_still_skip_committed_ranges_once_the_destination_compacted_the_offsets_topic(clusters):
    """A job that runs for weeks: its offsets topic gets compacted (holes, emptied producer
    batches, spent markers with delete horizons), and a new task process must still read
    every partition's committed offset from it."""
    src, dst, source, destination = clusters
    routes = _filled(clusters)
    small = NewTopic(offsets_topic(JOB), 1, configs={"cleanup.policy": "compact", "segment.bytes": "300",
                                                       "min.cleanable.dirty.ratio": "0.01"})
    destination.create_topics([small])
    for start in range(0, 60, 10):  # six micro-batches, two tasks each, one transaction per task
        for task, partition in enumerate((0, 1)):
            producer = _producer(destination, task)
            _copy([CopyRequest(TopicPartition("t", partition), start, start + 10)], routes, source, producer, destination)
            producer.close()
    cleaned = 0
    while (stats := dst.cleaner.clean_once()) is not None:
        cleaned += stats.records_read - stats.records_kept
    assert cleaned > 0
    assert _offsets(destination).refresh() == {TopicPartition("t", 0): 60, TopicPartition("t", 1): 60}
    # A replay of the last micro-batch, in a new process, finds it committed and copies nothing.
    replay = [CopyRequest(TopicPartition("t", p), 50, 60) for p in (0, 1)]
    stats = _copy(replay, routes, source, _producer(destination), destination)
    assert all(r.already_committed and r.produced_batches == 0 for r in stats.ranges)
    assert _read_committed(dst.bootstrap, "t", 2) == {0: _expected(0), 1: _expected(1)}


def test_replication_latency_counts_from_the_commit_that_makes_records_visible(mirror_setup, monkeypatch):
    """A read_committed consumer sees nothing before the commit: a commit held back half a second
    after every batch was acknowledged shows in every batch's latency, measured against the
    batches' own source timestamps (NOW_MS, from the test's clock)."""
    (src, dst, source, destination), routes = mirror_setup
    requests = [CopyRequest(TopicPartition("t", p), 0, 60) for p in (0, 1)]
    producer = _producer(destination)
    real_commit = producer.commit

    def slow_commit() -> None:
        time.sleep(0.5)
        real_commit()

    monkeypatch.setattr(producer, "commit", slow_commit)
    began = time.time()
    stats = _copy(requests, routes, source, producer, destination)
    newest_s = (NOW_MS + 9) / 1000
    assert stats.latency.count == 12  # every batch, once
    assert stats.latency.sum / stats.latency.count >= began + 0.5 - newest_s
    assert not stats.invisible.newest


def test_a_partitions_latest_offset_waits_only_for_an_open_transaction_that_wrote_it(mirror_setup):
    """A task or copier starting asks for its own partitions (:meth:`CommittedOffsets.latest`): a
    sibling's transaction left open holds up the partitions it wrote, and no others, and once
    it ends its outcome decides them (Kafka's read_committed answer for the same log)."""
    (src, dst, source, destination), routes = mirror_setup
    offsets = TopicPartition(offsets_topic(JOB), 0)
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    first = _producer(destination, task=0)
    first.enqueue(offsets, encode_offsets({t0: 10, t1: 3}, NOW_MS), 2)
    first.commit()
    slow, fast = _producer(destination, task=1), _producer(destination, task=2)
    slow.enqueue(offsets, encode_offsets({t1: 5}, NOW_MS), 1)
    slow.flush()  # open, below what follows
    fast.enqueue(offsets, encode_offsets({t0: 60}, NOW_MS), 1)
    fast.commit()
    view = CommittedOffsets(destination, offsets_topic(JOB), max_wait_s=0.3)
    assert view.latest([t0]) == {t0: 60}
    with pytest.raises(TopicTailError, match="open transactions"):
        view.latest([t1])
    again = _producer(destination, task=1)  # task 1's next attempt: its id's open transaction is aborted
    assert view.latest([t0, t1]) == {t0: 60, t1: 3}  # the aborted 5 never counts
    again.enqueue(offsets, encode_offsets({t1: 7}, NOW_MS), 1)
    again.commit()
    assert view.latest([t0, t1]) == {t0: 60, t1: 7}
    assert CommittedOffsets(destination, offsets_topic(JOB), max_wait_s=5).refresh() == {t0: 60, t1: 7}


def _made_again(src, source: KafkaClient, records: int) -> str:
    """Source topic ``t`` deleted and made again (2 partitions), ``records`` records in
    partition 0 of the new one; the new topic's id, as the broker gave it."""
    src.state.topics.delete("t")
    source.create_topics([NewTopic("t", 2)])
    source.produce([(TopicPartition("t", 0), kcodecs.build_batch(
        [Record(key=None, value=b"new-%d" % i, timestamp=NOW_MS + i) for i in range(records)]))])
    return str(src.state.topics.topics["t"].topic_id)


def test_a_topic_made_again_is_copied_from_its_start_though_the_old_one_committed_further(mirror_setup):
    """Issue 70: the old topic's commit (offset 60) says nothing of the new topic's offsets, which
    start again at 0. A task copying the new topic's first 10 records copies all 10, after the
    old topic's 60; it does not take them for committed."""
    (src, dst, source, destination), routes = mirror_setup
    tp = TopicPartition("t", 0)
    old_id = str(src.state.topics.topics["t"].topic_id)
    _copy([CopyRequest(tp, 0, 60, topic_id=old_id)], routes, source, _producer(destination), destination)
    new_id = _made_again(src, source, 10)
    stats = _copy([CopyRequest(tp, 0, 10, topic_id=new_id)], routes, source, _producer(destination), destination)
    assert [(r.start, r.end, r.already_committed) for r in stats.ranges] == [(0, 10, False)]
    assert _read_committed(dst.bootstrap, "t", 2)[0] == _expected(0) + [b"new-%d" % i for i in range(10)]
    assert _offsets(destination).latest({tp: (new_id, None)}) == {tp: 10}
    assert _offsets(destination).latest({tp: (old_id, None)}) == {}, "the new topic's commit is not the old one's"


def test_a_copy_whose_topic_is_made_again_under_it_stops_where_it_got(mirror_setup):
    """Planned in the old topic (its id), fetched after the topic was made again: the range stops
    at its start with nothing of the new topic copied, and commits only that far."""
    (src, dst, source, destination), routes = mirror_setup
    tp = TopicPartition("t", 0)
    old_id = str(src.state.topics.topics["t"].topic_id)
    _made_again(src, source, 10)
    stats = _copy([CopyRequest(tp, 20, 60, topic_id=old_id)], routes, source, _producer(destination), destination)
    assert [(r.start, r.end, r.gone) for r in stats.ranges] == [(20, 20, True)]
    assert _read_committed(dst.bootstrap, "t", 2)[0] == []
    assert _offsets(destination).latest({tp: (old_id, None)}) == {tp: 20}
