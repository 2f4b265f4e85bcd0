"""The naive mirrors a Python user would write instead: consume every record, produce it again.

Both keep the record's key, value, headers, timestamp and partition, produce with
``acks=all`` and the source's codec, and otherwise use their client's defaults. Neither
commits offsets (the bench's brokers have no group coordinator, and kmirror's engine does
not commit either). Both end when every record is consumed and the producer's flush returns.
"""

from __future__ import annotations

import contextlib
import time
from typing import Callable, Iterator

from .mode_run import ModeRun

__all__ = ["confluent", "kafka_python", "copy_confluent", "copy_kafka_python", "PeerStalledError"]

_POLL_S = 1.0
_STALL_S = 60.0


class PeerStalledError(RuntimeError):
    """A peer consumed nothing for a minute: the run is broken, not slow."""


@contextlib.contextmanager
def confluent(spec: ModeRun) -> Iterator[Callable[[], dict[str, int]]]:
    """A connected consumer and producer (not timed), and the copy to time."""
    from confluent_kafka import Consumer, Producer

    consumer = Consumer({"bootstrap.servers": spec.source, "group.id": "kmirror-bench", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": spec.destination, "compression.type": spec.codec, "acks": "all"})
    try:
        consumer.list_topics(spec.source_topic, timeout=_STALL_S)
        producer.list_topics(spec.destination_topic, timeout=_STALL_S)
        yield lambda: copy_confluent(spec, consumer, producer)
    finally:
        consumer.close()


def copy_confluent(spec: ModeRun, consumer, producer) -> dict[str, int]:
    """confluent-kafka (librdkafka): ``consume()`` in chunks, ``produce()`` each message, ``flush()``."""
    from confluent_kafka import KafkaException, TopicPartition

    consumer.assign([TopicPartition(spec.source_topic, p, 0) for p in range(len(spec.end_offsets))])
    copied, last_progress = 0, time.monotonic()
    while copied < spec.records:
        # consume() waits for num_messages or the timeout: ask for no more than is left.
        messages = consumer.consume(num_messages=min(10_000, spec.records - copied), timeout=_POLL_S)
        for message in messages:
            if message.error():
                raise KafkaException(message.error())
            while True:
                try:
                    producer.produce(spec.destination_topic, message.value(), message.key(),
                                     partition=message.partition(), timestamp=message.timestamp()[1],
                                     headers=message.headers())
                    break
                except BufferError:  # the local queue is full: let librdkafka send some
                    producer.poll(0.05)
        producer.poll(0)
        copied, last_progress = _progress(copied, len(messages), last_progress)
    if producer.flush(_STALL_S) != 0:
        raise PeerStalledError("confluent-kafka producer could not deliver everything within a minute")
    return {}


@contextlib.contextmanager
def kafka_python(spec: ModeRun) -> Iterator[Callable[[], dict[str, int]]]:
    """A connected consumer and producer (not timed), and the copy to time."""
    from kafka import KafkaConsumer, KafkaProducer

    consumer = KafkaConsumer(bootstrap_servers=spec.source, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    producer = KafkaProducer(bootstrap_servers=spec.destination, acks="all",
                             compression_type=None if spec.codec == "none" else spec.codec)
    try:
        consumer.partitions_for_topic(spec.source_topic)
        producer.partitions_for(spec.destination_topic)
        yield lambda: copy_kafka_python(spec, consumer, producer)
    finally:
        producer.close()
        consumer.close()


def copy_kafka_python(spec: ModeRun, consumer, producer) -> dict[str, int]:
    """kafka-python: ``poll()`` in chunks, ``send()`` each record, ``flush()``."""
    from kafka import TopicPartition

    partitions = [TopicPartition(spec.source_topic, p) for p in range(len(spec.end_offsets))]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    copied, last_progress = 0, time.monotonic()
    while copied < spec.records:
        polled = consumer.poll(timeout_ms=int(_POLL_S * 1000), max_records=10_000)
        count = 0
        for records in polled.values():
            for record in records:
                producer.send(spec.destination_topic, value=record.value, key=record.key,
                              partition=record.partition, timestamp_ms=record.timestamp,
                              headers=list(record.headers) or None)
            count += len(records)
        copied, last_progress = _progress(copied, count, last_progress)
    producer.flush(timeout=_STALL_S)
    return {}


def _progress(copied: int, count: int, last_progress: float) -> tuple[int, float]:
    now = time.monotonic()
    if count:
        return copied + count, now
    if now - last_progress > _STALL_S:
        raise PeerStalledError(f"no record consumed for {_STALL_S:.0f} s after {copied}")
    return copied, last_progress
