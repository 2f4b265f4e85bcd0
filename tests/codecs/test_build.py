"""The builder's contract: what it refuses (and with which typed error), how it names codecs,
control and LogAppendTime batches read by kafka-python, and the delete-horizon bit."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import ControlRecord, DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

import kcodecs
from kcodecs import Compression, InvalidRecordError, Record, TimestampType, UnsupportedCodecError

from conftest import sample_records

INT64_MAX = (1 << 63) - 1


def their_batches(data: bytes) -> list:
    return list(MemoryRecords(bytes(data)))


# --- refusals ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_empty_record_list(magic):
    with pytest.raises(InvalidRecordError):
        kcodecs.build_batch([], magic=magic)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("headers", [[("h", b"v")], [("h", None)]])
def test_headers_need_magic_2(magic, headers):
    records = [Record(value=b"a", timestamp=1), Record(value=b"b", timestamp=2, headers=headers)]
    with pytest.raises(InvalidRecordError, match="magic 2"):
        kcodecs.build_batch(records, magic=magic)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", ["zstd", "ZSTD", Compression.ZSTD, 4])
def test_zstd_needs_magic_2(magic, codec):
    with pytest.raises(UnsupportedCodecError):
        kcodecs.build_batch([Record(value=b"a", timestamp=1)], magic=magic, compression=codec)


def test_log_append_time_needs_timestamps():
    with pytest.raises(InvalidRecordError):
        kcodecs.build_batch([Record(value=b"a", timestamp=1)], magic=0, timestamp_type=TimestampType.LOG_APPEND_TIME,
                            max_timestamp=5)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(
    "kwargs",
    [{"transactional": True}, {"producer_id": 7}, {"producer_id": 7, "producer_epoch": 0, "base_sequence": 0},
     {"control": True}, {"producer_epoch": 3}, {"base_sequence": 9}, {"partition_leader_epoch": 2}],
    ids=lambda kw: ",".join(kw),
)
def test_v2_only_fields_are_refused_for_legacy_magics(magic, kwargs):
    """The format has nowhere to put them, so they must not be dropped silently."""
    with pytest.raises(InvalidRecordError):
        kcodecs.build_batch([Record(value=b"a", timestamp=1)], magic=magic, **kwargs)


@pytest.mark.parametrize("magic", [-1, 3, 99])
def test_unknown_magic(magic):
    with pytest.raises(InvalidRecordError):
        kcodecs.build_batch([Record(value=b"a", timestamp=1)], magic=magic)


@pytest.mark.parametrize(
    ("magic", "kwargs", "records"),
    [
        (2, {"producer_epoch": 1 << 20}, None),
        (2, {"producer_epoch": -(1 << 15) - 1}, None),
        (2, {"base_sequence": 1 << 31}, None),
        (2, {"partition_leader_epoch": 1 << 31}, None),
        (2, {"producer_id": 1 << 63, "producer_epoch": 0}, None),
        (2, {"base_offset": 1 << 63}, None),
        (2, {"max_timestamp": 1 << 63}, None),
        (2, {}, [Record(value=b"a", timestamp=1 << 63)]),
        (2, {}, [Record(value=b"a", timestamp=-(1 << 63) - 1)]),
        (1, {"base_offset": -(1 << 63) - 1}, None),
        (1, {"base_offset": INT64_MAX, "compression": "gzip"}, [Record(value=b"a", timestamp=1)] * 2),
        (0, {"base_offset": 1 << 64}, None),
        (1, {}, [Record(value=b"a", timestamp=1 << 63)]),
        (1, {"timestamp_type": TimestampType.LOG_APPEND_TIME, "max_timestamp": 1 << 63}, None),
    ],
)
def test_out_of_range_fields(magic, kwargs, records):
    records = records or [Record(value=b"a", timestamp=1)]
    with pytest.raises(InvalidRecordError):
        kcodecs.build_batch(records, magic=magic, **kwargs)


def test_timestamp_deltas_beyond_int64_are_refused():
    """v2 stores timestamps as varlong deltas from the first: one that does not fit 64 bits would
    silently wrap (the record would read back with another timestamp)."""
    for timestamps in ([-1, INT64_MAX], [INT64_MAX, -2], [-(1 << 63), 0]):
        records = [Record(value=b"v", timestamp=t) for t in timestamps]
        with pytest.raises(InvalidRecordError):
            kcodecs.build_batch(records)
    # Wide but representable deltas round trip, read by kafka-python too.
    records = [Record(value=b"v", timestamp=t) for t in (0, INT64_MAX, 5)]
    data = kcodecs.build_batch(records)
    assert [r.timestamp for r in kcodecs.read_batch(data).records()] == [0, INT64_MAX, 5]
    assert [r.timestamp for r in their_batches(data)[0]] == [0, INT64_MAX, 5]


@pytest.mark.parametrize(
    "header",
    [
        ["k", b"v"],  # a list, not a tuple
        ("k",),
        ("k", b"v", b"extra"),
        (b"k", b"v"),  # key must be str
        (None, b"v"),
        ("k", "v"),  # value must be bytes or None
        ("k", 5),
        ("\ud800", b"v"),  # a lone surrogate has no UTF-8 encoding
        "k=v",
    ],
)
def test_bad_header_shapes(header):
    records = [Record(value=b"a", timestamp=1, headers=[("ok", b"1"), header])]
    with pytest.raises(InvalidRecordError):
        kcodecs.build_batch(records)


def test_header_values_may_be_any_bytes_like():
    records = [Record(value=b"a", timestamp=1, headers=[("a", bytearray(b"x")), ("b", memoryview(b"yz")), ("c", b"")])]
    (theirs,) = their_batches(kcodecs.build_batch(records))
    assert list(next(iter(theirs)).headers) == [("a", b"x"), ("b", b"yz"), ("c", b"")]


@pytest.mark.parametrize("timestamp_type", [2, 7, -2, "create"])
def test_unknown_timestamp_type(timestamp_type):
    with pytest.raises(InvalidRecordError):
        kcodecs.build_batch([Record(value=b"a", timestamp=1)], timestamp_type=timestamp_type)


# --- codec names ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_compression_accepts_name_member_and_id(magic):
    records = sample_records(magic, count=8)
    built = {
        repr(codec): kcodecs.build_batch(records, magic=magic, compression=codec)
        for codec in ("lz4", "LZ4", " lz4 ", Compression.LZ4, 3)
    }
    assert len(set(built.values())) == 1, "every spelling builds the same bytes"
    (data,) = set(built.values())
    (theirs,) = their_batches(data)
    assert theirs.compression_type == 3  # Kafka's CompressionType id for lz4
    assert kcodecs.read_batch(data).compression is Compression.LZ4


@pytest.mark.parametrize("codec", ["brotli", "", 5, 7, -1, True, None, 1.0])
def test_unknown_codecs(codec):
    with pytest.raises(UnsupportedCodecError):
        kcodecs.build_batch([Record(value=b"a", timestamp=1)], compression=codec)


# --- control and LogAppendTime batches, read by kafka-python ---------------------------------------------------


@pytest.mark.parametrize("kind", list(kcodecs.ControlType))
def test_control_batch_round_trip(kind):
    marker = kcodecs.control_record(kind, coordinator_epoch=42, timestamp=1_700_000_000_123)
    data = kcodecs.build_batch([marker], control=True, transactional=True, producer_id=99, producer_epoch=4,
                               base_sequence=-1, base_offset=310)
    (theirs,) = their_batches(data)
    assert theirs.validate_crc() and theirs.is_control_batch and theirs.is_transactional
    (record,) = list(theirs)
    assert isinstance(record, ControlRecord)
    assert (record.version, record.type) == (0, int(kind))  # key: version int16 0, type int16
    assert (record.abort, record.commit) == (kind is kcodecs.ControlType.ABORT, kind is kcodecs.ControlType.COMMIT)
    assert struct.unpack(">hi", record.value) == (0, 42)  # EndTransactionMarker: version, coordinator epoch
    assert (record.offset, record.timestamp) == (310, 1_700_000_000_123)
    ours = kcodecs.read_batch(data)
    assert ours.is_control and ours.is_transactional and (ours.producer_id, ours.producer_epoch) == (99, 4)
    (read,) = ours.records()
    assert kcodecs.parse_control_record(read) == (kind, 42)


@pytest.mark.parametrize(("magic", "codec"), [(2, "none"), (2, "gzip"), (2, "zstd"), (1, "none"), (1, "snappy"),
                                              (1, "lz4")])
def test_log_append_time_batch_built_with_max_timestamp(magic, codec):
    records = sample_records(magic, count=5)
    broker_time = 1_750_000_000_000
    data = kcodecs.build_batch(records, magic=magic, compression=codec, base_offset=20,
                               timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=broker_time)
    batches = their_batches(data)
    assert all(b.timestamp_type == 1 for b in batches)
    got = [(r.offset, r.timestamp, r.key, r.value) for b in batches for r in b]
    assert got == [(20 + i, broker_time, r.key, r.value) for i, r in enumerate(records)]
    ours = list(kcodecs.iter_batches(data))
    assert all(b.timestamp_type is TimestampType.LOG_APPEND_TIME and b.max_timestamp == broker_time for b in ours)
    if magic == 2:
        (theirs,) = batches
        assert theirs.max_timestamp == broker_time
        assert theirs.first_timestamp == records[0].timestamp  # create times stay in the deltas


def test_create_time_max_timestamp_is_the_largest_not_the_last():
    records = [Record(value=b"v", timestamp=t) for t in (30, 90, 10, 60)]
    for magic, codec in [(2, "none"), (2, "lz4"), (1, "gzip")]:
        (theirs,) = their_batches(kcodecs.build_batch(records, magic=magic, compression=codec))
        assert kcodecs.read_batch(kcodecs.build_batch(records, magic=magic, compression=codec)).max_timestamp == 90
        if isinstance(theirs, DefaultRecordBatch):
            assert (theirs.first_timestamp, theirs.max_timestamp) == (30, 90)


# --- delete horizon (KIP-534) ------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_delete_horizon_bit(codec):
    records = sample_records(2, count=4)
    data = bytearray(kcodecs.build_batch(records, compression=codec, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                         max_timestamp=5_000))
    plain = kcodecs.read_batch(bytes(data))
    assert not plain.has_delete_horizon
    (attributes,) = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, attributes | 0x40)  # bit 6: baseTimestamp is the delete horizon
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    batch = kcodecs.read_batch(bytes(data))
    assert batch.has_delete_horizon
    batch.validate(deep=True)
    # The other attribute bits read as before.
    assert (batch.compression, batch.timestamp_type, batch.is_transactional, batch.is_control) == (
        plain.compression, plain.timestamp_type, plain.is_transactional, plain.is_control)
    (theirs,) = their_batches(bytes(data))
    assert theirs.validate_crc() and len(list(theirs)) == 4
