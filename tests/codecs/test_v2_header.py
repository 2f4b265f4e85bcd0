"""``V2Batch.header()``: every field in one read, equal to what the properties read, and a
snapshot that does not follow later in-place patches."""

from __future__ import annotations

import pytest

import kcodecs
from kcodecs import Compression, Record, TimestampType

RECORDS = [Record(key=b"k%d" % i, value=b"v" * i, timestamp=1_700_000_000_000 + i) for i in range(5)]


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("transactional", [False, True])
def test_header_fields_equal_the_properties(codec, transactional):
    data = kcodecs.build_batch(RECORDS, compression=codec, base_offset=42, producer_id=7, producer_epoch=3,
                               base_sequence=100, transactional=transactional, partition_leader_epoch=9,
                               timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=1_800_000_000_000)
    batch = kcodecs.read_batch(data)
    header = batch.header()
    for field in ("base_offset", "partition_leader_epoch", "magic", "crc", "attributes", "last_offset_delta",
                  "base_timestamp", "max_timestamp", "producer_id", "producer_epoch", "base_sequence",
                  "record_count", "last_offset", "is_transactional", "is_control"):
        assert getattr(header, field) == getattr(batch, field), field
    assert header.batch_length + 12 == batch.size


def test_attributes_read_unsigned_as_the_property_does():
    buf = bytearray(kcodecs.build_batch(RECORDS))
    buf[21] |= 0x80  # attribute bit 15, unused by Kafka: set, the int16 would read negative
    batch = kcodecs.V2Batch(memoryview(buf))
    assert batch.header().attributes == batch.attributes > 0x7FFF


def test_header_is_a_snapshot_of_the_bytes_when_read():
    buf = bytearray(kcodecs.build_batch(RECORDS, base_offset=0))
    batch = kcodecs.read_batch(buf)
    before = batch.header()
    kcodecs.set_base_offset(buf, 1000)
    assert (before.base_offset, before.last_offset) == (0, 4)
    assert (batch.header().base_offset, batch.header().last_offset, batch.last_offset) == (1000, 1004, 1004)
