"""Taking over from the real MirrorMaker 2 (issue 50): connect-mirror 4.3.1 in dedicated mode,
as ``kmirror bench mirror`` runs it, between two real Kafka 4.4.0 brokers, under MM2's default
replication policy (``A.live`` at the destination). A producer keeps writing the source while
MM2 copies part of it; MM2 is stopped; ``kmirror run --mirrormaker2-config mm2.properties``
(the same file MM2 ran on) takes over. librdkafka reads every verdict:

- exactly-once MM2 stopped cleanly: the destination holds every source record once, in order
  per partition (read_committed), and a group consuming the destination before and after the
  takeover skips nothing and reads nothing twice; a group MM2 translated at the source keeps
  its destination offsets or moves forward, never skipping what it had not consumed;
- at-least-once MM2, killed: a kmirror started while it runs refuses (exit 2, one line), and
  after it, 0 lost, and no more duplicates than kmirror logged as the bound.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
from librdkafka_reader import read_to_end, read_values
from live_source import ProducerWriter, wait_until

from mirror.bench.arrival import stop_process
from mirror.bench.latency_proxy import free_port
from mirror.bench.mirrormaker import launch, properties
from mirror.kafka import KafkaClient, TopicPartition
from mirror.kafka.groups import GroupAdmin

pytestmark = [pytest.mark.slow, pytest.mark.kafka, pytest.mark.interop]

PARTITIONS = 3
GROUP = "app"
"""A group consuming the source, whose offsets MM2 translates and kmirror goes on translating."""


def _topic(cluster, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS)]).values():
        future.result(30)


def _mm2_config(source, destination, topic: str, alias: str, *, exactly_once: bool) -> dict[str, str]:
    """The bench's MirrorMaker 2 configuration under MM2's default replication policy, offsets
    flushed every second (a setting of the target's Connect worker: an at-least-once MM2
    killed leaves a tail of a second or so), group offsets synced."""
    config = properties(source.bootstrap, destination.bootstrap, re.escape(topic), PARTITIONS,
                        exactly_once=exactly_once, alias=alias, rest_port=free_port() if exactly_once else None)
    config["replication.policy.class"] = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    config.update({"emit.checkpoints.enabled": "true", "emit.checkpoints.interval.seconds": "1",
                   "sync.group.offsets.enabled": "true", "sync.group.offsets.interval.seconds": "1",
                   f"{alias}->target.groups": GROUP, "target.offset.flush.interval.ms": "1000"})
    return config


def _destination_count(bootstrap: str, topic: str) -> int:
    with KafkaClient(bootstrap) as client:
        if topic not in client.topics():
            return 0
        return sum(client.list_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)], "latest").values())


def _kmirror(work: Path, *flags: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirror.cli", "run", "--mirrormaker2-config",
                           str(work / "mm2.properties"), "--checkpoint", str(work / "checkpoint"), *flags],
                          capture_output=True, text=True, timeout=timeout)


def _consume_some(bootstrap: str, group: str, topic: str, count: int) -> list[bytes]:
    """``count`` records through ``group`` (subscribed), committed; what it read."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(seen) < count:
            assert time.monotonic() < deadline, f"{group} read {len(seen)} of {count} records of {topic} in 60 s"
            message = consumer.poll(1)
            if message is not None and not message.error():
                seen.append(message.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return seen


def _consume_rest(bootstrap: str, group: str, topic: str) -> dict[int, list[bytes]]:
    """What ``group`` reads from its committed offsets to the end of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "enable.partition.eof": True})
    consumer.subscribe([topic])
    try:
        return read_to_end(consumer, topic, PARTITIONS)
    finally:
        consumer.close()


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    with KafkaClient(bootstrap) as client:
        return {tp.partition: offset for tp, offset in GroupAdmin(client).committed(group).items() if tp.topic == topic}


def _connect_group_empty(bootstrap: str, group: str) -> bool:
    with KafkaClient(bootstrap) as client:
        return GroupAdmin(client).describe(group).members == 0


def test_kmirror_takes_over_from_exactly_once_mirrormaker2_exactly(tmp_path, kafka_source, kafka_destination):
    alias, topic = "eos", "live"
    remote = f"{alias}.{topic}"
    source_topic = f"{topic}"
    _topic(kafka_source, source_topic)
    work = tmp_path / "mm2"
    work.mkdir()
    with ProducerWriter(kafka_source.bootstrap, source_topic, PARTITIONS) as writer:
        wait_until(lambda: sum(map(len, writer.written.values())) > 600, "the source to fill a little", 60)
        before_mm2 = _consume_some(kafka_source.bootstrap, GROUP, source_topic, 300)
        mm2 = launch(work, _mm2_config(kafka_source, kafka_destination, source_topic, alias, exactly_once=True))
        try:
            wait_until(lambda: _destination_count(kafka_destination.bootstrap, remote) > 3000,
                       "MirrorMaker 2 to copy part of the topic", 180, poll_s=1)
            reader_before = _consume_some(kafka_destination.bootstrap, "reader", remote, 1500)
            wait_until(lambda: _committed(kafka_destination.bootstrap, GROUP, remote),
                       "MirrorMaker 2 to translate the group", 60, poll_s=1)
        finally:
            stop_process(mm2, signal.SIGTERM)
        assert mm2.returncode is not None
        mm2_translated = _committed(kafka_destination.bootstrap, GROUP, remote)
        # The group goes on at the source after MM2 stopped; kmirror translates it from there.
        _consume_some(kafka_source.bootstrap, GROUP, source_topic, 600)
        time.sleep(2)
    written = writer.finish()
    source_committed = _committed(kafka_source.bootstrap, GROUP, source_topic)

    done = _kmirror(work, "--once")
    assert done.returncode == 0, done.stderr[-4000:]
    assert "taking over from MirrorMaker 2 (exactly-once)" in done.stderr
    assert "MirrorMaker 2 ran at-least-once" not in done.stderr

    copied = read_values(kafka_destination.bootstrap, remote, PARTITIONS, take=lambda m: (m.offset(), m.value()))
    assert {p: [v for _, v in records] for p, records in copied.items()} == written  # 0 lost, 0 twice, in order
    # The destination's reader goes on where it stopped: nothing skipped, nothing twice.
    reader_after = _consume_rest(kafka_destination.bootstrap, "reader", remote)
    assert sorted(reader_before + [v for values in reader_after.values() for v in values]) == \
        sorted(v for values in written.values() for v in values)
    # The source group: translated no lower than MM2 had it, and never past what it had not consumed.
    translated = _committed(kafka_destination.bootstrap, GROUP, remote)
    assert source_committed and set(translated) == set(source_committed), (translated, source_committed)
    for p in source_committed:
        assert translated[p] >= mm2_translated.get(p, 0)
        next_unconsumed = written[p][source_committed[p]] if source_committed[p] < len(written[p]) else None
        resumed = [value for offset, value in copied[p] if offset >= translated[p]]
        if next_unconsumed is not None:
            assert next_unconsumed in resumed, f"partition {p}: the group would skip {next_unconsumed!r}"
    assert before_mm2  # the group had consumed before MM2 started


def test_kmirror_refuses_a_running_mirrormaker2_then_takes_over_from_at_least_once(tmp_path, kafka_source,
                                                                                   kafka_destination):
    alias, topic = "alo", "live-alo"
    remote = f"{alias}.{topic}"
    _topic(kafka_source, topic)
    work = tmp_path / "mm2"
    work.mkdir()
    with ProducerWriter(kafka_source.bootstrap, topic, PARTITIONS) as writer:
        mm2 = launch(work, _mm2_config(kafka_source, kafka_destination, topic, alias, exactly_once=False))
        try:
            wait_until(lambda: _destination_count(kafka_destination.bootstrap, remote) > 3000,
                       "MirrorMaker 2 to copy part of the topic", 180, poll_s=1)
            refused = _kmirror(work, "--once", timeout=120)
            assert refused.returncode == 2, refused.stderr[-4000:]
            assert "MirrorMaker 2 still runs" in refused.stderr
            assert not (work / "checkpoint").exists()
        finally:
            stop_process(mm2, signal.SIGKILL)  # no last offset flush: what it wrote after the last one is copied again
        wait_until(lambda: _connect_group_empty(kafka_destination.bootstrap, f"{alias}-mm2"),
                   "MirrorMaker 2's Connect group to empty", 60, poll_s=1)
        time.sleep(1)
    written = writer.finish()

    done = _kmirror(work, "--once")
    assert done.returncode == 0, done.stderr[-4000:]
    bound = re.search(r"copied again, at most (\d+) in all", done.stderr)
    assert bound, "\n".join(line for line in done.stderr.splitlines() if "MirrorMaker 2" in line)

    copied = read_values(kafka_destination.bootstrap, remote, PARTITIONS)
    duplicates = 0
    for p in range(PARTITIONS):
        assert set(copied[p]) == set(written[p]), f"partition {p} lost records"
        duplicates += len(copied[p]) - len(written[p])
        # In order, each record's first copy: MM2's, then kmirror's from where MM2's flushed offset was.
        first_seen = list(dict.fromkeys(copied[p]))
        assert first_seen == written[p]
    assert duplicates <= int(bound.group(1))
