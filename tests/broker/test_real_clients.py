"""The embedded broker against unmodified clients: librdkafka (confluent-kafka) and kafka-python.

Each test produces with one library and consumes with the other, by assign(), so neither
client's view is checked against our own code. Offsets must come back 0..n-1, with every
key, value, header and timestamp intact, across a broker restart.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from broker_helpers import create_topic
from mirror.broker import EmbeddedBroker
from mirror.broker.log import SENDFILE_MIN_BYTES

pytestmark = pytest.mark.interop

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as running:
        yield running


def messages(n: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    out = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i % 5}".encode()
        # Null values only with a key: kafka-python refuses a record with neither.
        value = None if i % 7 == 5 and key is not None else (f"value-{i}-" * (1 + i % 13)).encode()
        headers = [("idx", str(i).encode()), ("empty", b"")] if i % 2 else []
        out.append((key, value, headers))
    return out


def produce_confluent(bootstrap: str, topic: str, codec: str, items, *, idempotent: bool = True) -> None:
    producer = Producer({
        "bootstrap.servers": bootstrap,
        "compression.type": codec,
        "enable.idempotence": idempotent,
        "linger.ms": 5,
        "acks": "all",
    })
    errors = []
    for i, (key, value, headers) in enumerate(items):
        producer.produce(topic, key=key, value=value, headers=headers or None, timestamp=BASE_TS + i,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    assert errors == []


def produce_kafka_python(bootstrap: str, topic: str, codec: str, items) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=None if codec == "none" else codec,
                             acks="all", linger_ms=5, enable_idempotence=True)
    futures = [producer.send(topic, key=k, value=v, headers=h, timestamp_ms=BASE_TS + i)
               for i, (k, v, h) in enumerate(items)]
    producer.flush(30)
    for future in futures:
        future.get(timeout=30)
    producer.close()


def consume_kafka_python(bootstrap: str, topic: str, n: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None,
                             consumer_timeout_ms=15_000)
    tp = KTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out = []
    for message in consumer:
        out.append((message.offset, message.timestamp, message.timestamp_type, message.key, message.value,
                    [(k, v) for k, v in message.headers]))
        if len(out) == n:
            break
    consumer.close()
    return out


def consume_confluent(bootstrap: str, topic: str, n: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.monotonic() + 30
    while len(out) < n and time.monotonic() < deadline:
        message = consumer.poll(1.0)
        if message is None:
            continue
        assert message.error() is None, message.error()
        ts_type, ts = message.timestamp()
        out.append((message.offset(), ts, ts_type - 1, message.key(), message.value(), list(message.headers() or [])))
    consumer.close()
    return out


def expected_rows(items, timestamps) -> list:
    return [(i, ts, key, value, headers) for i, ((key, value, headers), ts) in enumerate(zip(items, timestamps))]


PAIRS = {
    "librdkafka-to-kafka-python": (produce_confluent, consume_kafka_python),
    "kafka-python-to-librdkafka": (produce_kafka_python, consume_confluent),
}


@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("codec", CODECS)
def test_one_client_produces_the_other_consumes(broker, codec, pair):
    produce, consume = PAIRS[pair]
    topic = f"{pair}-{codec}"
    create_topic(broker.bootstrap, topic)
    items = messages(60)
    produce(broker.bootstrap, topic, codec, items)
    rows = consume(broker.bootstrap, topic, len(items))
    assert [(o, ts, k, v, h) for o, ts, _t, k, v, h in rows] == expected_rows(items, [BASE_TS + i for i in range(60)])
    assert all(r[2] == 0 for r in rows)  # CreateTime in both clients' terms (librdkafka's shifted by -1 above)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_log_append_time_topic_gets_broker_time(broker, codec):
    topic = f"lat-{codec}"
    create_topic(broker.bootstrap, topic, **{"message.timestamp.type": "LogAppendTime"})
    items = messages(25)
    before = int(time.time() * 1000)
    produce_confluent(broker.bootstrap, topic, codec, items)
    after = int(time.time() * 1000)
    rows = consume_kafka_python(broker.bootstrap, topic, len(items))
    assert [r[0] for r in rows] == list(range(25))
    assert all(r[2] == 1 for r in rows)  # kafka-python: timestamp_type 1 = LogAppendTime
    assert all(before <= r[1] <= after for r in rows)
    rd_rows = consume_confluent(broker.bootstrap, topic, len(items))
    assert [r[1] for r in rd_rows] == [r[1] for r in rows]


def test_restart_between_produce_and_consume(tmp_path):
    data = tmp_path / "data"
    items = messages(50)
    with EmbeddedBroker(data) as first:
        create_topic(first.bootstrap, "durable")
        produce_confluent(first.bootstrap, "durable", "lz4", items)
    with EmbeddedBroker(data) as second:
        rows = consume_kafka_python(second.bootstrap, "durable", len(items))
        assert [(o, ts, k, v, h) for o, ts, _t, k, v, h in rows] == expected_rows(items, [BASE_TS + i for i in range(50)])
        produce_confluent(second.bootstrap, "durable", "lz4", items[:5])
        rows = consume_confluent(second.bootstrap, "durable", len(items) + 5)
        assert [r[0] for r in rows] == list(range(55))


@pytest.mark.parametrize("codec", CODECS[1:])
def test_librdkafka_really_compresses_with_every_codec(broker, codec):
    # librdkafka quietly sends lz4 uncompressed to a broker whose ApiVersions lacks
    # FindCoordinator (its LZ4 feature probe), so look at the stored batches themselves.
    import kcodecs

    create_topic(broker.bootstrap, "squeezed")
    produce_confluent(broker.bootstrap, "squeezed", codec, [(None, b"compressible " * 50, [])] * 200)
    stored = broker.state.topics.partition("squeezed", 0).log.read(0, 1 << 20)
    codecs = {batch.compression.name.lower() for batch in kcodecs.iter_batches(stored) if batch.record_count > 1}
    assert codecs == {codec}


def test_large_fetches_go_out_from_the_file_and_every_client_reads_them(broker, monkeypatch):
    """Fetch answers of a MiB or so (what consumers ask for by default) carry their records as
    regions of the segment files, sent with sendfile: both clients read every record back."""
    from mirror.broker.log.file_records import FileRecords

    regions = []
    real_region = FileRecords.region
    monkeypatch.setattr(FileRecords, "region", lambda self, *args: regions.append(args) or real_region(self, *args))
    topic = "large-fetches"
    create_topic(broker.bootstrap, topic)
    items = [(None, (b"%05d-" % i) * 200, []) for i in range(3000)]  # 1.2 KB values, 3.6 MB in all
    produce_confluent(broker.bootstrap, topic, "none", items)
    expected = [(i, value) for i, (_, value, _h) in enumerate(items)]
    assert [(row[0], row[4]) for row in consume_confluent(broker.bootstrap, topic, len(items))] == expected
    assert [(row[0], row[4]) for row in consume_kafka_python(broker.bootstrap, topic, len(items))] == expected
    assert regions and all(size >= SENDFILE_MIN_BYTES for _, size in regions)
