"""The embedded broker's idempotence rules, as Kafka's ``ProducerAppendInfo`` applies them, and
its producer state surviving a restart (rebuilt from the log's batch headers).

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
    table.record(9, 1, BatchMetadata(0, 2, 0, 2, -1))
    with pytest.raises(ApiError) as bumped:
        table.check(9, 2, 3, 5)
    assert bumped.value.code == OUT_OF_ORDER
    assert table.check(9, 2, 0, 0) is None
    table.record(9, 2, BatchMetadata(0, 0, 3, 3, -1))
    with pytest.raises(ApiError) as fenced:
        table.check(9, 1, 3, 5)
    assert fenced.value.code == INVALID_EPOCH


def test_any_of_the_last_five_batches_is_a_duplicate_and_an_older_one_is_out_of_order():
    """Five requests in flight: a retry of any of them must be recognised, in any order."""
    table = ProducerStateTable()
    for i in range(7):
        table.record(5, 0, BatchMetadata(10 * i, 10 * i + 9, 100 * i, 100 * i + 9, -1))
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
