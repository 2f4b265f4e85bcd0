"""The job leaves destination topics the user made as they are, and keeps the ones it made
shaped like their source (issue 47), on the embedded broker and on real Kafka 4.x.

- ``smaller``: source 6 partitions, destination made by the user with 4 and its own
  ``retention.ms``. Under ``auto``: routed by key, still 4 partitions, retention kept; synced
  only by a later run with ``sync_existing_topics``. (The issue's case: ``auto`` grew it to 6.)
- ``larger``: source 4, destination made with 6: by key, still 6.
- ``grown``: created by kmirror from a 4-partition source, which grows to 6 while the job is
  stopped: the next run adds the 2 partitions and copies every record to its source partition.
  (Growth while the job runs: tests/spark/test_destination_shape.py.)

Keyed records are written by librdkafka with its CRC32 partitioner, so no key starts where
murmur2 puts it. Where each key belongs is asked of librdkafka's Java-compatible partitioner
(tests/support/java_partitioner.py); what the destination holds is read with librdkafka's
read_committed consumer and its admin client: nothing here is judged by kmirror's code.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
from java_partitioner import java_partitions
from librdkafka_reader import read_values
from real_kafka import pairs

from mirror.config import load_config

pytestmark = pytest.mark.slow

KEYS = [b"customer-%d" % k for k in range(60)]
DAY_MS, HOUR_MS = "86400000", "3600000"


def _create(admin: AdminClient, topics: dict[str, int], **configs: str) -> None:
    futures = admin.create_topics([NewTopic(name, partitions, config=configs) for name, partitions in topics.items()])
    for future in futures.values():
        future.result(30)


def _partitions(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _retention(admin: AdminClient, topic: str) -> str:
    (future,) = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)]).values()
    return future.result(10)["retention.ms"].value


def _write(bootstrap: str, topics: list[str], start: int, count: int) -> None:
    """``count`` keyed zstd records per topic, values unique per topic, by the CRC32 partitioner."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 20,
                         "partitioner": "consistent_random"})
    for topic in topics:
        for i in range(start, start + count):
            producer.produce(topic, key=KEYS[(i * 7) % len(KEYS)], value=b"%s-%05d" % (topic.encode(), i))
    assert producer.flush(30) == 0


def _assert_by_key(src: str, dst: str, topic: str, source_partitions: int, destination_partitions: int) -> None:
    """Every key on Java's partition for the destination's count, each key's records in order, none lost."""
    java = java_partitions(dst, KEYS, destination_partitions)
    copied = read_values(dst, topic, destination_partitions, take=lambda m: (m.key(), m.value()))
    per_key: dict[bytes, list[bytes]] = defaultdict(list)
    for partition, records in copied.items():
        misplaced = [key for key, _ in records if java[key] != partition]
        assert not misplaced, f"{topic}: {len(misplaced)} records on partition {partition}, not Java's"
        for key, value in records:
            per_key[key].append(value)
    sent: dict[bytes, list[bytes]] = defaultdict(list)
    for records in read_values(src, topic, source_partitions, take=lambda m: (m.key(), m.value())).values():
        for key, value in records:
            sent[key].append(value)
    assert {k: sorted(v) for k, v in per_key.items()} == {k: sorted(v) for k, v in sent.items()}, \
        f"{topic}: records lost or duplicated"
    for key, values in per_key.items():  # one source partition per key, and values rise with i there
        assert values == sorted(values), f"{topic}: {key!r} out of order"


@pytest.mark.parametrize("clusters", pairs("embedded", "kafka"), indirect=True)
def test_found_topics_keep_their_shape_and_created_ones_follow_their_source(tmp_path, clusters):
    from mirror.spark.job import run_mirror

    src, dst = clusters.source.bootstrap, clusters.destination.bootstrap
    source_admin, destination_admin = AdminClient({"bootstrap.servers": src}), AdminClient({"bootstrap.servers": dst})
    _create(source_admin, {"smaller": 6, "larger": 4, "grown": 4}, **{"retention.ms": DAY_MS})
    _create(destination_admin, {"smaller": 4}, **{"retention.ms": HOUR_MS})
    _create(destination_admin, {"larger": 6})
    _write(src, ["smaller", "larger", "grown"], 0, 2000)
    common = {"source.bootstrap": src, "destination.bootstrap": dst, "topics": "smaller|larger|grown", "once": True,
              "checkpoint": str(tmp_path / "ck")}

    run_mirror(load_config(None, common))
    _assert_by_key(src, dst, "smaller", 6, 4)
    _assert_by_key(src, dst, "larger", 4, 6)
    assert (_partitions(destination_admin, "smaller"), _partitions(destination_admin, "larger")) == (4, 6)
    assert _retention(destination_admin, "smaller") == HOUR_MS  # the user's, not the source's
    assert _retention(destination_admin, "grown") == DAY_MS  # created with the source's configs
    assert read_values(dst, "grown", 4) == read_values(src, "grown", 4)

    # The source grows while no job runs; the next run (same checkpoint) follows it where kmirror
    # created the topic, and is asked to sync the configs of the topics it found.
    for future in source_admin.create_partitions([NewPartitions("grown", 6), NewPartitions("smaller", 8)]).values():
        future.result(10)
    _write(src, ["smaller", "grown"], 2000, 2000)
    run_mirror(load_config(None, {**common, "sync_existing_topics": True}))
    assert _partitions(destination_admin, "grown") == 6
    copied, source = read_values(dst, "grown", 6), read_values(src, "grown", 6)
    assert copied == source and source[4] and source[5], "grown: not every record on its source partition"
    assert _partitions(destination_admin, "smaller") == 4
    _assert_by_key(src, dst, "smaller", 8, 4)
    assert _retention(destination_admin, "smaller") == DAY_MS
