"""Kafka's own transaction coordinator takes kmirror's transactions under the transaction
protocol each broker offers: transactions v2 on Kafka 4.x (KIP-890: EndTxn v5 bumps the
producer's epoch at every commit, and the next transaction must use the new one), v1 on 3.9.
One :class:`TransactionalProducer` commits several transactions in a row, as a copy task that
commits more than once does; librdkafka's read_committed consumer reads every record once.
Under v2 it sends no AddPartitionsToTxn: Produce v12 adds the partitions, as the finalized
``transaction.version`` (ApiVersions) lets it.
"""

from __future__ import annotations

import pytest

import kcodecs
from kcodecs import Record
from librdkafka_reader import read_values
from mirror.kafka import KafkaClient, NewTopic, TopicPartition
from mirror.kafka.transactional_producer import TransactionalProducer
from mirror.kafka.transactions import TransactionManager

pytestmark = pytest.mark.slow

TRANSACTIONS = 4


def test_one_producer_commits_transaction_after_transaction(start_kafka, kafka_version, monkeypatch):
    cluster = start_kafka(distribution=kafka_version)
    adds = []
    sent = TransactionManager.add_partitions
    monkeypatch.setattr(TransactionManager, "add_partitions", lambda self, tps: (adds.append(set(tps)), sent(self, tps)))
    try:
        with KafkaClient(cluster.bootstrap) as client:
            client.create_topics([NewTopic("v2", 2)])
            producer = TransactionalProducer(client, "v2-task")
            implicit = producer.implicit_partitions
            epochs = [producer.epoch]
            for t in range(TRANSACTIONS):
                for p in range(2):
                    batch = kcodecs.build_batch([Record(value=b"t%d-p%d-%d" % (t, p, i)) for i in range(5)],
                                                compression="lz4")
                    producer.enqueue(TopicPartition("v2", p), bytearray(batch), 5)
                producer.commit()
                epochs.append(producer.epoch)
        copied = read_values(cluster.bootstrap, "v2", 2)
    finally:
        cluster.stop()
    assert copied == {p: [b"t%d-p%d-%d" % (t, p, i) for t in range(TRANSACTIONS) for i in range(5)] for p in range(2)}
    if kafka_version.version.startswith("4."):
        # Transactions v2: a new epoch after every commit (same producer id, far from overflow),
        # and Produce v12 adds the partitions: no AddPartitionsToTxn was sent.
        assert epochs == list(range(epochs[0], epochs[0] + TRANSACTIONS + 1))
        assert implicit and adds == []
    else:
        assert epochs == [epochs[0]] * (TRANSACTIONS + 1)
        assert not implicit and len(adds) == 2 * TRANSACTIONS  # a partition at a time, as batches come


def test_a_sealed_transaction_ends_while_the_next_ones_batches_wait(start_kafka, kafka_version):
    """A copy that runs on seals its transaction and goes on routing into the next while EndTxn
    is in flight (issue 62): the next transaction's batches wait unstamped and go out once the
    coordinator has answered, under the epoch it named (v2: a batch stamped with the old one
    would be refused as fenced). read_committed never sees a transaction before its end."""
    cluster = start_kafka(distribution=kafka_version)

    def batch(t: int, p: int) -> bytearray:
        return bytearray(kcodecs.build_batch([Record(value=b"t%d-p%d-%d" % (t, p, i)) for i in range(5)],
                                             compression="lz4"))

    def committed_through(t: int) -> dict[int, list[bytes]]:
        return {p: [b"t%d-p%d-%d" % (u, p, i) for u in range(t + 1) for i in range(5)] for p in range(2)}

    try:
        with KafkaClient(cluster.bootstrap) as client:
            client.create_topics([NewTopic("sealed", 2)])
            producer = TransactionalProducer(client, "sealed-task")
            for p in range(2):
                producer.enqueue(TopicPartition("sealed", p), batch(0, p), 5)
            for t in range(1, TRANSACTIONS):
                producer.seal()
                for p in range(2):  # routed while the sealed one ends
                    producer.enqueue(TopicPartition("sealed", p), batch(t, p), 5)
                assert not producer.idle
                ended = []
                while not ended:
                    producer.poll(0.05)
                    ended = producer.take_ended()
                (began, at), = ended
                assert began <= at
                # Markers follow EndTxn's answer: read until they are written, never past them.
                for _ in range(50):
                    seen = read_values(cluster.bootstrap, "sealed", 2)
                    assert not any(b"t%d-" % t in value for values in seen.values() for value in values), seen
                    if seen == committed_through(t - 1):
                        break
                assert seen == committed_through(t - 1)
            producer.commit()
            assert producer.idle
        copied = read_values(cluster.bootstrap, "sealed", 2)
    finally:
        cluster.stop()
    assert copied == committed_through(TRANSACTIONS - 1)


def test_a_partitions_latest_offset_is_decided_as_kafkas_read_committed_decides_it(kafka_destination):
    """kmirror's start reads its own partitions' offsets read_uncommitted and decides each
    transaction by its marker (:func:`mirror.engine.topic_tail.latest_by_key`), so that a
    sibling's transaction left open does not hold it up. On Kafka's log, with Kafka's markers,
    the answer must be Kafka's: an aborted write never counts, an open one holds up only its
    own keys, and once all are ended it equals what Kafka's read_committed fetch gives."""
    from mirror.engine.offsets_topic import CommittedOffsets, encode_offsets, offsets_topic, offsets_topic_spec
    from mirror.engine.topic_tail import TopicTailError

    job = "latest-decided"
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    with KafkaClient(kafka_destination.bootstrap) as client:
        client.create_topics([offsets_topic_spec(job)])
        offsets = TopicPartition(offsets_topic(job), 0)

        def producer(task: int) -> TransactionalProducer:
            return TransactionalProducer(client, f"{job}-{task}", transaction_timeout_ms=60_000)

        first = producer(0)
        first.enqueue(offsets, encode_offsets({t0: 10, t1: 3}, 0), 2)
        first.commit()
        slow, fast = producer(1), producer(2)
        slow.enqueue(offsets, encode_offsets({t1: 5}, 0), 1)
        slow.flush()  # open, below what follows
        fast.enqueue(offsets, encode_offsets({t0: 60}, 0), 1)
        fast.commit()
        view = CommittedOffsets(client, offsets_topic(job), max_wait_s=0.5)
        assert view.latest([t0]) == {t0: 60}
        with pytest.raises(TopicTailError, match="open transactions"):
            view.latest([t1])
        again = producer(1)  # the next attempt of task 1: Kafka aborts the open transaction
        assert view.latest([t0, t1]) == {t0: 60, t1: 3}
        again.enqueue(offsets, encode_offsets({t1: 7}, 0), 1)
        again.commit()
        decided = view.latest([t0, t1])
        committed = CommittedOffsets(client, offsets_topic(job), max_wait_s=30).refresh()  # Kafka's read_committed
    assert decided == committed == {t0: 60, t1: 7}


def test_a_commit_of_a_whole_clusters_partitions_is_within_kafkas_batch_limit(kafka_destination):
    """A copy task commits a position per partition it copies, with both topics' ids, and the
    syncs of each: 20,000 partitions on three tasks put 6,700 in one commit, over Kafka's
    message.max.bytes (1 MiB) in one batch (MESSAGE_SIZE_TOO_LARGE, found by the whole-cluster
    test at its acceptance size). 20,000 in one commit, and their syncs, must pass, and Kafka's
    read_committed reading must give every one back."""
    from mirror.engine.commit import Committer
    from mirror.engine.offset_syncs import SyncLog, offset_syncs_topic, offset_syncs_topic_spec
    from mirror.engine.offsets_topic import CommittedOffsets, offsets_topic, offsets_topic_spec

    job = "whole-commit"
    positions = {TopicPartition(f"whole.{t:05d}", p): 1_000 + p for t in range(2_000) for p in range(10)}
    syncs = SyncLog()
    for tp, offset in positions.items():
        syncs.add(tp, 0, offset - 1, tp, 0, offset, True)
    ids = {tp.topic: "1b2c3d4e-0000-4000-8000-00000000000" + str(tp.partition) for tp in positions}
    with KafkaClient(kafka_destination.bootstrap) as client:
        client.create_topics([offsets_topic_spec(job), offset_syncs_topic_spec(job)])
        offsets = CommittedOffsets(client, offsets_topic(job), max_wait_s=30)
        producer = TransactionalProducer(client, f"{job}-0", transaction_timeout_ms=60_000)
        committer = Committer(producer, TopicPartition(offset_syncs_topic(job), 0), offsets, dict(ids), dict(ids))
        committer.commit(positions, syncs)
        committed = CommittedOffsets(client, offsets_topic(job), max_wait_s=30).refresh()  # Kafka's read_committed
    assert committed == positions
    synced = read_values(kafka_destination.bootstrap, offset_syncs_topic(job), 1)[0]
    assert len(synced) == len(positions)
