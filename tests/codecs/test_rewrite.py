"""In-place header patches, beyond what the kafka-python interop tests check.

A patch touches only its own batch when that batch sits in the middle of a larger buffer,
only the bytes of its fields (plus the CRC when its rule says so), never the payload; a
patch that changes nothing writes nothing; read-only buffers, wrong magics and values a
field cannot hold are refused before a byte is written; and every patched batch still
validates (Kafka's ``DefaultRecordBatchTest.testSetLastOffset`` and friends).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import crc32c
import pytest

import kcodecs
from kcodecs import CorruptBatchError, InvalidRecordError, Record, TimestampType

from conftest import sample_records

T0 = 1_700_000_500_000  # a source broker's LogAppendTime
T1 = 1_800_000_000_000  # ours
PID = 0x0123_4567_89AB  # a destination producer id wider than 32 bits

# Byte ranges from the documented layouts (DefaultRecordBatch, LegacyRecord).
V2_BASE_OFFSET, V2_EPOCH, V2_CRC, V2_ATTRIBUTES = (0, 8), (12, 16), (17, 21), (21, 23)
V2_MAX_TIMESTAMP, V2_PRODUCER_STATE, V2_RECORDS = (35, 43), (43, 57), 61
LEGACY_OFFSET, LEGACY_CRC, LEGACY_ATTRIBUTES, V1_TIMESTAMP = (0, 8), (12, 16), (17, 18), (18, 26)
LEGACY_KEY_LENGTH = {0: 18, 1: 26}  # where key length, key, value length and the (compressed) value start


@dataclass(frozen=True)
class Patch:
    name: str
    apply: Callable[[memoryview], None]
    fields: list[tuple[int, int]]  # the only byte ranges it may change
    recomputes_crc: bool
    check: Callable[[kcodecs.Batch, list[Record]], None]
    log_append_time_before: bool = False  # patch a LogAppendTime batch (else CreateTime)


def _v2_checks():
    def base_offset(batch, records):
        assert batch.base_offset == 5_000_000
        assert [r.offset for r in batch.records()] == list(range(5_000_000, 5_000_000 + len(records)))

    def epoch(batch, records):
        assert batch.partition_leader_epoch == 12

    def set_lat(batch, records):
        assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.LOG_APPEND_TIME, T1)
        assert [r.timestamp for r in batch.records()] == [T1] * len(records)

    def clear_lat(batch, records):
        assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.CREATE_TIME, T0)
        assert [r.timestamp for r in batch.records()] == [r.timestamp for r in records]

    def producer(batch, records):
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
        assert not batch.is_transactional

    def set_producer(batch, records):
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (PID, 9, 1_000)
        assert not batch.is_transactional  # the target was transactional
        assert [r.value for r in batch.records()] == [r.value for r in records]

    return [
        Patch("set_base_offset", lambda b: kcodecs.set_base_offset(b, 5_000_000), [V2_BASE_OFFSET], False, base_offset),
        Patch("set_partition_leader_epoch", lambda b: kcodecs.set_partition_leader_epoch(b, 12), [V2_EPOCH], False, epoch),
        Patch("set_log_append_time", lambda b: kcodecs.set_log_append_time(b, T1),
              [V2_CRC, V2_ATTRIBUTES, V2_MAX_TIMESTAMP], True, set_lat),
        Patch("clear_log_append_time", kcodecs.clear_log_append_time, [V2_CRC, V2_ATTRIBUTES], True, clear_lat,
              log_append_time_before=True),
        Patch("clear_producer_state", kcodecs.clear_producer_state, [V2_CRC, V2_ATTRIBUTES, V2_PRODUCER_STATE], True,
              producer),
        Patch("set_producer_state", lambda b: kcodecs.set_producer_state(b, PID, 9, 1_000),
              [V2_CRC, V2_ATTRIBUTES, V2_PRODUCER_STATE], True, set_producer),
    ]


def _legacy_checks(magic):
    def wrapper_offset(batch, records):
        assert batch.last_offset == 5_000
        offsets = [r.offset for r in batch.records()]
        if batch.compression is kcodecs.Compression.NONE:
            assert offsets == [5_000]
        elif magic == 1:  # relative inner offsets follow the wrapper (KIP-31)
            assert offsets == list(range(5_000 - len(records) + 1, 5_001))
        else:  # v0 inner offsets are absolute: they stay (why v0 sets get rebuilt, not patched)
            assert offsets == list(range(100, 100 + len(records)))

    def set_lat(batch, records):
        assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.LOG_APPEND_TIME, T1)
        assert [r.timestamp for r in batch.records()] == [T1] * len(records)

    def clear_lat(batch, records):
        assert (batch.timestamp_type, batch.max_timestamp) == (TimestampType.CREATE_TIME, T0)
        if batch.compression is not kcodecs.Compression.NONE:  # inner messages kept their own times
            assert [r.timestamp for r in batch.records()] == [r.timestamp for r in records]

    patches = [Patch("set_wrapper_offset", lambda b: kcodecs.set_wrapper_offset(b, 5_000), [LEGACY_OFFSET], False,
                     wrapper_offset)]
    if magic == 1:
        patches += [
            Patch("set_log_append_time", lambda b: kcodecs.set_log_append_time(b, T1),
                  [LEGACY_CRC, LEGACY_ATTRIBUTES, V1_TIMESTAMP], True, set_lat),
            Patch("clear_log_append_time", kcodecs.clear_log_append_time, [LEGACY_CRC, LEGACY_ATTRIBUTES], True,
                  clear_lat, log_append_time_before=True),
        ]
    return patches


CASES = [
    pytest.param(magic, codec, patch, id=f"v{magic}-{codec}-{patch.name}")
    for magic, codecs in [(2, ["none", "gzip", "snappy", "lz4", "zstd"]), (1, ["none", "gzip", "snappy", "lz4"]),
                          (0, ["none", "gzip", "snappy", "lz4"])]
    for codec in codecs
    for patch in (_v2_checks() if magic == 2 else _legacy_checks(magic))
]


def _target(magic: int, codec: str, log_append_time: bool) -> tuple[bytes, list[Record]]:
    """One batch (an uncompressed v0/v1 set holds one message per batch, so one record there)."""
    records = sample_records(magic, count=1 if magic < 2 and codec == "none" else 6)
    kwargs: dict = {}
    if magic == 2:
        kwargs = {"producer_id": 7, "producer_epoch": 1, "base_sequence": 40, "transactional": True,
                  "partition_leader_epoch": 3}
    if log_append_time:
        kwargs.update(timestamp_type=TimestampType.LOG_APPEND_TIME, max_timestamp=T0)
    return kcodecs.build_batch(records, magic=magic, compression=codec, base_offset=100, **kwargs), records


NEIGHBOURS = (
    kcodecs.build_batch(sample_records(1, count=1), magic=1, base_offset=50),
    kcodecs.build_batch(sample_records(2, count=4), compression="gzip", base_offset=200),
)


def _payload_start(magic: int) -> int:
    return V2_RECORDS if magic == 2 else LEGACY_KEY_LENGTH[magic]


def _crc_of(magic: int, batch: bytes) -> tuple[int, int]:
    """(stored, computed over this batch's bytes only), computed independently of kcodecs."""
    if magic == 2:
        return int.from_bytes(batch[17:21], "big"), crc32c.crc32c(batch[21:])
    return int.from_bytes(batch[12:16], "big"), zlib.crc32(batch[16:])


@pytest.mark.parametrize(("magic", "codec", "patch"), CASES)
def test_patch_in_the_middle_of_a_buffer(magic, codec, patch):
    before, records = _target(magic, codec, patch.log_append_time_before)
    head, tail = NEIGHBOURS
    buf = bytearray(head + before + tail)
    start, end = len(head), len(head) + len(before)
    patch.apply(memoryview(buf)[start:])  # the view runs on past the batch, into its neighbour
    after = bytes(buf[start:end])
    assert bytes(buf[:start]) == head and bytes(buf[end:]) == tail, "a neighbour changed"
    assert after != before
    changed = {i for i in range(len(before)) if before[i] != after[i]}
    allowed = {i for lo, hi in patch.fields for i in range(lo, hi)}
    assert changed <= allowed, f"{patch.name} changed bytes {sorted(changed - allowed)}"
    assert after[_payload_start(magic):] == before[_payload_start(magic):], "the payload changed"
    stored, computed = _crc_of(magic, after)
    assert stored == computed, "CRC not over exactly this batch"
    if not patch.recomputes_crc:
        assert _crc_of(magic, after)[0] == _crc_of(magic, before)[0]
    batch = kcodecs.read_batch(after)
    batch.validate(deep=True)
    patch.check(batch, records)
    middle = list(kcodecs.iter_batches(buf))
    assert [b.position for b in middle][:2] == [0, start]
    for b in middle:
        b.validate(deep=True)


@pytest.mark.parametrize(("magic", "codec", "patch"), CASES)
def test_patch_on_an_exact_slice_and_a_bytearray_agree(magic, codec, patch):
    before, _ = _target(magic, codec, patch.log_append_time_before)
    whole = bytearray(before)
    patch.apply(memoryview(whole))
    sliced = bytearray(NEIGHBOURS[0] + before)
    patch.apply(memoryview(sliced)[len(NEIGHBOURS[0]):])
    assert bytes(sliced[len(NEIGHBOURS[0]):]) == bytes(whole)


def _noops(magic: int) -> list[tuple[str, Callable[[bytearray], None]]]:
    """Patches whose batch already holds what they would write (see _noop_target)."""
    if magic == 2:
        return [
            ("set_base_offset", lambda b: kcodecs.set_base_offset(b, 100)),
            ("set_partition_leader_epoch", lambda b: kcodecs.set_partition_leader_epoch(b, -1)),
            ("set_log_append_time", lambda b: kcodecs.set_log_append_time(b, T0)),
            ("clear_producer_state", kcodecs.clear_producer_state),
            ("set_producer_state", lambda b: kcodecs.set_producer_state(b, -1, -1, -1)),
        ]
    noops = [("set_wrapper_offset", lambda b: kcodecs.set_wrapper_offset(b, kcodecs.read_batch(b).last_offset))]
    if magic == 1:
        noops.append(("set_log_append_time", lambda b: kcodecs.set_log_append_time(b, T0)))
    return noops


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", ["none", "gzip", "lz4"])
def test_patches_that_change_nothing_write_nothing(magic, codec):
    """With a deliberately wrong CRC, so that a recomputation would show."""
    records = sample_records(magic, count=1 if magic < 2 and codec == "none" else 5)
    lat = {"timestamp_type": TimestampType.LOG_APPEND_TIME, "max_timestamp": T0} if magic > 0 else {}
    cases = [(_noops(magic), lat)]
    if magic > 0:  # clearing LogAppendTime on a CreateTime batch changes nothing either
        cases.append(([("clear_log_append_time", kcodecs.clear_log_append_time)], {}))
    for noops, kwargs in cases:
        built = kcodecs.build_batch(records, magic=magic, compression=codec, base_offset=100, **kwargs)
        bogus = bytearray(built)
        crc_at = 17 if magic == 2 else 12
        bogus[crc_at] ^= 0xFF
        for name, apply in noops:
            for buf in (bytearray(built), bytearray(bogus)):
                before = bytes(buf)
                apply(buf)
                assert bytes(buf) == before, f"{name} rewrote an unchanged batch"
            kcodecs.read_batch(built).validate(deep=True)


# --- refusals ----------------------------------------------------------------------------------------------

ALL_PATCHES = {
    "set_base_offset": (lambda b: kcodecs.set_base_offset(b, 1), {2}),
    "set_wrapper_offset": (lambda b: kcodecs.set_wrapper_offset(b, 1), {0, 1}),
    "set_partition_leader_epoch": (lambda b: kcodecs.set_partition_leader_epoch(b, 1), {2}),
    "set_log_append_time": (lambda b: kcodecs.set_log_append_time(b, 1), {1, 2}),
    "clear_log_append_time": (kcodecs.clear_log_append_time, {1, 2}),
    "clear_producer_state": (kcodecs.clear_producer_state, {2}),
    "set_producer_state": (lambda b: kcodecs.set_producer_state(b, 1, 0, 0), {2}),
    "stamp_v2": (lambda b: kcodecs.stamp_v2(b, base_offset=5, partition_leader_epoch=3, log_append_time=T1,
                                            clear_producer_state=True), {2}),
}


def _lat_batch(magic: int) -> bytes:
    kwargs = {"timestamp_type": TimestampType.LOG_APPEND_TIME, "max_timestamp": T0} if magic else {}
    return kcodecs.build_batch(sample_records(magic, count=3), magic=magic, compression="gzip", **kwargs)


@pytest.mark.parametrize("name", list(ALL_PATCHES))
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_read_only_buffers_are_refused(name, magic):
    apply, _ = ALL_PATCHES[name]
    data = _lat_batch(magic)
    for buf in (data, memoryview(data), memoryview(bytearray(data)).toreadonly()):
        with pytest.raises(InvalidRecordError, match="writable"):
            apply(buf)


@pytest.mark.parametrize(
    ("name", "magic"), [(n, m) for n, (_, magics) in ALL_PATCHES.items() for m in (0, 1, 2) if m not in magics]
)
def test_wrong_magics_are_refused_untouched(name, magic):
    apply, _ = ALL_PATCHES[name]
    buf = bytearray(_lat_batch(magic))
    before = bytes(buf)
    with pytest.raises(InvalidRecordError, match="magic"):
        apply(buf)
    assert bytes(buf) == before


def test_v0_has_no_log_append_time():
    buf = bytearray(kcodecs.build_batch(sample_records(0, count=3), magic=0, compression="snappy"))
    before = bytes(buf)
    for apply in (lambda b: kcodecs.set_log_append_time(b, T1), kcodecs.clear_log_append_time):
        with pytest.raises(InvalidRecordError):
            apply(buf)
    assert bytes(buf) == before
    assert kcodecs.read_batch(buf).timestamp_type is TimestampType.NO_TIMESTAMP_TYPE


@pytest.mark.parametrize(
    ("name", "magic", "value"),
    [
        ("set_base_offset", 2, 1 << 63), ("set_base_offset", 2, -(1 << 63) - 1),
        ("set_wrapper_offset", 1, 1 << 63), ("set_wrapper_offset", 0, -(1 << 64)),
        ("set_partition_leader_epoch", 2, 1 << 31), ("set_partition_leader_epoch", 2, -(1 << 31) - 1),
        ("set_log_append_time", 2, 1 << 63), ("set_log_append_time", 1, 1 << 64),
    ],
)
def test_values_a_field_cannot_hold_are_refused_untouched(name, magic, value):
    """struct.pack_into writes part of an out-of-range int64 before it raises; the patch must check first."""
    buf = bytearray(_lat_batch(magic))
    before = bytes(buf)
    with pytest.raises(InvalidRecordError):
        getattr(kcodecs, name)(buf, value)
    assert bytes(buf) == before
    limit = (1 << 31) - 1 if name == "set_partition_leader_epoch" else (1 << 63) - 1
    getattr(kcodecs, name)(buf, limit if value > 0 else -limit - 1)  # the extremes themselves fit
    kcodecs.read_batch(buf).validate(deep=True)


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_a_buffer_shorter_than_its_size_field_is_refused_untouched(magic):
    data = _lat_batch(magic)
    for cut in (0, 16, 17, len(data) - 1):
        buf = bytearray(data[:cut])
        for name, (apply, magics) in ALL_PATCHES.items():
            if magic not in magics:
                continue
            with pytest.raises(CorruptBatchError):
                apply(buf)
            assert bytes(buf) == data[:cut], name


# --- set_producer_state ------------------------------------------------------------------------------------


def _producer_batch(codec: str, *, transactional: bool) -> bytearray:
    state = {"producer_id": 7, "producer_epoch": 1, "base_sequence": 40} if transactional else {}
    return bytearray(kcodecs.build_batch(sample_records(2, count=6), compression=codec, base_offset=100,
                                         transactional=transactional, **state))


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
@pytest.mark.parametrize("was_transactional", [False, True])
@pytest.mark.parametrize(
    ("producer_id", "epoch", "sequence", "transactional"),
    [(PID, 9, 1_000, False), (PID, 9, 1_000, True), ((1 << 63) - 1, (1 << 15) - 1, (1 << 31) - 1, True),
     (0, 0, 0, False), (-1, -1, -1, False)],
)
def test_set_producer_state_reads_back_in_kafka_python(codec, was_transactional, producer_id, epoch, sequence,
                                                       transactional):
    """kafka-python, an independent reader, sees the new identity, a valid CRC and the same records."""
    from kafka.record.default_records import DefaultRecordBatch

    buf = _producer_batch(codec, transactional=was_transactional)
    payload = bytes(buf[V2_RECORDS:])
    kcodecs.set_producer_state(buf, producer_id, epoch, sequence, transactional=transactional)
    assert bytes(buf[V2_RECORDS:]) == payload
    kcodecs.read_batch(buf).validate(deep=True)
    theirs = DefaultRecordBatch(bytes(buf))
    assert theirs.validate_crc()
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (producer_id, epoch, sequence)
    assert theirs.is_transactional is transactional
    assert [r.value for r in theirs] == [r.value for r in sample_records(2, count=6)]


@pytest.mark.parametrize("transactional", [False, True])
def test_set_producer_state_to_what_is_there_writes_nothing(transactional):
    """With a deliberately wrong CRC, so that a recomputation would show."""
    buf = _producer_batch("lz4", transactional=transactional)
    buf[V2_CRC[0]] ^= 0xFF
    before = bytes(buf)
    state = (7, 1, 40) if transactional else (-1, -1, -1)
    kcodecs.set_producer_state(buf, *state, transactional=transactional)
    assert bytes(buf) == before


def test_only_the_transactional_bit_changing_recomputes_the_crc():
    buf = _producer_batch("none", transactional=True)
    kcodecs.set_producer_state(buf, 7, 1, 40, transactional=False)
    batch = kcodecs.read_batch(buf)
    batch.validate()
    assert not batch.is_transactional and (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 40)


def test_clear_producer_state_is_set_producer_state_minus_one():
    cleared, set_ = _producer_batch("gzip", transactional=True), _producer_batch("gzip", transactional=True)
    kcodecs.clear_producer_state(cleared)
    kcodecs.set_producer_state(set_, -1, -1, -1)
    assert cleared == set_


@pytest.mark.parametrize(
    ("field", "value"),
    [("producer_id", 1 << 63), ("producer_id", -(1 << 63) - 1), ("producer_epoch", 1 << 15),
     ("producer_epoch", -(1 << 15) - 1), ("base_sequence", 1 << 31), ("base_sequence", -(1 << 31) - 1),
     ("base_sequence", 1.5), ("producer_id", "7")],
)
def test_set_producer_state_refuses_values_its_fields_cannot_hold_untouched(field, value):
    buf = _producer_batch("snappy", transactional=True)
    before = bytes(buf)
    args = {"producer_id": PID, "producer_epoch": 2, "base_sequence": 3, field: value}
    with pytest.raises(InvalidRecordError, match="does not fit"):
        kcodecs.set_producer_state(buf, **args, transactional=False)
    assert bytes(buf) == before


# --- stamp_v2 ----------------------------------------------------------------------------------------------

_V2_CRC_OFFSET = 17


def _stamped_apart(buf: bytearray, base_offset: int, epoch: int, log_append_time: int | None, producer: dict) -> None:
    """The separate patches stamp_v2 stands for, each checked against kafka-python above."""
    kcodecs.set_base_offset(buf, base_offset)
    kcodecs.set_partition_leader_epoch(buf, epoch)
    if log_append_time is None:
        kcodecs.clear_log_append_time(buf)
    else:
        kcodecs.set_log_append_time(buf, log_append_time)
    if producer.get("clear_producer_state"):
        kcodecs.clear_producer_state(buf)
    elif "producer_state" in producer:
        kcodecs.set_producer_state(buf, *producer["producer_state"], transactional=producer["transactional"])


def _stamp_sources(codec: str) -> list[bytearray]:
    records = sample_records(2, count=6)
    return [
        bytearray(kcodecs.build_batch(records, compression=codec, base_offset=100)),
        bytearray(kcodecs.build_batch(records, compression=codec, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                      max_timestamp=T0, partition_leader_epoch=4)),
        _producer_batch(codec, transactional=True),
        bytearray(kcodecs.build_batch(records, compression=codec, producer_id=PID, producer_epoch=2, base_sequence=9)),
    ]


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
@pytest.mark.parametrize("log_append_time", [None, T1])
@pytest.mark.parametrize("producer", [{}, {"clear_producer_state": True},
                                      {"producer_state": (PID, 9, 1_000), "transactional": False},
                                      {"producer_state": (7, 1, 40), "transactional": True}])
@pytest.mark.parametrize(("base_offset", "epoch"), [(0, -1), (1 << 40, 7)])
def test_stamp_v2_is_the_separate_patches_in_one(codec, log_append_time, producer, base_offset, epoch):
    for source in _stamp_sources(codec):
        apart, together = bytearray(source), bytearray(source)
        _stamped_apart(apart, base_offset, epoch, log_append_time, producer)
        kcodecs.stamp_v2(together, base_offset=base_offset, partition_leader_epoch=epoch,
                         log_append_time=log_append_time, **producer)
        assert together == apart
        kcodecs.read_batch(together).validate(deep=True)


@pytest.mark.parametrize("producer", [{"clear_producer_state": True, "producer_state": (1, 0, 0)},
                                      {"clear_producer_state": True, "transactional": True},
                                      {"transactional": True},
                                      {"producer_state": (1 << 63, 0, 0)}, {"producer_state": (1, 1 << 15, 0)},
                                      {"producer_state": (1, 0, -(1 << 31) - 1)},
                                      {"producer_state": (1, 0)}, {"producer_state": (1.5, 0, 0)}])
def test_stamp_v2_refuses_a_producer_state_it_cannot_write_untouched(producer):
    buf = _stamp_sources("lz4")[2]
    before = bytes(buf)
    with pytest.raises(InvalidRecordError):
        kcodecs.stamp_v2(buf, base_offset=0, partition_leader_epoch=-1, **producer)
    assert bytes(buf) == before


def test_stamp_v2_recomputes_the_crc_only_when_a_covered_byte_changes():
    buf = _stamp_sources("gzip")[0]
    crc = kcodecs.read_batch(buf).crc
    buf[_V2_CRC_OFFSET] ^= 0xFF  # a wrong CRC stays wrong when only uncovered fields change
    kcodecs.stamp_v2(buf, base_offset=7, partition_leader_epoch=2, clear_producer_state=True)
    assert kcodecs.read_batch(buf).crc == crc ^ (0xFF << 24) and kcodecs.read_batch(buf).base_offset == 7
    kcodecs.stamp_v2(buf, base_offset=7, partition_leader_epoch=2, log_append_time=T1)
    kcodecs.read_batch(buf).validate(deep=True)  # the timestamp type changed: CRC recomputed


@pytest.mark.parametrize("codec", ["none", "gzip"])
def test_stamp_v2_clears_a_delete_horizon_alone_and_kafka_python_validates_it(codec):
    from kafka.record.default_records import DefaultRecordBatch

    records = sample_records(2, count=6)
    stored = kcodecs.read_batch(bytearray(kcodecs.build_batch(records, compression=codec, base_offset=100)))
    with_horizon = bytearray(kcodecs.retain_records(stored, list(stored.records()), delete_horizon_ms=T1))
    before = bytes(with_horizon)
    kcodecs.stamp_v2(with_horizon, base_offset=100, partition_leader_epoch=-1, clear_delete_horizon=True)
    assert with_horizon[22] == before[22] & ~0x40 and with_horizon[21] == before[21]
    assert with_horizon[23:] == before[23:] and with_horizon[:17] == before[:17]  # only attributes and CRC
    theirs = DefaultRecordBatch(bytes(with_horizon))
    assert theirs.validate_crc()
    assert [r.timestamp for r in theirs] == [r.timestamp for r in kcodecs.read_batch(before).records()]


@pytest.mark.parametrize("field, value", [("base_offset", 1 << 63), ("partition_leader_epoch", 1 << 31),
                                          ("log_append_time", -(1 << 63) - 1), ("base_offset", 1.0),
                                          ("partition_leader_epoch", "3"), ("log_append_time", 1.7e12)])
def test_stamp_v2_refuses_values_its_fields_cannot_hold_untouched(field, value):
    buf = _stamp_sources("lz4")[1]
    before = bytes(buf)
    with pytest.raises(InvalidRecordError):
        kcodecs.stamp_v2(buf, **{"base_offset": 0, "partition_leader_epoch": 0, field: value})
    assert bytes(buf) == before
