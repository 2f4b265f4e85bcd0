"""Producing a built data set (:mod:`.datagen`) to a source topic, as the bench does before it measures.

An idempotent producer writes it, as Java's producer does by default since Kafka 3.0 (KIP-679):
every source batch carries a producer id, epoch and sequence, which a mirror must replace with
its own. Batches go in groups of 64 per flush, five requests in flight.
"""

from __future__ import annotations

import kcodecs

from ..kafka import IdempotentProducer, KafkaClient, NewTopic, TopicPartition
from .datagen import Dataset

__all__ = ["fill_topic"]

_PER_FLUSH = 64


def fill_topic(client: KafkaClient, topic: str, partitions: int, data: Dataset) -> None:
    """Create ``topic`` with ``partitions`` and produce every batch of ``data`` to it, in order."""
    client.create_topics([NewTopic(topic, partitions)])
    producer = IdempotentProducer(client)
    try:
        for start in range(0, len(data.batches), _PER_FLUSH):
            for partition, batch in data.batches[start : start + _PER_FLUSH]:
                producer.enqueue(TopicPartition(topic, partition), bytearray(batch), kcodecs.read_batch(batch).record_count)
            producer.flush()
    finally:
        producer.close()
