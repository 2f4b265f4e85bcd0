"""The bench's MirrorMaker 2 (issue 35): real MirrorMaker 2 between two real Kafka 4.4.0
brokers, configured as ``kmirror bench mirror`` configures it, must be the peer it claims to
be. librdkafka reads both sides: every record (key, value, headers, timestamp) on the same
partition number of a topic of the same name, in order, once; and nothing else on the
destination, no renamed topic, no heartbeats or checkpoints, only MirrorMaker's own internal
topics. A ``--cluster kafka`` bench run with a MirrorMaker 2 mode then goes end to end."""

from __future__ import annotations

import argparse
import re
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from librdkafka_reader import read_values

from mirror.bench import mirror_bench
from mirror.bench.mirror_bench import run_worker
from mirror.bench.mode_run import ModeRun
from mirror.config import FETCH_MAX_BYTES
from mirror.kafka import KafkaClient, TopicPartition

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.interop]

PARTITIONS = 4
T0 = int(time.time() * 1000) - 600_000
"""Ten minutes ago: older records would fall to retention (7 days) while the test runs."""
INTERNAL = re.compile(r"^(__consumer_offsets|__transaction_state|heartbeats|mm2-(offsets|configs|status)\.source[\w-]*\.internal)$")
"""What MirrorMaker 2 may leave on the destination besides the mirrored topic: Connect's own
topics (offsets, configs, status, named after the source alias), Kafka's, and the heartbeats
topic, which MirrorMaker's heartbeat connector creates even with heartbeats off (it must stay
empty)."""


def _take(message) -> tuple:
    return message.key(), message.value(), message.headers(), message.timestamp()[1]


@pytest.mark.parametrize("mode", ["mirrormaker2", "mirrormaker2-eos"])
def test_mirrormaker2_copies_every_record_to_its_own_name_and_partition(tmp_path, kafka_source, kafka_destination,
                                                                          mode):
    topic = f"mm2-{mode}"
    admins = [AdminClient({"bootstrap.servers": cluster.bootstrap}) for cluster in (kafka_source, kafka_destination)]
    for admin in admins:
        for future in admin.create_topics([NewTopic(topic, PARTITIONS)]).values():
            future.result(30)
    # The topic itself, whether or not the metadata shows it yet: Kafka's brokers may answer
    # Metadata without a topic a moment after CreateTopics answered (seen under --acceptance).
    before = set(admins[1].list_topics(timeout=30).topics) | {topic}
    producer = Producer({"bootstrap.servers": kafka_source.bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(2000):
        producer.produce(topic, value=b"value-%d" % i * 20, key=None if i % 3 else b"key-%d" % (i % 50),
                         partition=i % PARTITIONS, headers=[("n", b"%d" % i)] if i % 2 else None,
                         timestamp=T0 + i)
    assert producer.flush(30) == 0
    with KafkaClient(kafka_source.bootstrap) as client:
        ends = client.list_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)], "latest")
    run = ModeRun(mode, kafka_source.bootstrap, kafka_destination.bootstrap, topic, topic,
                  tuple(ends[TopicPartition(topic, p)] for p in range(PARTITIONS)), PARTITIONS, "lz4",
                  FETCH_MAX_BYTES, str(tmp_path / "work"))
    sample = run_worker(run)

    assert sample.wall_s > 0 and sample.cpu_s > 0 and sample.peak_rss_bytes > 0
    source = read_values(kafka_source.bootstrap, topic, PARTITIONS, take=_take)
    assert sum(len(records) for records in source.values()) == 2000
    assert read_values(kafka_destination.bootstrap, topic, PARTITIONS, take=_take) == source
    after = set(admins[1].list_topics(timeout=30).topics)
    extra = after - before
    assert all(INTERNAL.match(name) for name in extra), sorted(extra)
    if "heartbeats" in after:
        with KafkaClient(kafka_destination.bootstrap) as client:
            assert client.list_offsets([TopicPartition("heartbeats", 0)], "latest")[TopicPartition("heartbeats", 0)] == 0
    config = (tmp_path / "work" / "mm2.properties").read_text()
    assert "IdentityReplicationPolicy" in config and "emit.heartbeats.enabled = false" in config
    assert ("exactly.once.source.support = enabled" in config) == (mode == "mirrormaker2-eos")


def test_a_bench_run_on_real_kafka_with_mirrormaker2(capsys):
    """``kmirror bench mirror --cluster kafka`` starts its own two brokers, and each mode's copy is
    checked complete by the bench itself. Times are printed, never asserted."""
    parser = argparse.ArgumentParser()
    mirror_bench.add_arguments(parser)
    args = parser.parse_args(["--cluster", "kafka", "--codecs", "lz4", "--record-sizes", "1024", "--batch-kib", "16",
                              "--total-mb", "2", "--repeats", "1", "--modes", "pass-through,mirrormaker2-eos"])
    assert mirror_bench.run(args) == 0
    printed = capsys.readouterr().out
    assert "round 1/1  mirrormaker2-eos" in printed and "round 1/1  pass-through" in printed
