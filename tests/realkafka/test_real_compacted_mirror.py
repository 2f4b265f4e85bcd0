"""Issue 34: a source topic that real Kafka 4.x's own log cleaner compacted, mirrored to real Kafka.

The cleaner leaves batches with offset holes, batches emptied of every record (kept for their
producer state), and delete horizons on batches with tombstones (KIP-534). The test writes
updates and deletions of a few dozen keys in bursts a little longer apart than ``segment.ms``,
so that each burst lands in a segment of its own (a segment rolls when a batch's timestamp is
``segment.ms`` past the segment's first), and waits, bounded, until librdkafka reads fewer
records than were written, with offset holes: the cleaner really ran. The mirror then creates
the destination topic compacted like the source and copies it; every key has the same last
value at the destination as librdkafka reads at the source, a tombstone counting as no value
(the cleaner removes a tombstone once ``delete.retention.ms`` has passed since it compacted
the segment holding it).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from librdkafka_reader import read_values

from mirror.config import load_config
from mirror.routing import RouteClass

pytestmark = pytest.mark.slow

TOPIC = "compacted.accounts"
PARTITIONS = 2
SEGMENT_MS = 100
CONFIGS = {"cleanup.policy": "compact", "segment.ms": str(SEGMENT_MS), "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "1000", "min.compaction.lag.ms": "0"}
CLEANED_WITHIN_S = 180
"""Kafka's cleaner looks for dirty logs every ``log.cleaner.backoff.ms`` (15 s by default)."""


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
                     "batch.num.messages": 9, "compression.type": "zstd", "partitioner": "murmur2_random"})


def _burst(producer: Producer, records) -> None:
    """One segment's worth: written, then a pause longer than ``segment.ms``."""
    for key, value in records:
        producer.produce(TOPIC, key=key, value=value)
        producer.poll(0)
    assert producer.flush(30) == 0
    time.sleep(SEGMENT_MS * 1.5 / 1000)


def _write(bootstrap: str) -> int:
    """Updates and deletions of 60 keys by one producer, so that the batches of its last burst
    keep the last records of their keys and lose the others (holes); then a second producer
    overwrites (or deletes) every other key, so that some of the first one's batches lose all
    their records; then other keys, and one more record to seal the segment before it.
    Returns how many records were written."""
    first = _producer(bootstrap)
    updates = [(b"account-%d" % (i % 60), None if i % 97 == 96 else b"balance %d " % i + bytes(20))
               for i in range(1500)]
    for start in range(0, len(updates), 150):
        _burst(first, updates[start:start + 150])
    second = _producer(bootstrap)
    finals = [(b"account-%d" % i, None if i % 11 == 0 else b"final %d" % i) for i in range(0, 60, 2)]
    _burst(second, finals)
    _burst(second, [(b"audit-%d" % i, bytes(40)) for i in range(300)])
    _burst(second, [(b"seal", b"the segment before this one")])
    return len(updates) + len(finals) + 300 + 1


def _read(bootstrap: str) -> dict[int, list[tuple[int, bytes, bytes | None]]]:
    """Each partition's ``(offset, key, value)`` in offset order, as librdkafka reads them."""
    return read_values(bootstrap, TOPIC, PARTITIONS, isolation="read_uncommitted",
                       take=lambda m: (m.offset(), m.key(), m.value()))


def _live(records: list[tuple[int, bytes, bytes | None]]) -> dict[bytes, bytes]:
    """Each key's last value; a key whose last record is a tombstone has none."""
    last = {key: value for _, key, value in records}
    return {key: value for key, value in last.items() if value is not None}


def _holes(records: list[tuple[int, bytes, bytes | None]]) -> int:
    offsets = [offset for offset, _, _ in records]
    return sum(1 for before, after in zip(offsets, offsets[1:]) if after != before + 1)


def test_a_topic_kafka_compacted_mirrors_with_the_same_last_value_per_key(kafka_source, kafka_destination, tmp_path):
    from mirror.spark.job import run_mirror

    admin = AdminClient({"bootstrap.servers": kafka_source.bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, config=CONFIGS)]).values():
        future.result(30)
    written = _write(kafka_source.bootstrap)
    deadline = time.monotonic() + CLEANED_WITHIN_S
    while True:
        source = _read(kafka_source.bootstrap)
        kept = sum(map(len, source.values()))
        if kept < written * 0.5 and any(_holes(records) for records in source.values()):
            break
        assert time.monotonic() < deadline, f"Kafka's cleaner kept {kept} of {written} records for {CLEANED_WITHIN_S} s"
        time.sleep(2)

    config = load_config(None, {"source.bootstrap": kafka_source.bootstrap,
                                "destination.bootstrap": kafka_destination.bootstrap,
                                "topics": TOPIC, "once": True, "checkpoint": str(tmp_path / "ck")})
    totals = run_mirror(config)
    source = _read(kafka_source.bootstrap)
    mirrored = _read(kafka_destination.bootstrap)
    for p in range(PARTITIONS):
        assert _live(mirrored[p]) == _live(source[p]), f"partition {p}"
    # What was copied is the compacted log, tombstones included, not what was written.
    assert sum(map(len, mirrored.values())) < written * 0.5
    assert any(value is None for records in mirrored.values() for _, _, value in records)
    # The batches with holes: rebuilt, or, the small ones, coalesced (both renumber offsets).
    classes = totals.counters.by_class
    assert classes[RouteClass.REBUILT].batches + classes[RouteClass.COALESCED].batches > 0
    destination_admin = AdminClient({"bootstrap.servers": kafka_destination.bootstrap})  # kept: its futures need it
    (described,) = destination_admin.describe_configs([ConfigResource("topic", TOPIC)]).values()
    configs = {name: entry.value for name, entry in described.result(30).items()}
    assert {name: configs[name] for name in ("cleanup.policy", "min.cleanable.dirty.ratio", "delete.retention.ms")} \
        == {name: CONFIGS[name] for name in ("cleanup.policy", "min.cleanable.dirty.ratio", "delete.retention.ms")}
