"""kcodecs against kafka-python's record classes, an independent implementation of the formats.

Both directions, every magic x codec: what we build they read (CRC included), what they
build we read; and after each in-place patch they still validate and see the new value.
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.legacy_records import LegacyRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

import kcodecs
from kcodecs import Compression, Record, TimestampType

from conftest import sample_records

pytestmark = pytest.mark.interop

CODEC_ID = {name: int(Compression.parse(name)) for name in ("none", "gzip", "snappy", "lz4", "zstd")}


def their_batches(data: bytes) -> list:
    records = MemoryRecords(bytes(data))
    batches = []
    while records.has_next():
        batches.append(records.next_batch())
    return batches


def their_records(data: bytes) -> list[tuple]:
    out = []
    for batch in their_batches(data):
        if isinstance(batch, DefaultRecordBatch):
            assert batch.validate_crc()
        for record in batch:
            if isinstance(batch, LegacyRecordBatch):
                assert record.validate_crc()
            headers = [(k, v) for k, v in record.headers]
            timestamp = -1 if record.timestamp is None else record.timestamp  # kafka-python: None for v0
            out.append((record.offset, timestamp, record.key, record.value, headers))
    return out


def our_records(data: bytes) -> list[tuple]:
    out = []
    for batch in kcodecs.iter_batches(data):
        batch.validate(deep=True)
        for r in batch.records():
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


def expected(records: list[Record], magic: int, base_offset: int) -> list[tuple]:
    return [
        (base_offset + i, r.timestamp if magic > 0 else -1, r.key, r.value, list(r.headers))
        for i, r in enumerate(records)
    ]


def test_they_read_what_we_build(magic_codec):
    magic, codec = magic_codec
    records = sample_records(magic)
    data = kcodecs.build_batch(records, magic=magic, compression=codec, base_offset=1000)
    assert their_records(data) == expected(records, magic, 1000)
    for batch in their_batches(data):
        assert batch.compression_type == CODEC_ID[codec]


def test_we_read_what_they_build(magic_codec):
    magic, codec = magic_codec
    records = sample_records(magic)
    builder = MemoryRecordsBuilder(magic, CODEC_ID[codec], batch_size=1 << 20, offset=500)
    for r in records:
        assert builder.append(r.timestamp, r.key, r.value, list(r.headers)) is not None
    builder.close()
    data = builder.buffer()
    assert our_records(data) == expected(records, magic, 500)
    batch = next(kcodecs.iter_batches(data))
    assert batch.compression is Compression.parse(codec)
    assert batch.magic == magic
    if magic == 2:
        # kafka-python keeps baseOffset 0 and puts the offset in the deltas.
        assert batch.last_offset == 500 + len(records) - 1
    elif codec != "none":
        # kafka-python writes a producer-side wrapper: offset 0, to be assigned by the broker.
        assert (batch.last_offset, batch.base_offset) == (0, 500)


def test_keys_alone_match_the_keys_they_read(magic_codec):
    magic, codec = magic_codec
    builder = MemoryRecordsBuilder(magic, CODEC_ID[codec], batch_size=1 << 20, offset=0)
    for r in sample_records(magic):
        builder.append(r.timestamp, r.key, r.value, list(r.headers))
    builder.close()
    data = builder.buffer()
    ours = [key for batch in kcodecs.iter_batches(data) for key in batch.keys()]
    assert ours == [record[2] for record in their_records(data)]


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_record_contents_are_the_bytes_they_wrote_for_key_value_and_headers(codec):
    """kafka-python encodes the records; the contents kcodecs slices out of them are what
    :func:`kcodecs.record_content` makes of the fields kafka-python reads back."""
    builder = MemoryRecordsBuilder(2, CODEC_ID[codec], batch_size=1 << 20, offset=0)
    for r in sample_records(2):
        builder.append(r.timestamp, r.key, r.value, list(r.headers))
    builder.close()
    data = builder.buffer()
    ours = [(offset, timestamp, key, bytes(content))
            for batch in kcodecs.iter_batches(data) for offset, timestamp, key, content in batch.record_contents()]
    assert ours == [(offset, timestamp, key, kcodecs.record_content(key, value, headers))
                    for offset, timestamp, key, value, headers in their_records(data)]


def test_uncompressed_legacy_sets_are_one_batch_per_message():
    records = sample_records(1, count=5)
    data = kcodecs.build_batch(records, magic=1, compression="none", base_offset=10)
    batches = list(kcodecs.iter_batches(data))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(10 + i, 10 + i) for i in range(5)]
    assert len(their_batches(data)) == 5


def test_v2_header_fields_match_theirs():
    records = [Record(key=None, value=b"v%d" % i, timestamp=1000 + i) for i in range(4)]
    data = kcodecs.build_batch(
        records, compression="lz4", base_offset=42, producer_id=7, producer_epoch=3, base_sequence=11,
        transactional=True, partition_leader_epoch=5,
    )
    ours = next(kcodecs.iter_batches(data))
    (theirs,) = their_batches(data)
    assert theirs.validate_crc()
    assert (ours.base_offset, ours.last_offset) == (theirs.base_offset, theirs.last_offset) == (42, 45)
    assert ours.producer_id == theirs.producer_id == 7
    assert ours.producer_epoch == theirs.producer_epoch == 3
    assert ours.base_sequence == theirs.base_sequence == 11
    assert ours.is_transactional and theirs.is_transactional
    assert ours.partition_leader_epoch == theirs.leader_epoch == 5
    assert ours.max_timestamp == theirs.max_timestamp == 1003
    assert ours.record_count == theirs.records_count == 4
    assert ours.has_no_keys_flag


def test_control_batch_is_read_as_a_marker_by_them():
    marker = kcodecs.control_record(kcodecs.ControlType.COMMIT, coordinator_epoch=9, timestamp=5)
    data = kcodecs.build_batch([marker], control=True, transactional=True, producer_id=1, producer_epoch=0)
    (theirs,) = their_batches(data)
    assert theirs.is_control_batch
    (record,) = list(theirs)
    assert record.commit and not record.abort
    ours = next(kcodecs.iter_batches(data))
    assert ours.is_control and not ours.has_no_keys_flag
    assert kcodecs.parse_control_record(next(ours.records())) == (kcodecs.ControlType.COMMIT, 9)


def test_log_append_time_records_take_the_batch_time():
    records = [Record(value=b"a", timestamp=10), Record(value=b"b", timestamp=20)]
    for magic, codec in [(2, "zstd"), (2, "none"), (1, "gzip")]:
        data = bytearray(kcodecs.build_batch(records, magic=magic, compression=codec))
        kcodecs.set_log_append_time(data, 99_000)
        (theirs,) = their_batches(data)
        assert theirs.timestamp_type == 1
        assert [r.timestamp for r in theirs] == [99_000, 99_000]
        assert [r.timestamp for r in next(kcodecs.iter_batches(data)).records()] == [99_000, 99_000]


# --- in-place patches, checked by the other implementation -------------------------------------------------


def _v2(codec: str = "zstd") -> bytearray:
    records = sample_records(2, count=6)
    return bytearray(kcodecs.build_batch(records, compression=codec, producer_id=77, producer_epoch=2, base_sequence=40,
                                         transactional=True))


@pytest.mark.parametrize("patch, value, read, expected", [
    (kcodecs.set_base_offset, 123_456_789, lambda theirs: (theirs.base_offset, [r.offset for r in theirs]),
     (123_456_789, list(range(123_456_789, 123_456_789 + 6)))),
    (kcodecs.set_partition_leader_epoch, 31, lambda theirs: theirs.leader_epoch, 31),
], ids=["set_base_offset", "set_partition_leader_epoch"])
def test_header_patch(patch, value, read, expected):
    data = _v2()
    crc_before = bytes(data[17:21])
    patch(data, value)
    (theirs,) = their_batches(data)
    assert theirs.validate_crc() and read(theirs) == expected
    assert bytes(data[17:21]) == crc_before  # outside the CRC: left alone


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_set_and_clear_log_append_time_v2(codec):
    data = _v2(codec)
    payload = bytes(data[61:])
    kcodecs.set_log_append_time(data, 1_800_000_000_000)
    (theirs,) = their_batches(data)
    assert theirs.validate_crc()
    assert theirs.timestamp_type == 1 and theirs.max_timestamp == 1_800_000_000_000
    assert bytes(data[61:]) == payload
    kcodecs.clear_log_append_time(data)
    (theirs,) = their_batches(data)
    assert theirs.validate_crc() and theirs.timestamp_type == 0
    assert [r.timestamp for r in theirs] == [r.timestamp for r in sample_records(2, count=6)]


def test_clear_producer_state_patch():
    data = _v2()
    kcodecs.clear_producer_state(data)
    (theirs,) = their_batches(data)
    assert theirs.validate_crc()
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (-1, -1, -1)
    assert not theirs.is_transactional
    assert len(list(theirs)) == 6


@pytest.mark.parametrize("codec", ["none", "snappy", "lz4"])
def test_v1_patches(codec):
    records = sample_records(1, count=5)
    data = bytearray(kcodecs.build_batch(records, magic=1, compression=codec))
    first = memoryview(data)[: next(kcodecs.iter_batches(data)).size]
    kcodecs.set_wrapper_offset(first, 1004)
    kcodecs.set_log_append_time(first, 5_000)
    batch = their_batches(bytes(first))[0]
    assert batch.validate_crc() and batch.timestamp_type == 1
    theirs = list(batch)
    assert all(r.validate_crc() for r in theirs)
    last = 1004
    expected_offsets = [last] if codec == "none" else list(range(last - 4, last + 1))
    assert [r.offset for r in theirs] == expected_offsets
    assert all(r.timestamp == 5_000 for r in theirs)
    assert kcodecs.read_batch(first).validate() is None


def _with_hole(magic: int, hole: int) -> bytes:
    """Two gzip records written by kafka-python with ``hole`` offsets between them, as
    compaction leaves them."""
    builder = MemoryRecordsBuilder(magic, CODEC_ID["gzip"], batch_size=1 << 20, offset=0)
    builder.append(1, b"k", b"a")
    builder.skip(hole)
    builder.append(2, b"k", b"b")
    builder.close()
    return builder.buffer()


def test_compacted_batch_reports_holes():
    compacted = _with_hole(2, 3)
    (batch,) = kcodecs.iter_batches(compacted)
    assert [r.offset for r in batch.records()] == [0, 4]
    assert list(batch.offsets_and_keys()) == [(r.offset, r.key) for r in their_batches(compacted)[0]]
    assert not batch.has_contiguous_offsets()
    dense = next(kcodecs.iter_batches(kcodecs.build_batch([Record(value=b"x", timestamp=0)] * 3)))
    assert dense.has_contiguous_offsets()
    (wrapper,) = kcodecs.iter_batches(_with_hole(1, 2))
    assert not wrapper.has_contiguous_offsets()
    assert [r.offset for r in wrapper.records()] == [0, 3]


def test_no_keys_flag_is_ignored_by_them_and_set_only_without_keys():
    keyless = kcodecs.build_batch([Record(value=b"v", timestamp=1)] * 3, compression="snappy")
    keyed = kcodecs.build_batch([Record(key=b"k", value=b"v", timestamp=1)], compression="snappy")
    unmarked = kcodecs.build_batch([Record(value=b"v", timestamp=1)], compression="snappy", mark_no_keys=False)
    assert next(kcodecs.iter_batches(keyless)).has_no_keys_flag
    assert not next(kcodecs.iter_batches(keyed)).has_no_keys_flag
    assert not next(kcodecs.iter_batches(unmarked)).has_no_keys_flag
    (theirs,) = their_batches(keyless)
    assert theirs.validate_crc() and theirs.compression_type == 2
    assert [r.value for r in theirs] == [b"v"] * 3
    assert theirs.timestamp_type == TimestampType.CREATE_TIME


# --- what the log cleaner writes, read by the other implementation ----------------------------------------


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_retained_records_keep_their_offsets_and_the_producer_header(codec):
    records = [Record(key=b"k%d" % (i % 3), value=None if i == 4 else b"v%d" % i, timestamp=1000 + i,
                      headers=[("h", b"%d" % i)]) for i in range(6)]
    data = kcodecs.build_batch(records, compression=codec, base_offset=300, producer_id=9, producer_epoch=4,
                               base_sequence=70, transactional=True, partition_leader_epoch=2)
    batch = next(kcodecs.iter_batches(data))
    kept = [r for r in batch.records() if r.offset in (301, 304, 305)]
    cleaned = kcodecs.retain_records(batch, kept)
    (theirs,) = their_batches(cleaned)
    assert theirs.validate_crc() and theirs.compression_type == CODEC_ID[codec]
    # The header still describes the whole original batch: offsets 300..305, sequences 70..75.
    assert (theirs.base_offset, theirs.last_offset, theirs.base_sequence) == (300, 305, 70)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.leader_epoch) == (9, 4, 2)
    assert theirs.is_transactional and theirs.records_count == 3
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs] == [
        (r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in kept]
    assert theirs.max_timestamp == 1005


def test_a_delete_horizon_moves_the_base_timestamp_but_not_the_record_times():
    records = [Record(key=b"a", value=None, timestamp=5_000), Record(key=b"b", value=b"x", timestamp=5_007)]
    batch = next(kcodecs.iter_batches(kcodecs.build_batch(records, compression="gzip", base_offset=10)))
    cleaned = next(kcodecs.iter_batches(kcodecs.retain_records(batch, list(batch.records()), delete_horizon_ms=90_000)))
    assert cleaned.has_delete_horizon and cleaned.base_timestamp == 90_000
    (theirs,) = their_batches(bytes(cleaned.raw))
    assert theirs.validate_crc()
    assert theirs.first_timestamp == 90_000  # kafka-python reads the field; it does not interpret bit 6
    assert [(r.offset, r.timestamp, r.value) for r in theirs] == [(10, 5_000, None), (11, 5_007, b"x")]
    # A second clean keeps the horizon the first one set.
    again = next(kcodecs.iter_batches(kcodecs.retain_records(cleaned, list(cleaned.records())[1:], delete_horizon_ms=1)))
    assert again.base_timestamp == 90_000 and [r.timestamp for r in again.records()] == [5_007]


def test_an_empty_header_keeps_the_producer_sequence_range():
    records = [Record(key=b"k", value=b"v", timestamp=77 + i) for i in range(4)]
    batch = next(kcodecs.iter_batches(kcodecs.build_batch(
        records, compression="snappy", base_offset=50, producer_id=3, producer_epoch=1, base_sequence=8)))
    empty = kcodecs.empty_batch(batch)
    (theirs,) = their_batches(empty)
    assert theirs.validate_crc() and theirs.compression_type == 0
    assert (theirs.base_offset, theirs.last_offset, theirs.base_sequence, theirs.records_count) == (50, 53, 8, 0)
    assert (theirs.first_timestamp, theirs.max_timestamp) == (80, 80)
    assert list(theirs) == []
    ours = next(kcodecs.iter_batches(empty))
    ours.validate(deep=True)
    assert ours.size == 61 and list(ours.records()) == []


def test_retained_records_must_be_the_batch_own_in_order():
    batch = next(kcodecs.iter_batches(kcodecs.build_batch([Record(key=b"k", value=b"v", timestamp=1)] * 3,
                                                          base_offset=7)))
    records = list(batch.records())
    for bad in ([], records[::-1], [Record(key=b"k", value=b"v", timestamp=1, offset=10)]):
        with pytest.raises(kcodecs.InvalidRecordError):
            kcodecs.retain_records(batch, bad)
