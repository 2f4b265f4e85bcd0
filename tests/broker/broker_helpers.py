"""What the broker tests share: clocks for the broker's Clock seam, and the client steps the
tests that run real clients (kafka-python, librdkafka) against an embedded or a separate
broker process take before and after what they check.

Imported as ``broker_helpers`` (pytest puts each test file's directory on ``sys.path``).
"""

from __future__ import annotations

import time

from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

TIMEOUT_S = 30
T0 = 1_700_000_000_000


class ManualClock:
    """A Clock that moves only when the test moves it (``clock.now += ms``)."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


class ShiftedClock:
    """A Clock for a serving broker: wall time plus an offset a test can jump forward."""

    def __init__(self) -> None:
        self.offset_ms = 0

    def __call__(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms


class RecordingMarkers:
    """A transaction coordinator's marker writer (its MarkerWriter seam) that records every
    marker it is asked for; while ``fail`` is set, every write raises after writing nothing."""

    def __init__(self) -> None:
        self.written: list[tuple[tuple[str, int], int, int, bool]] = []
        self.fail = False

    def write_markers(self, partitions, producer_id, producer_epoch, *, commit, coordinator_epoch):
        if self.fail:
            raise OSError("disk gone")
        self.written += [(tp, producer_id, producer_epoch, commit) for tp in sorted(partitions)]


class SequentialIds:
    """Producer ids 1001, 1002, ...: the coordinator's id allocator seam."""

    def __init__(self) -> None:
        self.next = 1000

    def __call__(self) -> int:
        self.next += 1
        return self.next


def create_topic(bootstrap: str, name: str, partitions: int = 1, **configs: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name, partitions, 1, topic_configs=configs)])
    finally:
        admin.close()


def transactional_producer(bootstrap: str, transactional_id: str, **conf) -> Producer:
    """A librdkafka producer whose ``init_transactions`` is done: its epoch fences any earlier one."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **conf})
    producer.init_transactions(TIMEOUT_S)
    return producer


def read_kafka_python(bootstrap: str, topic: str, isolation: str, partitions: int,
                      ends: dict[int, int] | None = None) -> tuple[list[bytes], dict[int, int]]:
    """Every value (sorted) a kafka-python consumer with ``isolation_level`` reads from the
    start until its position reaches each partition's end, and those ends: ``ends`` if given,
    else what ListOffsets answers it (under read_committed, the last stable offset)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             isolation_level=isolation)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning()
    until = {TopicPartition(topic, p): end for p, end in ends.items()} if ends is not None else consumer.end_offsets(tps)
    values: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while any(consumer.position(tp) < until[tp] for tp in tps):
        assert time.monotonic() < deadline, f"kafka-python consumer of {topic} stalled"
        for records in consumer.poll(timeout_ms=200).values():
            values += [record.value for record in records]
    consumer.close()
    return sorted(values), {tp.partition: end for tp, end in until.items()}


def wait_for(condition, what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
