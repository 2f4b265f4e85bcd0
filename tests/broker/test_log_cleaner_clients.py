"""Compaction as clients see it: librdkafka writes keyed updates and tombstones (idempotently,
so the cleaner leaves empty producer headers behind), the broker's cleaner compacts, and
librdkafka and kafka-python read the cleaned log: in the cleaned section only each key's last
record, at its original offset, and no tombstone once delete.retention.ms has passed."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaConsumer, TopicPartition
from librdkafka_reader import read_values

from mirror.broker.cleaner import CleanerConfig
from mirror.broker.cleaner.checkpoint import CHECKPOINT_FILE
from mirror.broker.embedded import EmbeddedBroker

from broker_helpers import TIMEOUT_S, ShiftedClock, create_topic, wait_for

pytestmark = pytest.mark.interop

TOPIC = "profiles"


def write(bootstrap: str, records: list[tuple[bytes, bytes | None]]) -> list[tuple[int, bytes, bytes | None]]:
    """Produce with an idempotent librdkafka producer; return ``(offset, key, value)`` as acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
                         "batch.num.messages": 7, "compression.type": "lz4"})
    acked: list[tuple[int, bytes, bytes | None]] = []

    def delivered(err, message) -> None:
        assert err is None, err
        acked.append((message.offset(), message.key(), message.value()))

    for key, value in records:
        producer.produce(TOPIC, value=value, key=key, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    return sorted(acked)


def read_librdkafka(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    return read_values(bootstrap, TOPIC, 1, isolation="read_uncommitted",
                       take=lambda m: (m.offset(), m.key(), m.value()))[0]


def read_kafka_python(bootstrap: str, end: int) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = []
    deadline = time.monotonic() + TIMEOUT_S
    while consumer.position(tp) < end:
        assert time.monotonic() < deadline, "kafka-python did not reach the end"
        for records in consumer.poll(timeout_ms=200).values():
            out += [(r.offset, r.key, r.value) for r in records]
    consumer.close()
    return out


def model(written, end: int, *, tombstones: bool):
    """What compaction must leave: below ``end``, each key's last record (a tombstone only if
    ``tombstones``); from ``end`` on, everything."""
    last = {key: offset for offset, key, _ in written if offset < end}
    return [(o, k, v) for o, k, v in written if o >= end or (last[k] == o and (tombstones or v is not None))]


def test_librdkafka_and_kafka_python_read_a_compacted_log(tmp_path):
    clock = ShiftedClock()
    with EmbeddedBroker(tmp_path, clock=clock, cleaner=CleanerConfig(enable=False)) as broker:
        create_topic(broker.bootstrap, TOPIC, 1, **{"cleanup.policy": "compact", "segment.bytes": "4096",
                                                    "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "60000"})
        updates = [(b"user-%d" % (i % 40), b"profile %d " % i + bytes(30)) for i in range(600)]
        updates += [(b"user-%d" % i, None) for i in range(0, 40, 4)]  # ten deletions
        updates += [(b"other-%d" % i, bytes(50)) for i in range(150)]  # keeps the tombstones out of the active segment
        written = write(broker.bootstrap, updates)
        stats = broker.cleaner.clean_once()
        assert stats is not None
        end = stats.end_offset
        assert end == broker.state.topics.partition(TOPIC, 0).log.active_base_offset
        expected = model(written, end, tombstones=True)
        assert sum(v is None for _, _, v in expected) == 10
        assert read_librdkafka(broker.bootstrap) == expected
        assert read_kafka_python(broker.bootstrap, written[-1][0] + 1) == expected

        clock.offset_ms += 61_000  # past the tombstones' delete horizon
        written += write(broker.bootstrap, [(b"other-%d" % i, bytes(50)) for i in range(150)])
        stats = broker.cleaner.clean_once()
        assert stats.tombstones_removed == 10
        expected = model(written, stats.end_offset, tombstones=False)
        assert read_librdkafka(broker.bootstrap) == expected
        assert read_kafka_python(broker.bootstrap, written[-1][0] + 1) == expected


def test_the_cleaner_thread_compacts_by_itself_and_producers_carry_on_after_a_restart(tmp_path):
    config = dict(cleaner=CleanerConfig(backoff_ms=50))
    broker = EmbeddedBroker(tmp_path, **config).start()
    try:
        create_topic(broker.bootstrap, TOPIC, 1, **{"cleanup.policy": "compact", "segment.bytes": "2048",
                                                    "min.cleanable.dirty.ratio": "0.01"})
        written = write(broker.bootstrap, [(b"k%d" % (i % 5), b"v%d" % i + bytes(40)) for i in range(400)])
        checkpoint = tmp_path / CHECKPOINT_FILE
        active = broker.state.topics.partition(TOPIC, 0).log.active_base_offset
        wait_for(lambda: checkpoint.exists() and checkpoint.read_text().split()[-1] == str(active),
                 "the cleaner thread to clean up to the active segment")
        assert read_librdkafka(broker.bootstrap) == model(written, active, tombstones=True)
    finally:
        broker.stop()
    # The producer state rebuilt from the cleaned log still lets an idempotent producer append.
    with EmbeddedBroker(tmp_path, port=broker.port, **config) as restarted:
        more = write(restarted.bootstrap, [(b"k%d" % i, b"after restart") for i in range(5)])
        assert [o for o, _, _ in more] == list(range(written[-1][0] + 1, written[-1][0] + 6))
        # A record without a key is refused, as Kafka refuses it on a compacted topic.
        producer = Producer({"bootstrap.servers": restarted.bootstrap, "message.send.max.retries": 0})
        outcomes = []
        producer.produce(TOPIC, value=b"no key", on_delivery=lambda err, msg: outcomes.append(err))
        producer.flush(TIMEOUT_S)
        assert [err.code() if err else None for err in outcomes] == [KafkaError.INVALID_RECORD]
