"""Transactions across a SIGKILL of the broker process: a committed transaction stays
committed, an open one stays open (the last stable offset holds readers at its start) until
a new producer with the same transactional.id aborts it."""

from __future__ import annotations

import pytest

from broker_helpers import TIMEOUT_S, create_topic, read_kafka_python, transactional_producer
from mirror.broker import BrokerProcess

pytestmark = pytest.mark.slow


def test_sigkill_keeps_committed_data_and_the_open_transaction(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "t", 2)
    producer = transactional_producer(broker.bootstrap, "survivor")
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
        committed, lso = read_kafka_python(again.bootstrap, "t", "read_committed", 2)
        uncommitted, leo = read_kafka_python(again.bootstrap, "t", "read_uncommitted", 2)
        assert committed == [b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
        assert uncommitted == committed + [b"orphan"]
        assert (lso[1], leo[1]) == (3, 4)  # 2 records + commit marker, then the open transaction's batch
        successor = transactional_producer(again.bootstrap, "survivor")  # fences the dead producer and aborts its transaction
        committed, lso = read_kafka_python(again.bootstrap, "t", "read_committed", 2)
        assert committed == [b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
        assert lso[1] == 5  # the abort marker decided the orphan
        successor.begin_transaction()
        successor.produce("t", value=b"after", partition=1)
        successor.commit_transaction(TIMEOUT_S)
    finally:
        again.kill()

    third = BrokerProcess(tmp_path / "data").start()
    try:
        committed, _ = read_kafka_python(third.bootstrap, "t", "read_committed", 2)
        assert committed == [b"after", b"kept-0", b"kept-1", b"kept-2", b"kept-3"]
    finally:
        assert third.terminate() == 0
