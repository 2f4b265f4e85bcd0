"""The embedded broker's idempotence rules, as Kafka's ``ProducerAppendInfo`` applies them, its
producer state surviving a restart (rebuilt from the log's batch headers), and idle producers
forgotten after ``producer.id.expiration.ms`` with librdkafka's idempotent producer carrying on.

Batches carrying producer ids are built with kafka-python's ``DefaultRecordBatchBuilder``, an
encoder independent of kcodecs.
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from mirror.broker import EmbeddedBroker
from mirror.broker.errors import ApiError
from mirror.broker.producer_state import BatchMetadata, ProducerStateTable
from mirror.kafka import BrokerApiError, KafkaClient, NewTopic, TopicPartition

OUT_OF_ORDER, INVALID_EPOCH = 45, 47


def stamped(producer_id: int, epoch: int, base_sequence: int, records: int = 3) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=producer_id,
                                        producer_epoch=epoch, base_sequence=base_sequence, batch_size=1 << 20)
    for i in range(records):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=None, value=b"v%d-%d" % (base_sequence, i), headers=[])
    return bytes(builder.build())


def test_an_unknown_producer_may_start_at_any_sequence():
    """KIP-360 (Kafka 2.5+): its state may have expired or been lost with old segments."""
    table = ProducerStateTable()
    assert table.check(9, 0, 1234, 1236) is None


def test_a_new_epoch_must_start_at_zero_and_an_old_one_is_fenced():
    table = ProducerStateTable()
    table.record(9, 1, BatchMetadata(0, 2, 0, 2, -1), now_ms=0)
    with pytest.raises(ApiError) as bumped:
        table.check(9, 2, 3, 5)
    assert bumped.value.code == OUT_OF_ORDER
    assert table.check(9, 2, 0, 0) is None
    table.record(9, 2, BatchMetadata(0, 0, 3, 3, -1), now_ms=0)
    with pytest.raises(ApiError) as fenced:
        table.check(9, 1, 3, 5)
    assert fenced.value.code == INVALID_EPOCH


def test_any_of_the_last_five_batches_is_a_duplicate_and_an_older_one_is_out_of_order():
    """Five requests in flight: a retry of any of them must be recognised, in any order."""
    table = ProducerStateTable()
    for i in range(7):
        table.record(5, 0, BatchMetadata(10 * i, 10 * i + 9, 100 * i, 100 * i + 9, -1), now_ms=0)
    for i in range(2, 7):
        assert table.check(5, 0, 10 * i, 10 * i + 9) == BatchMetadata(10 * i, 10 * i + 9, 100 * i, 100 * i + 9, -1)
    for first in (10, 75, 71):  # dropped from the window, skipped ahead, one too far
        with pytest.raises(ApiError) as refused:
            table.check(5, 0, first, first + 9)
        assert refused.value.code == OUT_OF_ORDER
    assert table.check(5, 0, 70, 79) is None


def test_a_retry_across_a_broker_restart_is_still_a_duplicate(tmp_path):
    data = tmp_path / "data"
    tp = TopicPartition("idem", 0)
    with EmbeddedBroker(data) as first, KafkaClient(first.bootstrap) as client:
        client.create_topics([NewTopic("idem", 1)])
        producer_id, epoch = client.init_producer_id()
        offsets = client.produce([(tp, stamped(producer_id, epoch, s)) for s in (0, 3, 6)])
    assert offsets == [0, 3, 6]
    with EmbeddedBroker(data) as second, KafkaClient(second.bootstrap) as client:
        # The acknowledgement of the last batch was lost: the producer resends it.
        assert client.produce([(tp, stamped(producer_id, epoch, 6))]) == [6]
        assert client.produce([(tp, stamped(producer_id, epoch, 3))]) == [3]
        assert client.list_offsets([tp], "latest")[tp] == 9  # nothing written twice
        assert client.produce([(tp, stamped(producer_id, epoch, 9))]) == [9]
        with pytest.raises(BrokerApiError) as gap:
            client.produce([(tp, stamped(producer_id, epoch, 20))])
        assert gap.value.code == OUT_OF_ORDER and gap.value.tp == tp


EXPIRY_MS = 60_000


def test_an_idle_producer_is_forgotten_and_then_taken_at_any_sequence():
    table = ProducerStateTable()
    table.record(9, 0, BatchMetadata(0, 2, 0, 2, -1), now_ms=1_000)
    assert table.expire(1_000 + EXPIRY_MS - 1, EXPIRY_MS) == [] and len(table) == 1
    assert table.expire(1_000 + EXPIRY_MS, EXPIRY_MS) == [9] and len(table) == 0
    # What Kafka's broker does with a producer it has no state for (KIP-360): any sequence, and
    # a retry of a batch from before is no longer recognised.
    assert table.check(9, 0, 0, 2) is None
    assert table.check(9, 0, 50, 52) is None


def test_a_producer_is_timed_from_its_last_append_or_marker():
    table = ProducerStateTable()
    table.record(9, 0, BatchMetadata(0, 2, 0, 2, -1), now_ms=0)
    table.record(9, 0, BatchMetadata(3, 5, 3, 5, -1), now_ms=50_000)
    assert table.expire(EXPIRY_MS, EXPIRY_MS) == []
    table.record_marker(9, 0, 0, now_ms=100_000)
    assert table.expire(50_000 + EXPIRY_MS, EXPIRY_MS) == []
    assert table.expire(100_000 + EXPIRY_MS, EXPIRY_MS) == [9]


def test_a_producer_with_a_transaction_open_here_is_kept_however_long_it_is_idle():
    table = ProducerStateTable()
    table.record(4, 0, BatchMetadata(0, 0, 10, 10, -1), now_ms=0, transactional=True)
    assert table.expire(10 * EXPIRY_MS, EXPIRY_MS) == []
    assert table.first_unstable_offset == 10
    table.record_marker(4, 0, 0, now_ms=10 * EXPIRY_MS)
    assert table.expire(11 * EXPIRY_MS, EXPIRY_MS) == [4]


def test_producers_rebuilt_from_the_log_are_timed_from_the_first_check_after_loading():
    """Their append times are not in the log: expiring them at once could forget a producer
    that wrote a second before a restart."""
    table = ProducerStateTable()
    table.record(3, 0, BatchMetadata(0, 0, 0, 0, -1), now_ms=None)  # as replay does
    assert table.expire(10 * EXPIRY_MS, EXPIRY_MS) == []
    assert table.expire(11 * EXPIRY_MS - 1, EXPIRY_MS) == []
    assert table.expire(11 * EXPIRY_MS, EXPIRY_MS) == [3]


def test_librdkafkas_idempotent_producer_carries_on_after_the_broker_forgot_it(tmp_path):
    """Expiry runs on the broker's own schedule; an idempotent librdkafka producer that was
    idle past it goes on at its next sequence, which the broker takes (the producer is
    unknown to it now), and a reader sees every record once, in order."""
    from broker_helpers import ShiftedClock, wait_for
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CTopicPartition

    clock = ShiftedClock()
    with EmbeddedBroker(tmp_path / "data", clock=clock, producer_id_expiration_ms=EXPIRY_MS,
                        producer_id_expiration_check_interval_ms=20) as broker:
        with KafkaClient(broker.bootstrap) as client:
            client.create_topics([NewTopic("idle", 1)])
        producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        partition = broker.state.topics.topics["idle"].partitions[0]
        failures = []

        def sent(err, _msg):
            if err is not None:
                failures.append(err)

        for i in range(10):
            producer.produce("idle", value=b"before-%d" % i, partition=0, on_delivery=sent)
        assert producer.flush(30) == 0
        assert broker.call_in_loop(lambda: len(partition.producers)) == 1
        clock.offset_ms += EXPIRY_MS + 1
        wait_for(lambda: broker.call_in_loop(lambda: len(partition.producers)) == 0, "the producer's state to expire")
        for i in range(10):
            producer.produce("idle", value=b"after-%d" % i, partition=0, on_delivery=sent)
        assert producer.flush(30) == 0
        assert failures == []
        assert broker.call_in_loop(lambda: len(partition.producers)) == 1  # known again from its next batch

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "idle-reader",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.assign([CTopicPartition("idle", 0, 0)])
        got = []
        while len(got) < 20:
            message = consumer.poll(10)
            assert message is not None, f"only {len(got)} of 20 records came back"
            assert message.error() is None, message.error()
            got.append(message.value())
        consumer.close()
    assert got == [b"before-%d" % i for i in range(10)] + [b"after-%d" % i for i in range(10)]
