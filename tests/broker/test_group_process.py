"""Consumer groups across a SIGKILL of the broker process: committed offsets stay committed, a
stable group keeps its members (a consumer goes on in its generation once the broker is back
on the same port), offsets committed in a transaction stay committed, and those pending in an
open one stay invisible until the next producer with its transactional.id aborts it."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from mirror.broker import BrokerProcess

pytestmark = pytest.mark.slow

TIMEOUT_S = 60


def admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def committed(bootstrap: str, group: str) -> dict[int, tuple[int, str]]:
    client = admin(bootstrap)
    try:
        offsets = client.list_group_offsets({group: None})[group]
    finally:
        client.close()
    return {tp.partition: (o.offset, o.metadata) for tp, o in offsets.items()}


def read_committing(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < count:
        assert time.monotonic() < deadline, "the consumer stalled"
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            consumer.commit(message=message, asynchronous=False)
            values.append(message.value())
    return values


def test_sigkill_keeps_offsets_members_and_transactional_offsets(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    client = admin(broker.bootstrap)
    client.create_topics([NewTopic("t", 2, 1)])
    client.close()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for i in range(20):
        producer.produce("t", value=b"%d" % i, partition=i % 2)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "survivors", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 30_000})
    consumer.subscribe(["t"])
    before = read_committing(consumer, 8)
    offsets_before = committed(broker.bootstrap, "survivors")
    assert sum(offset for offset, _ in offsets_before.values()) == 8

    transactional = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="offsets-in-txn")
    transactional.init_transactions()
    transactional.begin_transaction()
    transactional.send_offsets_to_transaction({KTopicPartition("t", 0): OffsetAndMetadata(4, "done", -1)}, "txn-done")
    transactional.commit_transaction()
    transactional.begin_transaction()
    transactional.send_offsets_to_transaction({KTopicPartition("t", 1): OffsetAndMetadata(6, "open", -1)}, "txn-open")
    broker.kill()  # no shutdown at all: a member in its generation, a transaction open

    again = BrokerProcess(tmp_path / "data", port=broker.port).start()  # the consumer finds it where it was
    try:
        assert committed(again.bootstrap, "survivors") == offsets_before
        assert committed(again.bootstrap, "txn-done") == {0: (4, "done")}
        assert committed(again.bootstrap, "txn-open") == {}  # pending in the open transaction
        after = read_committing(consumer, 12)  # the same member, no rebalance needed
        assert sorted(int(v) for v in before + after) == list(range(20))
        client = admin(again.bootstrap)
        (described,) = client.describe_groups(["survivors"]).values()
        client.close()
        assert described["group_state"] == "Stable" and len(described["members"]) == 1
        consumer.close()

        successor = KafkaProducer(bootstrap_servers=again.bootstrap, transactional_id="offsets-in-txn")
        successor.init_transactions()  # fences the dead producer and aborts its transaction
        assert committed(again.bootstrap, "txn-open") == {}
        successor.close()
    finally:
        again.kill()
        transactional.close(timeout=0)

    third = BrokerProcess(tmp_path / "data").start()
    try:
        assert committed(third.bootstrap, "survivors") == {0: (10, ""), 1: (10, "")}
        assert committed(third.bootstrap, "txn-done") == {0: (4, "done")}
        assert committed(third.bootstrap, "txn-open") == {}
    finally:
        assert third.terminate() == 0
