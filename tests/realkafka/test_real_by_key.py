"""Keyed topics repartitioned from 6 partitions to 4 between real Kafka clusters, one topic per
codec, librdkafka on both ends: its producer writes the source (CRC32 partitioner, so the keys
are not where murmur2 puts them), its consumer reads the destination, and its
``murmur2_random`` partitioner, which is Java's ``DefaultPartitioner``, says where each key
belongs. kmirror must place every key there, keep each key's order, and lose nothing.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from java_partitioner import java_partitions
from librdkafka_reader import read_values
from mirror.config import load_config

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
KEYS = 120
PER_CODEC = 3000


def _create(bootstrap: str, topics: dict[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    futures = admin.create_topics([NewTopic(name, partitions) for name, partitions in topics.items()])
    for future in futures.values():
        future.result(30)


def test_keyed_topics_of_every_codec_are_repartitioned_where_java_would_put_them(kafka_source, kafka_destination,
                                                                                  tmp_path):
    keys = [b"customer-%d" % k for k in range(KEYS)]
    _create(kafka_source.bootstrap, {f"bykey.{codec}": 6 for codec in CODECS})
    _create(kafka_destination.bootstrap, {f"bykey.{codec}": 4 for codec in CODECS})
    sent: dict[str, dict[bytes, list[bytes]]] = {}
    failed = []  # delivery reports with an error: the source would not hold what the test sent
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": kafka_source.bootstrap, "compression.type": codec,
                             "linger.ms": 20, "partitioner": "consistent_random", "enable.idempotence": True})
        sent[codec] = defaultdict(list)
        for i in range(PER_CODEC):
            key = keys[(i * 7) % KEYS]
            value = b"%s-%05d" % (codec.encode(), i)
            producer.produce(f"bykey.{codec}", key=key, value=value,
                             on_delivery=lambda error, message: error and failed.append((message.value(), error)))
            sent[codec][key].append(value)
        assert producer.flush(30) == 0
    assert not failed, f"the source refused records: {failed[:5]}"

    from mirror.spark.job import run_mirror

    config = load_config(None, {"source.bootstrap": kafka_source.bootstrap,
                                "destination.bootstrap": kafka_destination.bootstrap, "topics": r"bykey\..*",
                                "partitioning": "by-key", "once": True, "checkpoint": str(tmp_path / "ck")})
    totals = run_mirror(config)
    assert totals.counters.by_class["rebuilt"].records > 0

    java = java_partitions(kafka_destination.bootstrap, keys, 4)
    for codec in CODECS:
        at_source = read_values(kafka_source.bootstrap, f"bykey.{codec}", 6,
                                take=lambda m: (m.partition(), m.offset(), m.key(), m.value()))
        source_keys: dict[bytes, list[bytes]] = defaultdict(list)
        for records in at_source.values():
            for _, _, key, value in records:
                source_keys[key].append(value)
        assert source_keys == sent[codec], f"bykey.{codec}: the source does not hold what the test's producer sent"
        copied = read_values(kafka_destination.bootstrap, f"bykey.{codec}", 4, take=lambda m: (m.key(), m.value()))
        for partition, records in copied.items():
            misplaced = [key for key, _ in records if java[key] != partition]
            assert not misplaced, f"{codec}: {len(misplaced)} keys on partition {partition}, not Java's"
        by_key: dict[bytes, list[bytes]] = defaultdict(list)
        for records in copied.values():
            for key, value in records:
                by_key[key].append(value)
        if by_key != sent[codec]:
            copied_values = {value for values in by_key.values() for value in values}
            lost = [(p, o) for records in at_source.values() for p, o, _, v in records if v not in copied_values]
            raise AssertionError(f"bykey.{codec}: records lost, duplicated or reordered per key; "
                                 f"{len(lost)} source records not at the destination, the first (partition, offset) "
                                 f"of them: {lost[:10]}")
