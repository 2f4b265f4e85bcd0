"""Mirroring a topic the source's cleaner really compacted (issue 12): its batches have offset
holes, delete horizons and empty producer headers. The mirror creates the destination topic
compacted like the source, rebuilds the holey batches, drops the empty ones, and the
destination holds the same records in the same order, tombstones included, so every key has
the same last value on both sides; the destination's own cleaner then compacts it too."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from librdkafka_reader import read_values

from mirror.broker import EmbeddedBroker
from mirror.broker.cleaner import CleanerConfig
from mirror.config import load_config
from mirror.kafka import KafkaClient, NewTopic
from mirror.routing import RouteClass

pytestmark = [pytest.mark.slow, pytest.mark.interop]

TOPIC = "accounts"
PARTITIONS = 2
CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "3600000", "min.compaction.lag.ms": "0"}


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
                     "batch.num.messages": 9, "compression.type": "zstd", "partitioner": "murmur2_random"})


def _write(bootstrap: str) -> None:
    """Updates and deletions of 60 keys by one producer; then a second producer overwrites every
    key once, so the first one's last batch loses all its records and the cleaner leaves its
    header (recordCount 0); then other keys, so all of it lands in sealed, cleanable segments."""
    first = _producer(bootstrap)
    for i in range(1500):
        first.produce(TOPIC, key=b"account-%d" % (i % 60), value=None if i % 97 == 96 else b"balance %d " % i + bytes(20))
        first.poll(0)
    assert first.flush(30) == 0
    second = _producer(bootstrap)
    for i in range(60):
        second.produce(TOPIC, key=b"account-%d" % i, value=None if i % 11 == 0 else b"final %d" % i)
    for i in range(300):
        second.produce(TOPIC, key=b"audit-%d" % i, value=bytes(40))
        second.poll(0)
    assert second.flush(30) == 0


def _read(bootstrap: str) -> dict[int, list[tuple[bytes, bytes | None]]]:
    """Each partition's ``(key, value)`` pairs in offset order, as librdkafka reads them."""
    return read_values(bootstrap, TOPIC, PARTITIONS, isolation="read_uncommitted", take=lambda m: (m.key(), m.value()))


def _last_values(records: list[tuple[bytes, bytes | None]]) -> dict[bytes, bytes | None]:
    return dict(records)


def test_a_compacted_topic_mirrors_with_its_holes_and_tombstones(tmp_path):
    from mirror.spark.job import run_mirror

    manual = CleanerConfig(enable=False)
    with EmbeddedBroker(tmp_path / "src", cleaner=manual) as src, EmbeddedBroker(tmp_path / "dst", cleaner=manual) as dst:
        with KafkaClient(src.bootstrap) as client:
            client.create_topics([NewTopic(TOPIC, PARTITIONS, configs=CONFIGS)])
        _write(src.bootstrap)
        cleaned = 0
        while (stats := src.cleaner.clean_once()) is not None:
            cleaned += stats.records_read - stats.records_kept
        assert cleaned > 1000
        source = _read(src.bootstrap)
        assert any(value is None for records in source.values() for _, value in records)

        config = load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                                    "topics": TOPIC, "once": True, "checkpoint": str(tmp_path / "ck")})
        totals = run_mirror(config)
        mirrored = _read(dst.bootstrap)
        assert mirrored == source  # same records, same order, tombstones too
        for p in range(PARTITIONS):
            assert _last_values(mirrored[p]) == _last_values(source[p])
        classes = totals.counters.by_class
        # Holey batches: rebuilt, or, the small ones, coalesced (both renumber the offsets).
        assert classes[RouteClass.REBUILT].batches + classes[RouteClass.COALESCED].batches > 0
        assert classes[RouteClass.DROPPED].batches > 0  # empty producer headers
        destination_config = dst.state.topics.topics[TOPIC].config
        assert (destination_config.cleanup_policy, destination_config.delete_retention_ms,
                destination_config.min_cleanable_dirty_ratio) == ("compact", 3_600_000, 0.01)

        # The destination compacts on its own; its last value per key still matches the source's.
        while dst.cleaner.clean_once() is not None:
            pass
        compacted = _read(dst.bootstrap)
        for p in range(PARTITIONS):
            assert _last_values(compacted[p]) == _last_values(source[p])
