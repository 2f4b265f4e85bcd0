"""The rows ``kmirror verify`` compares, proved against librdkafka: the same ranges of a topic
written by librdkafka (keys and none, headers and none, empty values, an aborted transaction
among committed records) read by kmirror's reader and by librdkafka's read_committed consumer
give the same identities at the same offsets, the same counts from batch headers alone, each
batch's producer id, and the same murmur2 partitions as Java's
partitioner would (tests/support/java_partitioner.py is the independent one there)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as CTP

from mirror.broker import EmbeddedBroker
from mirror.verify.rows import RangeReader, count_records, identity
from mirror.kafka import KafkaClient, NewTopic, TopicPartition


def _librdkafka_rows(bootstrap: str, topic: str, partition: int, start: int, end: int) -> list[tuple[bytes, int]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "enable.partition.eof": True})
    consumer.assign([CTP(topic, partition, start)])
    rows = []
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "librdkafka read nothing in 10 s"
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF
                break
            if message.offset() >= end:
                break
            rows.append((identity(message.key(), message.value(), message.headers() or [],
                                  message.timestamp()[1]), message.offset()))
    finally:
        consumer.close()
    return rows


def test_kmirrors_reader_and_librdkafka_see_the_same_records(tmp_path):
    with EmbeddedBroker(tmp_path / "b") as broker, KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic("t", 1)])
        plain = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "compression.type": "lz4"})
        for i in range(300):
            plain.produce("t", value=b"" if i % 17 == 0 else b"v%d" % i, key=None if i % 3 else b"k%d" % (i % 11),
                          partition=0, headers=[("h", b"%d" % i), ("n", None)] if i % 5 == 0 else None,
                          timestamp=1_700_000_000_000 + i)
        assert plain.flush(30) == 0
        aborted = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "t-aborted"})
        aborted.init_transactions(30)
        aborted.begin_transaction()
        for i in range(20):
            aborted.produce("t", value=b"aborted-%d" % i, partition=0)
        aborted.abort_transaction(30)
        for i in range(300, 320):
            plain.produce("t", value=b"v%d" % i, partition=0, timestamp=1_700_000_000_000 + i)
        assert plain.flush(30) == 0
        idempotent = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
        for i in range(320, 330):
            idempotent.produce("t", value=b"v%d" % i, partition=0, timestamp=1_700_000_000_000 + i)
        assert idempotent.flush(30) == 0
        end = client.list_offsets([TopicPartition("t", 0)], "latest")[TopicPartition("t", 0)]
        for start, stop in ((0, end), (7, 250), (290, end), (5, 5)):
            ours = [(row.identity, row.offset) for row in RangeReader(client, TopicPartition("t", 0), start, stop).rows()]
            theirs = _librdkafka_rows(broker.bootstrap, "t", 0, start, stop)
            assert ours == theirs
            # The header count (decoding only the batches an end cuts) agrees with librdkafka's.
            assert count_records(client, TopicPartition("t", 0), start, stop) == len(theirs)
        rows = list(RangeReader(client, TopicPartition("t", 0), 0, end).rows())
        assert len(rows) == 330
        # librdkafka without idempotence writes no producer id; with it, one the broker gave.
        assert {row.producer for row in rows[:320]} == {-1}
        (given,) = {row.producer for row in rows[320:]}
        assert given >= 0


@pytest.mark.parametrize("partitions", [1, 6])
def test_key_partitions_are_javas(tmp_path, partitions):
    from java_partitioner import java_partitions

    keys = [b"k%d" % i for i in range(40)]
    with EmbeddedBroker(tmp_path / "b") as broker, KafkaClient(broker.bootstrap) as client:
        client.create_topics([NewTopic("t", 1)])
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for key in keys:
            producer.produce("t", value=b"x", key=key, partition=0)
        assert producer.flush(30) == 0
        rows = list(RangeReader(client, TopicPartition("t", 0), 0, len(keys), key_partitions=partitions).rows())
        expected = java_partitions(broker.bootstrap, keys, partitions) if partitions > 1 else {k: 0 for k in keys}
    assert [row.key_partition for row in rows] == [expected[key] for key in keys]
