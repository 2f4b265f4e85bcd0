"""The append path's pure parts: offset assignment in place, LogAppendTime, topic codecs, configs.

The stored bytes are checked with kafka-python's reader, an independent implementation.
"""

from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords

import kcodecs
from kcodecs import Compression, Record

from mirror.broker.errors import ApiError
from mirror.broker.producer_state import BatchMetadata, ProducerStateTable
from mirror.broker.topic_config import TopicConfig
from mirror.broker.validator import assign_offsets, check_timestamps, inspect_produced


def produced(codec: str = "zstd", n: int = 5, **options) -> bytes:
    return kcodecs.build_batch([Record(key=b"k%d" % i, value=b"v" * i, timestamp=1000 + i) for i in range(n)],
                               compression=codec, **options)


def their_view(data) -> tuple:
    records = MemoryRecords(bytes(data))
    batch = records.next_batch()
    assert batch.validate_crc()
    rows = [(r.offset, r.timestamp, r.key, r.value) for r in batch]
    return batch, rows


def test_offsets_are_assigned_by_patching_only_the_header():
    data = produced("zstd")
    result = assign_offsets(inspect_produced(data, TopicConfig()), next_offset=500, now_ms=9, config=TopicConfig())
    assert (result.first_offset, result.last_offset, result.log_append_time) == (500, 504, -1)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (1004, 504)  # CreateTime: the producer's
    assert bytes(result.data[61:]) == data[61:]  # compressed payload untouched
    batch, rows = their_view(result.data)
    assert [r[0] for r in rows] == list(range(500, 505))
    assert [r[1] for r in rows] == [1000 + i for i in range(5)]


def test_log_append_time_topic_stamps_the_broker_time():
    config = TopicConfig.from_kafka({"message.timestamp.type": "LogAppendTime"})
    data = produced("lz4")
    result = assign_offsets(inspect_produced(data, config), next_offset=0, now_ms=77_777, config=config)
    assert (result.log_append_time, result.max_timestamp, result.last_offset) == (77_777, 77_777, 4)
    assert bytes(result.data[61:]) == data[61:]
    batch, rows = their_view(result.data)
    assert batch.timestamp_type == 1
    assert {r[1] for r in rows} == {77_777}


def test_topic_codec_recompresses_and_keeps_producer_state():
    config = TopicConfig.from_kafka({"compression.type": "gzip"})
    data = produced("snappy", producer_id=5, producer_epoch=1, base_sequence=3)
    result = assign_offsets(inspect_produced(data, config), next_offset=10, now_ms=0, config=config)
    assert (result.first_offset, result.last_offset, result.max_timestamp) == (10, 14, 1004)
    batch, rows = their_view(result.data)
    assert batch.compression_type == Compression.GZIP
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (5, 1, 3)
    assert [(r[0], r[2]) for r in rows] == [(10 + i, b"k%d" % i) for i in range(5)]


@pytest.mark.parametrize("configs, fragment", [
    ({"no.such.config": "1"}, "unknown topic config"),
    ({"segment.bytes": "many"}, "segment.bytes"),
    ({"message.timestamp.type": "BrokerTime"}, "message.timestamp.type"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"retention.ms": "-7"}, "retention"),
    ({"segment.bytes": str(2**31)}, "segment.bytes"),  # Kafka's INT, as its ConfigDef parses it
    ({"retention.ms": str(2**63)}, "retention.ms"),  # a LONG
    ({"message.timestamp.after.max.ms": "-1"}, "message.timestamp"),
])
def test_bad_topic_configs_name_the_field(configs, fragment):
    with pytest.raises(ApiError) as info:
        TopicConfig.from_kafka(configs)
    assert info.value.code == 40 and fragment in info.value.message


def test_producer_state_follows_kafka_rules():
    table = ProducerStateTable()
    assert table.check(7, 0, 0, 4) is None
    table.record(7, 0, BatchMetadata(0, 4, 100, 104, -1), now_ms=0)
    assert table.check(7, 0, 0, 4) == BatchMetadata(0, 4, 100, 104, -1)  # duplicate of a retained batch
    assert table.check(7, 0, 5, 9) is None
    with pytest.raises(ApiError) as gap:
        table.check(7, 0, 6, 9)
    assert gap.value.code == 45
    table.record(7, 3, BatchMetadata(0, 0, 200, 200, -1), now_ms=0)  # a new epoch starts over at sequence 0
    with pytest.raises(ApiError) as fenced:
        table.check(7, 2, 1, 1)
    assert fenced.value.code == 47
    assert table.check(-1, -1, -1, -1) is None  # non-idempotent producers are never checked


INVALID_TIMESTAMP, INVALID_RECORD = 32, 87
NOW = 10_000_000


def timed(*times: int, **options) -> bytes:
    return kcodecs.build_batch([Record(key=b"k", value=b"v", timestamp=t) for t in times], compression="lz4", **options)


@pytest.mark.parametrize("configs, times, refused", [
    ({}, (NOW + 3_600_000,), False),  # Kafka 4's message.timestamp.after.max.ms: an hour ahead at most
    ({}, (NOW, NOW + 3_600_001), True),
    ({}, (0, 1), False),  # and no limit behind
    ({"message.timestamp.after.max.ms": "0"}, (NOW + 1,), True),
    ({"message.timestamp.before.max.ms": "1000"}, (NOW, NOW - 1000), False),
    ({"message.timestamp.before.max.ms": "1000"}, (NOW, NOW - 1001, NOW), True),  # not the first record's: read
    ({"message.timestamp.before.max.ms": "1000"}, (-1, NOW), False),  # "no timestamp" is not checked
    ({"message.timestamp.type": "LogAppendTime"}, (NOW + 10**9,), False),  # the broker's time replaces it
])
def test_create_times_must_lie_within_the_topic_limits(configs, times, refused):
    config = TopicConfig.from_kafka(configs)
    batch = inspect_produced(timed(*times), config)
    if refused:
        with pytest.raises(ApiError) as info:
            check_timestamps(batch, config, NOW)
        assert info.value.code == INVALID_TIMESTAMP
    else:
        check_timestamps(batch, config, NOW)


def test_a_log_append_time_topic_refuses_batches_claiming_log_append_time():
    config = TopicConfig.from_kafka({"message.timestamp.type": "LogAppendTime"})
    batch = inspect_produced(timed(NOW, timestamp_type=kcodecs.TimestampType.LOG_APPEND_TIME), config)
    with pytest.raises(ApiError) as info:
        check_timestamps(batch, config, NOW)
    assert info.value.code == INVALID_TIMESTAMP


def test_a_producer_id_without_a_sequence_is_an_invalid_record():
    # Kafka's LogValidator.validateBatch: such a batch could be neither deduplicated nor ordered.
    with pytest.raises(ApiError) as info:
        inspect_produced(produced(producer_id=5, producer_epoch=0, base_sequence=-1), TopicConfig())
    assert info.value.code == INVALID_RECORD
