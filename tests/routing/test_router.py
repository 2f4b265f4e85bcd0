"""route_batch, one class at a time, with outgoing batches read back by kafka-python.

kafka-python's ``DefaultRecordBatch`` (CRC, header fields, records) and its murmur2 are the
independent checks: every outgoing batch must validate there, carry base offset 0, no
producer state, no leader epoch and CreateTime, and every keyed record must sit on the
partition kafka-python's partitioner picks. Forwarded batches must keep every byte the
rewrites may not touch, compressed payload included. Every call checks that the source
buffer is left as it was.
"""

from __future__ import annotations

import itertools
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as their_murmur2
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kcodecs
from kcodecs import (
    NO_KEYS_MASK,
    Compression,
    ControlType,
    CorruptBatchError,
    DecompressionLimitError,
    KMirrorError,
    Record,
    TimestampType,
    V2Batch,
    control_record,
)
from mirror.routing import Outgoing, Partitioning, RouteClass, Routed, RoutingError, RoutingPolicy, route_batch

from conftest import sample_records

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
LEGACY_CODECS = ["none", "gzip", "snappy", "lz4"]
T0 = 1_700_000_000_000
APPEND_TIME = 1_800_000_000_000  # the source broker's LogAppendTime
BASE_OFFSET = 1000
LAT_TRANSACTIONAL_HORIZON = 0x08 | 0x10 | 0x40  # the attribute bits the rewrites may clear


# ---- helpers ---------------------------------------------------------------------------------


def source(records: list[Record], codec: str = "none", **options) -> bytearray:
    """A v2 source batch as a fetch returns it: a real offset, a leader epoch, an idempotent producer."""
    options = {"base_offset": BASE_OFFSET, "partition_leader_epoch": 3, "producer_id": 77,
               "producer_epoch": 2, "base_sequence": 40, **options}
    return bytearray(kcodecs.build_batch(records, compression=codec, **options))


def route(data: bytearray, partition: int, **policy) -> Routed:
    before = bytes(data)
    routed = route_batch(kcodecs.read_batch(data), partition, RoutingPolicy(**policy))
    assert bytes(data) == before, "the source buffer was written"
    for out in routed.outgoing:
        assert isinstance(out.data, bytearray)
    if isinstance(kcodecs.read_batch(before), V2Batch):
        assert routed.records == kcodecs.read_batch(before).record_count
    assert routed.source_bytes == len(before)
    return routed


def rows(records) -> list[tuple]:
    return [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp) for r in records]


def their_rows(out: Outgoing) -> list[tuple]:
    """Read an outgoing batch with kafka-python and check the destination-ready header."""
    batch = DefaultRecordBatch(bytes(out.data))
    assert batch.validate_crc()
    assert batch.magic == 2
    assert batch.base_offset == 0
    assert batch.leader_epoch == -1
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_transactional and not batch.is_control_batch
    assert batch.timestamp_type == 0  # CreateTime
    assert batch.records_count == out.records == batch.last_offset_delta + 1  # contiguous
    ours = kcodecs.read_batch(out.data)
    assert ours.size == len(out.data)
    ours.validate(deep=True)
    return rows(batch)


def their_partition(key: bytes, partitions: int) -> int:
    return (their_murmur2(key) & 0x7FFFFFFF) % partitions  # kafka-python's DefaultPartitioner


def keys_routing_to(partition: int, partitions: int, count: int) -> list[bytes]:
    keys = (b"key-%d" % i for i in itertools.count())
    return list(itertools.islice((k for k in keys if their_partition(k, partitions) == partition), count))


def assert_forwarded(out: Outgoing, src: bytearray) -> None:
    """Only baseOffset, the leader epoch, the CRC, the producer state and three attribute bits may differ."""
    data = out.data
    assert len(data) == len(src)
    assert data[8:12] == src[8:12]  # batchLength
    assert data[16] == src[16] == 2  # magic
    assert data[22] | LAT_TRANSACTIONAL_HORIZON == src[22] | LAT_TRANSACTIONAL_HORIZON  # attributes, low byte
    assert data[21] == src[21]  # attributes, high byte: the no-keys flag
    assert data[23:43] == src[23:43]  # lastOffsetDelta, baseTimestamp, maxTimestamp
    assert data[57:] == src[57:]  # recordCount and the (compressed) records, byte for byte


def with_crc(data: bytearray) -> bytearray:
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return data


def unkeyed(count: int = 12) -> list[Record]:
    return [Record(value=b"value-%d" % i * (i + 1), timestamp=T0 + 3 * i, headers=[("n", b"%d" % i)])
            for i in range(count)]


def compacted(codec: int, keys: list[bytes | None], offsets: list[int]) -> bytearray:
    """What a log cleaner leaves: offset deltas with holes (kafka-python writes the deltas it is given)."""
    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for key, offset in zip(keys, offsets):
        builder.append(offset, timestamp=T0 + offset, key=key, value=b"v%d" % offset, headers=[("h", b"x")])
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, BASE_OFFSET)  # outside the CRC
    return data


# ---- dropped ---------------------------------------------------------------------------------


def test_control_batch_is_dropped():
    marker = source([control_record(ControlType.COMMIT, coordinator_epoch=4)], control=True, transactional=True)
    for partitioning in Partitioning:
        routed = route(marker, 0, destination_partitions=2, partitioning=partitioning)
        assert (routed.route, routed.outgoing, routed.records) == (RouteClass.DROPPED, (), 1)


def test_batch_compacted_to_nothing_is_dropped():
    # The cleaner keeps an empty batch for its producer state: recordCount 0, lastOffsetDelta kept.
    data = bytearray(kcodecs.build_batch([Record(value=b"gone")], base_offset=BASE_OFFSET))[:61]
    struct.pack_into(">i", data, 8, 61 - 12)
    struct.pack_into(">i", data, 23, 4)  # lastOffsetDelta
    struct.pack_into(">i", data, 57, 0)  # recordCount
    routed = route(with_crc(data), 0, destination_partitions=1)
    assert (routed.route, routed.outgoing, routed.records) == (RouteClass.DROPPED, (), 0)


# ---- aborted ---------------------------------------------------------------------------------


@pytest.mark.parametrize("partitioning", list(Partitioning))
def test_batch_of_an_aborted_transaction_is_left_out(partitioning):
    data = source(sample_records(2, count=6, base_ts=T0), "lz4", transactional=True)
    routed = route(data, 0, destination_partitions=2, partitioning=partitioning)
    assert routed.route is not RouteClass.ABORTED  # one batch alone cannot tell
    routed = route_batch(kcodecs.read_batch(data), 0, RoutingPolicy(destination_partitions=2), aborted=True)
    assert (routed.route, routed.outgoing, routed.records, routed.source_bytes) == (RouteClass.ABORTED, (), 6, len(data))


def test_aborted_batch_is_checked_before_it_is_left_out():
    # A damaged header could make a committed batch look aborted: the CRC decides first.
    data = source(unkeyed(), "gzip", transactional=True)
    data[70] ^= 0x01
    with pytest.raises(CorruptBatchError, match="CRC"):
        route_batch(kcodecs.read_batch(data), 0, RoutingPolicy(destination_partitions=2), aborted=True)


# ---- passed through --------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
def test_no_keys_flag_passes_through(codec):
    records = unkeyed()
    data = source(records, codec)
    assert kcodecs.read_batch(data).has_no_keys_flag
    routed = route(data, 5, destination_partitions=3)
    assert routed.route is RouteClass.PASSED_THROUGH
    (out,) = routed.outgoing
    assert out.partition == 5 % 3
    assert_forwarded(out, data)
    assert their_rows(out) == rows(records)
    assert kcodecs.read_batch(out.data).has_no_keys_flag


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
def test_preserve_passes_keyed_batches_through(codec):
    records = sample_records(2, count=30, base_ts=T0)
    data = source(records, codec)
    routed = route(data, 3, destination_partitions=4, partitioning="preserve")
    assert routed.route is RouteClass.PASSED_THROUGH
    (out,) = routed.outgoing
    assert out.partition == 3
    assert_forwarded(out, data)
    assert their_rows(out) == rows(records)


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_pass_through_never_opens_the_payload(codec):
    # A payload that cannot decompress but carries a valid CRC: only a decoder would notice.
    data = source(unkeyed(), codec)
    data[61:] = bytes(range(256)) * 2
    struct.pack_into(">i", data, 8, len(data) - 12)
    with_crc(data)
    assert route(data, 0, destination_partitions=2).route is RouteClass.PASSED_THROUGH
    assert route(data, 1, destination_partitions=2, partitioning="preserve").route is RouteClass.PASSED_THROUGH
    data[21] &= ~(NO_KEYS_MASK >> 8)
    with pytest.raises(CorruptBatchError) as info:
        route(with_crc(data), 0, destination_partitions=2)
    assert info.value.offset == BASE_OFFSET


def test_preserve_needs_the_source_partition_at_the_destination():
    data = source(unkeyed())
    with pytest.raises(RoutingError, match="only 4") as info:
        route(data, 4, destination_partitions=4, partitioning="preserve")
    assert isinstance(info.value, KMirrorError) and isinstance(info.value, ValueError)
    with pytest.raises(RoutingError):
        route(data, -1, destination_partitions=4)


def test_forwards_only_its_own_batch_from_a_larger_buffer():
    first = source(unkeyed(3), "lz4")
    second = source(unkeyed(5), "zstd", base_offset=BASE_OFFSET + 3)
    fetched = bytearray(first + second + second[:20])  # a fetch response, cut off mid-batch
    batches = list(kcodecs.iter_batches(fetched))
    routed = route_batch(batches[1], 0, RoutingPolicy(destination_partitions=1))
    assert fetched == first + second + second[:20]
    assert_forwarded(routed.outgoing[0], second)


# ---- inspected -------------------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
def test_unflagged_unkeyed_batch_is_inspected_and_forwarded(codec):
    # What librdkafka or the Java client sends: no keys, but nothing says so in the header.
    records = unkeyed()
    data = source(records, codec, mark_no_keys=False)
    routed = route(data, 7, destination_partitions=3)
    assert routed.route is RouteClass.INSPECTED
    (out,) = routed.outgoing
    assert out.partition == 7 % 3
    assert_forwarded(out, data)
    assert their_rows(out) == rows(records)


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
def test_keys_already_routing_home_are_inspected_and_forwarded(codec):
    # Same partition count on both sides: every key of source partition 2 hashes to 2 again.
    keys = keys_routing_to(2, 5, 6)
    records = [Record(key=k, value=b"v", timestamp=T0) for k in keys * 2] + [Record(key=None, value=b"n", timestamp=T0)]
    data = source(records, codec)
    routed = route(data, 7, destination_partitions=5)
    assert routed.route is RouteClass.INSPECTED
    (out,) = routed.outgoing
    assert out.partition == 2
    assert_forwarded(out, data)
    assert their_rows(out) == rows(records)


@pytest.mark.interop
def test_keys_all_routing_to_one_other_partition_forward_whole():
    keys = keys_routing_to(4, 6, 5)
    records = [Record(key=k, value=b"v", timestamp=T0) for k in keys]
    routed = route(source(records, "snappy"), 1, destination_partitions=6)
    assert routed.route is RouteClass.INSPECTED
    assert [o.partition for o in routed.outgoing] == [4]
    # A null key goes home (1), so the batch no longer fits one partition.
    routed = route(source(records + [Record(value=b"n", timestamp=T0)], "snappy"), 1, destination_partitions=6)
    assert routed.route is RouteClass.REBUILT
    assert [(o.partition, o.records) for o in routed.outgoing] == [(1, 1), (4, 5)]


# ---- rebuilt ---------------------------------------------------------------------------------


def assert_split(routed: Routed, records: list[Record], home: int, partitions: int) -> None:
    """Each record on kafka-python's partition (null keys: home), each partition in source order."""
    assert routed.route is RouteClass.REBUILT
    assert routed.records == len(records) == sum(o.records for o in routed.outgoing)
    placed = [o.partition for o in routed.outgoing]
    assert placed == sorted(set(placed))
    for out in routed.outgoing:
        expected = [r for r in records
                    if (home if r.key is None else their_partition(r.key, partitions)) == out.partition]
        assert their_rows(out) == rows(expected)
        # build_batch flags exactly the groups without keys.
        assert kcodecs.read_batch(out.data).has_no_keys_flag == all(r.key is None for r in expected)


@pytest.mark.interop
@pytest.mark.parametrize("codec", CODECS)
def test_mixed_keys_are_rebuilt_split_by_partition(codec):
    records = sample_records(2, count=40, base_ts=T0)
    routed = route(source(records, codec, transactional=True), 2, destination_partitions=5)
    assert_split(routed, records, home=2, partitions=5)
    assert len(routed.outgoing) > 1
    for out in routed.outgoing:
        assert DefaultRecordBatch(bytes(out.data)).compression_type == int(Compression.parse(codec))


@pytest.mark.interop
def test_per_key_order_is_kept():
    records = [Record(key=b"user-%d" % (i % 7), value=b"%06d" % i, timestamp=T0 + i) for i in range(300)]
    routed = route(source(records, "lz4"), 0, destination_partitions=4)
    assert_split(routed, records, home=0, partitions=4)
    seen: dict[bytes, int] = {}
    for out in routed.outgoing:
        for key, value, _, _ in their_rows(out):
            assert key not in seen or seen[key] == out.partition, "a key on two partitions"
            seen[key] = out.partition
        for key in {k for k, *_ in their_rows(out)}:
            values = [v for k, v, *_ in their_rows(out) if k == key]
            assert values == sorted(values)


@pytest.mark.interop
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_legacy_sources_are_rebuilt_as_v2(magic, codec):
    records = sample_records(magic, count=15, base_ts=T0)
    data = bytearray(kcodecs.build_batch(records, magic=magic, compression=codec, base_offset=BASE_OFFSET))
    before = bytes(data)
    for partitioning, partitions in (("by-key", 3), ("preserve", 2)):
        routed = [route_batch(b, 1, RoutingPolicy(destination_partitions=partitions, partitioning=partitioning))
                  for b in kcodecs.iter_batches(data)]
        assert {r.route for r in routed} == {RouteClass.REBUILT}
        per_partition: dict[int, list[tuple]] = {}
        for r in routed:
            for out in r.outgoing:
                per_partition.setdefault(out.partition, []).extend(their_rows(out))
        expected: dict[int, list[tuple]] = {}
        for r in records:
            target = 1 if partitioning == "preserve" or r.key is None else their_partition(r.key, partitions)
            # v0 has no timestamps: the v2 batch carries NO_TIMESTAMP (-1), as Kafka's up-conversion does.
            timestamp = r.timestamp if magic == 1 else -1
            expected.setdefault(target, []).append((r.key, r.value, [], timestamp))
        assert per_partition == expected
        assert sum(r.records for r in routed) == len(records)
    assert bytes(data) == before


@pytest.mark.interop
@pytest.mark.parametrize("partitioning", list(Partitioning))
def test_compacted_batch_is_rebuilt_contiguous(partitioning):
    offsets = [0, 2, 3, 7, 11]
    data = compacted(int(Compression.GZIP), [None] * len(offsets), offsets)
    batch = kcodecs.read_batch(data)
    assert not batch.has_contiguous_offsets() and batch.last_offset_delta == 11
    routed = route(data, 1, destination_partitions=2, partitioning=partitioning)
    assert routed.route is RouteClass.REBUILT
    (out,) = routed.outgoing
    assert (out.partition, out.records) == (1, 5)
    assert their_rows(out) == [(None, b"v%d" % o, [("h", b"x")], T0 + o) for o in offsets]


@pytest.mark.interop
def test_compacted_keyed_batch_is_split():
    offsets = list(range(0, 60, 3))
    keys = [b"k%d" % (o % 11) for o in offsets]
    data = compacted(int(Compression.ZSTD), keys, offsets)
    records = list(kcodecs.read_batch(data).records())
    assert_split(route(data, 0, destination_partitions=3), records, home=0, partitions=3)


@pytest.mark.interop
@pytest.mark.parametrize("source_codec, wanted", [("gzip", "zstd"), ("zstd", "none"), ("none", "lz4"), ("lz4", "snappy")])
def test_requested_codec_forces_a_rebuild(source_codec, wanted):
    records = sample_records(2, count=20, base_ts=T0)
    data = source(records, source_codec)
    routed = route(data, 1, destination_partitions=2, partitioning="preserve", compression=wanted)
    assert routed.route is RouteClass.REBUILT
    (out,) = routed.outgoing
    assert out.partition == 1
    assert DefaultRecordBatch(bytes(out.data)).compression_type == int(Compression.parse(wanted))
    assert their_rows(out) == rows(records)
    # Flagged batches too, and the rebuilt batch keeps the flag.
    routed = route(source(unkeyed(), source_codec), 3, destination_partitions=2, compression=wanted)
    assert routed.route is RouteClass.REBUILT
    assert [o.partition for o in routed.outgoing] == [1]
    assert kcodecs.read_batch(routed.outgoing[0].data).has_no_keys_flag


def test_requesting_the_source_codec_changes_nothing():
    data = source(unkeyed(), "zstd")
    assert route(data, 0, destination_partitions=1, compression="zstd").route is RouteClass.PASSED_THROUGH


# ---- destination rewrites --------------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_a_source_cleaners_delete_horizon_is_cleared_and_every_record_keeps_its_time(codec):
    """A batch the source's cleaner rewrote carries a delete horizon (KIP-534: attribute bit 6,
    the horizon in the base timestamp). At the destination its tombstones have just arrived:
    the bit goes, so the destination's cleaner gives them its own delete.retention.ms, and the
    records' timestamps (read by kafka-python from the unchanged base and deltas) stay."""
    horizon = T0 + 86_400_000
    records = [Record(key=b"key-%d" % i, value=None if i % 3 == 0 else b"v%d" % i, timestamp=T0 + 7 * i)
               for i in range(9)]
    stored = kcodecs.read_batch(source(records, codec))
    cleaned = bytearray(kcodecs.retain_records(stored, list(stored.records()), delete_horizon_ms=horizon))
    assert cleaned[22] & 0x40 and kcodecs.read_batch(cleaned).base_timestamp == horizon
    routed = route(cleaned, 1, destination_partitions=2, partitioning="preserve")
    assert routed.route is RouteClass.PASSED_THROUGH
    (out,) = routed.outgoing
    assert_forwarded(out, cleaned)
    assert not out.data[22] & 0x40
    assert [(ts, value) for _, value, _, ts in their_rows(out)] == [(r.timestamp, r.value) for r in records]


@pytest.mark.interop
@pytest.mark.parametrize("case", ["passed-through", "preserved", "inspected", "rebuilt"])
def test_log_append_time_source_forwards_create_times(case):
    """Forwarded or rebuilt, the destination sees the producer's CreateTimes, not the source broker's time."""
    keyed = case in ("preserved", "rebuilt")
    records = [Record(key=b"key-%d" % i if keyed else None, value=b"v%d" % i, timestamp=T0 + 11 * i)
               for i in range(16)]
    data = source(records, "lz4", timestamp_type=TimestampType.LOG_APPEND_TIME,
                  max_timestamp=APPEND_TIME, mark_no_keys=case != "inspected")
    assert {r.timestamp for r in kcodecs.read_batch(data).records()} == {APPEND_TIME}
    policy = {"destination_partitions": 3, "partitioning": "preserve" if case == "preserved" else "by-key"}
    routed = route(data, 0, **policy)
    assert routed.route.value == ("passed-through" if case == "preserved" else case)
    timestamps = {}
    for out in routed.outgoing:
        timestamps.update({value: ts for _, value, _, ts in their_rows(out)})
    assert timestamps == {r.value: r.timestamp for r in records}


@pytest.mark.interop
def test_v1_log_append_time_wrapper_is_rebuilt_with_create_times():
    records = [Record(key=b"k%d" % i, value=b"v%d" % i, timestamp=T0 + i) for i in range(10)]
    data = kcodecs.build_batch(records, magic=1, compression="gzip", timestamp_type=TimestampType.LOG_APPEND_TIME,
                               max_timestamp=APPEND_TIME)
    routed = route(bytearray(data), 0, destination_partitions=1)
    assert routed.route is RouteClass.REBUILT
    assert their_rows(routed.outgoing[0]) == [(r.key, r.value, [], r.timestamp) for r in records]


@pytest.mark.interop
@pytest.mark.parametrize("keyed, flagged, partitioning, expected", [
    (False, True, "by-key", RouteClass.PASSED_THROUGH),
    (True, False, "preserve", RouteClass.PASSED_THROUGH),
    (False, False, "by-key", RouteClass.INSPECTED),
    (True, False, "by-key", RouteClass.REBUILT),
])
def test_producer_state_and_transactional_bit_are_cleared(keyed, flagged, partitioning, expected):
    # A committed transaction's batches reach the destination as plain data, whatever their path.
    records = [Record(key=b"k%d" % i if keyed else None, value=b"v", timestamp=T0) for i in range(8)]
    data = source(records, "snappy", transactional=True, producer_id=9_000_000_001, producer_epoch=12, base_sequence=77,
                  mark_no_keys=flagged)
    source_batch = DefaultRecordBatch(bytes(data))
    assert source_batch.is_transactional and source_batch.producer_id == 9_000_000_001
    routed = route(data, 0, destination_partitions=3, partitioning=partitioning)
    assert routed.route is expected
    for out in routed.outgoing:
        their_rows(out)  # checks producer id/epoch/sequence -1, no transactional bit, valid CRC


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("flagged", [True, False])
def test_corrupt_batch_names_its_offset(flagged):
    data = source(unkeyed(), "gzip", mark_no_keys=flagged)
    data[70] ^= 0x01  # inside the compressed payload: only the CRC notices
    with pytest.raises(CorruptBatchError, match="CRC") as info:
        route(data, 0, destination_partitions=2)
    assert info.value.offset == BASE_OFFSET


def test_corrupt_legacy_message_names_its_offset():
    data = bytearray(kcodecs.build_batch(sample_records(1), magic=1, compression="snappy", base_offset=BASE_OFFSET))
    data[-3] ^= 0x40
    with pytest.raises(CorruptBatchError) as info:
        route_batch(kcodecs.read_batch(data), 0, RoutingPolicy(destination_partitions=2))
    assert info.value.offset == BASE_OFFSET + len(sample_records(1)) - 1  # a wrapper names its last offset


def test_decompression_cap_applies():
    data = source([Record(key=b"k", value=b"\0" * 100_000, timestamp=T0)], "zstd")
    with pytest.raises(DecompressionLimitError) as info:
        route(data, 0, destination_partitions=2, max_decompressed_size=10_000)
    assert info.value.offset == BASE_OFFSET


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_SOURCES = [bytes(source(sample_records(2, count=10, base_ts=T0), codec)) for codec in CODECS] + [
    kcodecs.build_batch(sample_records(magic, count=6, base_ts=T0), magic=magic, compression=codec)
    for magic in (0, 1) for codec in ("gzip", "lz4")
]


@given(
    st.sampled_from(FUZZ_SOURCES),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), min_size=1, max_size=4),
    st.booleans(),
    st.sampled_from(list(Partitioning)),
)
@FUZZ
def test_damaged_batches_raise_only_typed_errors(data, flips, fix_crc, partitioning):
    """Byte damage anywhere, with or without a matching CRC: a kcodecs error or a valid routing."""
    data = bytearray(data)
    for position, value in flips:
        data[position % len(data)] = value
    if fix_crc and data[16] == 2 and len(data) > 21:
        with_crc(data)
    try:
        batch = kcodecs.read_batch(data)
    except CorruptBatchError:
        return
    try:
        routed = route_batch(batch, 1, RoutingPolicy(destination_partitions=3, partitioning=partitioning,
                                                     max_decompressed_size=1 << 20))
    except KMirrorError:
        return
    for out in routed.outgoing:
        kcodecs.read_batch(out.data).validate()
