"""``kmirror demo``'s four topics (pass-through, inspect, rebuild, LogAppendTime) and its consumer
group, mirrored with Spark between real Kafka clusters: Kafka 4.x to 4.x, 3.9 to 3.9, and
across kinds, the embedded broker to real Kafka and back.

The demo's own verifier reads both sides with kafka-python (content, murmur2 placement, per-key
order, byte-identical passed-through batches, LogAppendTime stamped by the destination broker,
the group resumed exactly). librdkafka then reads both sides once more: every topic's records,
per source partition, equal at the destination.
"""

from __future__ import annotations

from collections import Counter

import pytest

from librdkafka_reader import read_values
from mirror.broker import EmbeddedBroker
from mirror.demo.cli import Demo
from mirror.demo.fill import DEMO_TOPICS
from mirror.realkafka import KAFKA_3, KAFKA_4, KafkaCluster

pytestmark = [pytest.mark.slow, pytest.mark.interop]

RECORDS = 1500  # per topic


def _records(bootstrap: str, topic: str, partitions: int) -> Counter:
    """Every (key, value) of the topic as librdkafka reads it, with how often."""
    by_partition = read_values(bootstrap, topic, partitions, take=lambda m: (m.key(), m.value()))
    return Counter(record for records in by_partition.values() for record in records)


@pytest.mark.parametrize(("source_kind", "destination_kind"), [
    ("kafka-4", "kafka-4"), ("kafka-3.9", "kafka-3.9"), ("embedded", "kafka-4"), ("kafka-4", "embedded"),
])
def test_the_demo_passes_with_real_kafka_on_either_side(tmp_path, kafka_jars, source_kind, destination_kind):
    def cluster(kind: str, name: str):
        if kind == "embedded":
            return EmbeddedBroker(tmp_path / name)
        distribution = KAFKA_4 if kind == "kafka-4" else KAFKA_3
        kafka_jars(distribution)  # skip (or fail under CI) here if real Kafka cannot run
        return KafkaCluster(tmp_path / name, distribution=distribution)

    with Demo(tmp_path / "demo", say=lambda line: None, source=cluster(source_kind, "src"),
              destination=cluster(destination_kind, "dst")) as demo:
        demo.fill(RECORDS)
        demo.consume_part_at_source()
        run = demo.mirror()
        verification = demo.verify(run)
        assert verification.ok, verification.report()
        assert run.totals.counters.total_records == RECORDS * len(DEMO_TOPICS)
        for topic in DEMO_TOPICS:
            partitions = topic.destination_partitions or topic.partitions
            assert _records(demo.destination.bootstrap, topic.name, partitions) == \
                _records(demo.source.bootstrap, topic.name, topic.partitions), topic.name
