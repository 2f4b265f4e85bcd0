"""The broker as a process: ready line, clean SIGTERM shutdown, and SIGKILL mid-traffic.

After a SIGKILL during produce traffic the broker must come back serving every record it
acknowledged (acks=all), in order, and nothing corrupt: consumers with CRC checks read the
whole log.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition

from broker_helpers import create_topic
from mirror.broker import BrokerProcess

pytestmark = pytest.mark.slow


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=5_000, check_crcs=True)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    rows = [(m.offset, m.value) for m in consumer]
    consumer.close()
    return rows


def test_sigterm_shuts_down_cleanly_and_keeps_data(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    assert any("ready on 127.0.0.1:" in line for line in broker.log_lines)
    create_topic(broker.bootstrap, "t")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce("t", value=b"v%d" % i)
    assert producer.flush(30) == 0
    assert broker.terminate() == 0
    assert any("stopped" in line for line in broker.log_lines)
    again = BrokerProcess(tmp_path / "data").start()
    try:
        assert read_all(again.bootstrap, "t") == [(i, b"v%d" % i) for i in range(100)]
    finally:
        assert again.terminate() == 0


def test_sigkill_mid_traffic_loses_no_acknowledged_record(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    create_topic(broker.bootstrap, "crash")
    acked: dict[int, bytes] = {}
    stop = threading.Event()

    def on_delivery(err, msg) -> None:
        if err is None:
            acked[msg.offset()] = msg.value()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 1,
                             "compression.type": "lz4", "enable.idempotence": True,
                             "message.timeout.ms": 4000, "retries": 2})
        i = 0
        while not stop.is_set():
            try:
                producer.produce("crash", value=b"record-%08d-" % i + b"x" * (i % 300), on_delivery=on_delivery)
            except BufferError:  # librdkafka's local queue is full: serve deliveries, then send record i again
                producer.poll(0.05)
                continue
            producer.poll(0)
            i += 1
            if i % 200 == 0:
                time.sleep(0.001)
        producer.flush(10)

    thread = threading.Thread(target=produce)
    thread.start()
    deadline = time.monotonic() + 30
    while len(acked) < 3000 and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.kill()  # SIGKILL while the producer is still sending
    stop.set()
    thread.join(30)
    assert len(acked) >= 3000, "the producer never got going"

    again = BrokerProcess(tmp_path / "data").start()
    try:
        stored = dict(read_all(again.bootstrap, "crash"))
        missing = {offset: value for offset, value in acked.items() if stored.get(offset) != value}
        assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {sorted(missing)[:5]}"
        assert sorted(stored) == list(range(len(stored)))  # dense offsets, nothing corrupt in between
    finally:
        again.terminate()
