"""Transactions across a SIGKILL of the broker process: a committed transaction stays
committed, an open one stays open (the last stable offset holds readers at its start) until
a new producer with the same transactional.id aborts it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from mirror.broker import BrokerProcess

pytestmark = pytest.mark.slow

TIMEOUT_S = 30


def create_topic(bootstrap: str, name: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, 2, 1)])
    finally:
        admin.close()


def transactional(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "survivor", "linger.ms": 5})
    producer.init_transactions(TIMEOUT_S)
    return producer


def read(bootstrap: str, topic: str, isolation: str) -> tuple[list[bytes], dict[int, int]]:
    """All values up to the readable end of both partitions, and those ends (ListOffsets latest)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level=isolation)
    tps = [TopicPartition(topic, p) for p in (0, 1)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    ends = consumer.end_offsets(tps)
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        assert time.monotonic() < deadline, "consumer stalled"
        for records in consumer.poll(timeout_ms=200).values():
            values += [record.value for record in records]
    consumer.close()
    return sorted(values), {tp.partition: end for tp, end in ends.items()}


def test_sigkill_keeps_committed_data_and_the_open_transaction(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "t")
    producer = transactional(broker.bootstrap)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("t", value=b"kept-%d" % i, partition=i % 2)
    producer.commit_transaction(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("t", value=b"orphan", partition=1)
    producer.flush(TIMEOUT_S)
    broker.kill()  # mid-transaction, no shutdown at all
    del producer

    again = BrokerProcess(tmp_path / "data").start()
    try:
        committed, lso = read(again.bootstrap, "t", "read_committed")
        uncommitted, leo = read(again.bootstrap, "t", "read_uncommitted")
        assert committed == [b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
        assert uncommitted == committed + [b"orphan"]
        assert (lso[1], leo[1]) == (3, 4)  # 2 records + commit marker, then the open transaction's batch
        successor = transactional(again.bootstrap)  # fences the dead producer and aborts its transaction
        committed, lso = read(again.bootstrap, "t", "read_committed")
        assert committed == [b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
        assert lso[1] == 5  # the abort marker decided the orphan
        successor.begin_transaction()
        successor.produce("t", value=b"after", partition=1)
        successor.commit_transaction(TIMEOUT_S)
    finally:
        again.kill()

    third = BrokerProcess(tmp_path / "data").start()
    try:
        committed, _ = read(third.bootstrap, "t", "read_committed")
        assert committed == [b"after", b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
    finally:
        assert third.terminate() == 0
