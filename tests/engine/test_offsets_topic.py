"""The offsets topic read from its end (:meth:`CommittedOffsets.latest`), as a resident copier
starts: the newest committed offset of each wanted partition, however far back it lies, a
tombstone counting as none, whatever older value precedes it; the same answer as reading the
whole topic (:meth:`CommittedOffsets.refresh`)."""

from __future__ import annotations

import json
import time

import kcodecs
from kcodecs import Record
from mirror.broker import EmbeddedBroker
from mirror.engine import CommittedOffsets, offsets_topic, offsets_topic_spec
from mirror.engine.offsets_topic import encode_offsets
from mirror.kafka import KafkaClient, TopicPartition
from mirror.kafka.transactional_producer import TransactionalProducer

JOB = "offsets-test"
A, B, C, D = (TopicPartition("t", p) for p in range(4))


def _tombstone(tp: TopicPartition) -> bytearray:
    key = json.dumps({"topic": tp.topic, "partition": tp.partition}, sort_keys=True).encode()
    return bytearray(kcodecs.build_batch([Record(key=key, value=None, timestamp=int(time.time() * 1000))]))


def test_the_end_of_the_topic_says_what_every_partition_committed(tmp_path):
    with EmbeddedBroker(tmp_path / "dst") as dst, KafkaClient(dst.bootstrap) as client:
        client.create_topics([offsets_topic_spec(JOB)])
        producer = TransactionalProducer(client, f"{JOB}-0", transaction_timeout_ms=10_000)
        offsets = TopicPartition(offsets_topic(JOB), 0)
        now = int(time.time() * 1000)

        def commit(data: bytearray, records: int) -> None:
            producer.enqueue(offsets, data, records)
            producer.commit()

        commit(encode_offsets({C: 5}, now), 1)          # C: long ago, then deleted
        commit(encode_offsets({B: 17}, now), 1)         # B: long ago, never again
        commit(_tombstone(C), 1)
        for n in range(3000):                           # A, many times since (thousands of offsets)
            commit(encode_offsets({A: n}, now), 1)
        view = CommittedOffsets(client, offsets_topic(JOB), max_wait_s=10)
        latest = view.latest([A, B, C, D])
        whole = CommittedOffsets(client, offsets_topic(JOB), max_wait_s=10).refresh()
    assert latest == {A: 2999, B: 17}
    assert whole == latest
