"""Issue 34: where the mirror starts and what it does when data is gone, against real Kafka 4.x.

- ``--starting-offsets`` by time: each partition starts at its first record stamped at or after
  the time, as Kafka's time index answers ListOffsets (also librdkafka's ``offsets_for_times``),
  in the middle of a batch here; what librdkafka reads at the destination is exactly that.
- ``--on-data-loss``: Kafka's own retention deletes a segment the mirror had not finished
  copying. The source broker checks retention every half second; which segment is deleted
  does not depend on the wall clock: records stamped two days ago fill the first segment, and
  the first record stamped now rolls a new one (``segment.ms`` is measured between record
  timestamps, LogSegment.shouldRoll), so ``retention.ms`` of one day deletes exactly the first.
  ``fail`` stops with exit code 1 and one ERROR line naming the offsets, copying nothing past
  them; ``skip-to-earliest`` warns ``DATA LOSS``, counts the lost records and copies the rest.
  Before it, DeleteRecords also moves another partition's log start inside a batch, whose
  records below it must not be copied although Kafka's fetch still returns them.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTP
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from librdkafka_reader import read_values

from mirror.config import load_config
from mirror.realkafka import KafkaCluster

pytestmark = pytest.mark.slow

MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000


@pytest.fixture(scope="module")
def source(start_kafka) -> KafkaCluster:
    """A source whose brokers apply retention every half second (Kafka's default: 5 minutes)."""
    return start_kafka(broker_configs={"log.retention.check.interval.ms": "500"})


def _create(bootstrap: str, topic: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, config=configs)]).values():
        future.result(30)


def _stamped(message) -> tuple[int, bytes]:
    return message.timestamp()[1], message.value()


def _config(src: KafkaCluster, dst: KafkaCluster, topic: str, checkpoint, **settings):
    return load_config(None, {"source.bootstrap": src.bootstrap, "destination.bootstrap": dst.bootstrap,
                              "topics": topic, "once": True, "checkpoint": str(checkpoint), **settings})


def test_a_starting_time_starts_each_partition_at_its_first_record_that_recent(source, kafka_destination, tmp_path):
    from mirror.spark.job import run_mirror

    topic = "retention.since"
    _create(source.bootstrap, topic, 2)
    now = int(time.time() * 1000)
    # Partition 0: one batch of records stamped every 5 minutes over five hours, then one stamped
    # earlier than all of them (it comes after the start in offset order, so it is copied).
    # Partition 1: nothing recent enough for either start: it starts at its end.
    producer = Producer({"bootstrap.servers": source.bootstrap, "linger.ms": 500, "batch.num.messages": 1000,
                         "compression.type": "lz4", "enable.idempotence": True})
    for i in range(60):
        producer.produce(topic, value=b"p0-%d" % i, partition=0, timestamp=now - 5 * HOUR + i * 5 * MINUTE)
    for i in range(10):
        producer.produce(topic, value=b"p1-%d" % i, partition=1, timestamp=now - 10 * HOUR + i)
    assert producer.flush(30) == 0
    producer.produce(topic, value=b"p0-late", partition=0, timestamp=now - 6 * HOUR)
    assert producer.flush(30) == 0
    written = read_values(source.bootstrap, topic, 2, take=_stamped)
    assert len(written[0]) == 61 and len(written[1]) == 10

    # Between two records, so that the start falls inside partition 0's batch: ISO-8601, then
    # milliseconds since the epoch, each into a destination topic of its own. The second run
    # takes 5 offsets per micro-batch: its first ranges end inside that batch, and a later
    # one copies it, still from the starting offset on.
    iso_time = now - 3 * HOUR - 150_000
    iso = datetime.datetime.fromtimestamp(iso_time / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    epoch_time = now - HOUR - 150_000
    for starting_offsets, since, rename, per_micro_batch in ((iso, iso_time, "iso.{topic}", None),
                                                             (str(epoch_time), epoch_time, "ms.{topic}", 5)):
        totals = run_mirror(_config(source, kafka_destination, topic, tmp_path / rename.split(".")[0], rename=rename,
                                    starting_offsets=starting_offsets, max_records_per_trigger=per_micro_batch))
        expected = {p: _from_first_stamped_at(records, since) for p, records in written.items()}
        assert _kafka_time_index(source.bootstrap, topic, since) == {0: len(written[0]) - len(expected[0]), 1: 10}
        copied = read_values(kafka_destination.bootstrap, rename.format(topic=topic), 2, take=_stamped)
        assert copied == expected, starting_offsets
        assert expected[0][-1] == (now - 6 * HOUR, b"p0-late") and expected[1] == []
        assert totals.counters.total_records == len(expected[0])
        assert totals.micro_batches == (1 if per_micro_batch is None else 3)  # [48, 53), [53, 58), [58, 61)


def _from_first_stamped_at(records: list[tuple[int, bytes]], since: int) -> list[tuple[int, bytes]]:
    """What the mirror must copy of one partition: everything from its first record stamped at
    or after ``since``, in offset order."""
    first = next((i for i, (stamp, _) in enumerate(records) if stamp >= since), len(records))
    return records[first:]


def _kafka_time_index(bootstrap: str, topic: str, since: int) -> dict[int, int]:
    """librdkafka's ``offsets_for_times`` (ListOffsets by timestamp), the log end where nothing
    is that recent."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        found = consumer.offsets_for_times([CTP(topic, p, since) for p in range(2)], timeout=30)
        return {tp.partition: tp.offset if tp.offset >= 0 else consumer.get_watermark_offsets(tp, timeout=30)[1]
                for tp in found}
    finally:
        consumer.close()


def _write(bootstrap: str, topic: str, partition: int, name: str, count: int, stamp: int, *,
           per_batch: int = 7) -> list[bytes]:
    """``count`` records stamped from ``stamp`` on, at most ``per_batch`` to a batch (all of
    them in one, if that many: they are produced before the producer's linger ends)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0 if per_batch < count else 1000,
                         "enable.idempotence": True, "batch.num.messages": per_batch})
    values = [b"%s-%d" % (name.encode(), i) for i in range(count)]
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=partition, timestamp=stamp + i)
    assert producer.flush(30) == 0
    return values


def _log_start(bootstrap: str, topic: str, partition: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return consumer.get_watermark_offsets(CTP(topic, partition), timeout=30)[0]
    finally:
        consumer.close()


def _mirror(src: KafkaCluster, dst: KafkaCluster, topic: str, checkpoint, on_data_loss: str,
            *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mirror.cli", "run", "--source", src.bootstrap, "--destination",
                           dst.bootstrap, "--topics", topic, "--once", "--checkpoint", str(checkpoint),
                           "--on-data-loss", on_data_loss, *flags], capture_output=True, text=True, timeout=600)


def test_retention_deleting_what_was_not_copied_fails_or_is_skipped_as_asked(source, kafka_destination, tmp_path):
    from mirror.spark.job import run_mirror

    topic = "retention.lost"
    _create(source.bootstrap, topic, 2, **{"segment.ms": str(HOUR)})
    now = int(time.time() * 1000)
    copied = [_write(source.bootstrap, topic, 0, "a", 20, now - 2 * DAY),
              _write(source.bootstrap, topic, 1, "a1", 20, now)]
    checkpoint = tmp_path / "ck"
    # Topic configs are not synced: the retention.ms set below would reach the destination,
    # whose brokers would then delete the copied records stamped two days ago (as they should):
    # this test is about what the source's retention deletes.
    run_mirror(_config(source, kafka_destination, topic, checkpoint, sync_topic_configs=False))
    assert read_values(kafka_destination.bootstrap, topic, 2) == dict(enumerate(copied))

    # Not copied yet: 30 records stamped two days ago, in the first segment with the copied
    # ones; then records stamped now, which roll a new segment.
    lost = _write(source.bootstrap, topic, 0, "b", 30, now - 2 * DAY + 100)
    kept = [_write(source.bootstrap, topic, 0, "c", 25, now),
            _write(source.bootstrap, topic, 1, "c1", 25, now, per_batch=25)]  # offsets 20 to 44, one batch
    admin = AdminClient({"bootstrap.servers": source.bootstrap})
    entry = ConfigEntry("retention.ms", str(DAY), incremental_operation=AlterConfigOpType.SET)
    (altered,) = admin.incremental_alter_configs([ConfigResource("topic", topic, incremental_configs=[entry])]).values()
    altered.result(30)
    deadline = time.monotonic() + 120
    while _log_start(source.bootstrap, topic, 0) == 0:
        assert time.monotonic() < deadline, "Kafka's retention did not delete the first segment in 120 s"
        time.sleep(0.5)
    assert _log_start(source.bootstrap, topic, 0) == 50  # the whole first segment: offsets 0 to 49
    assert _log_start(source.bootstrap, topic, 1) == 0

    # One copy task, so one transaction: partition 1's copy fails with partition 0's.
    failed = _mirror(source, kafka_destination, topic, checkpoint, "fail", "--copy-tasks", "1",
                     "--no-sync-topic-configs")
    assert failed.returncode == 1, failed.stderr[-5000:]
    errors = [line for line in failed.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, failed.stderr[-5000:]
    assert f"DataLossError: data loss in {topic}/0: offsets 20 to 49 were deleted" in errors[0], errors[0]
    assert "Traceback" not in failed.stderr and "\tat " not in failed.stderr
    assert read_values(kafka_destination.bootstrap, topic, 2) == dict(enumerate(copied))  # nothing past the loss

    # And in partition 1, DeleteRecords moves the log start inside c1's batch: a fetch still
    # returns the whole batch, and what lies below the log start must not be copied either.
    (deleted,) = admin.delete_records([CTP(topic, 1, 30)]).values()
    assert deleted.result(30).low_watermark == 30

    skipped = _mirror(source, kafka_destination, topic, checkpoint, "skip-to-earliest", "--no-sync-topic-configs")
    assert skipped.returncode == 0, skipped.stderr[-5000:]
    assert f"DATA LOSS in {topic}/0: offsets 20 to 49 were deleted" in skipped.stderr, skipped.stderr[-5000:]
    assert f"DATA LOSS in {topic}/1: offsets 20 to 29 were deleted" in skipped.stderr, skipped.stderr[-5000:]
    assert f"LOST {len(lost) + 10} records to source retention" in skipped.stderr, skipped.stderr[-5000:]
    expected = {0: copied[0] + kept[0], 1: copied[1] + kept[1][10:]}
    from_log_start = {"auto.offset.reset": "earliest"}
    # librdkafka agrees on what is left at the source:
    assert read_values(source.bootstrap, topic, 2, **from_log_start) == {0: kept[0], 1: kept[1][10:]}
    assert read_values(kafka_destination.bootstrap, topic, 2) == expected
