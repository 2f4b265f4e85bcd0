"""Bad bytes may only ever raise kcodecs' typed errors (the contract in ``_errors.py``).

Every entry point (header-only iteration, properties, shallow and deep validation, record
decoding, in-place patches) is driven over valid batches of every magic x codec, built by
kcodecs and by kafka-python, after truncation, bit flips in each named header field and
random corruption, and over random bytes. Anything but a :class:`kcodecs.KcodecsError`
(``struct.error``, ``IndexError``, ``zlib.error``, ``UnicodeDecodeError``, codec library
errors, ...) fails the test. Flips inside a CRC's coverage must also be *detected* by
``validate()``, as in Kafka's ``DefaultRecordBatchTest.testInvalidCrc``.
"""

from __future__ import annotations

import inspect
import struct
import zlib
from typing import Callable

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

import kcodecs
from kcodecs import CorruptBatchError, Compression, KcodecsError, Record, _legacy, _v2
from kcodecs._batch import MAGIC_OFFSET

from conftest import MAGIC_CODECS, sample_records

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
LIMIT = 1 << 20
"""Decompression cap while fuzzing: every valid payload here is a few KiB."""

CODEC_ID = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # Kafka's CompressionType ids


# --- corpus: valid batches of every magic x codec, from both implementations ---------------------------------


def _ours(magic: int, codec: str, base_offset: int) -> bytes:
    v2_only = {"producer_id": 7, "producer_epoch": 1, "base_sequence": 3, "partition_leader_epoch": 4}
    return kcodecs.build_batch(
        sample_records(magic, count=6), magic=magic, compression=codec, base_offset=base_offset,
        **(v2_only if magic == 2 else {}),
    )


def _theirs(magic: int, codec: str, base_offset: int) -> bytes:
    builder = MemoryRecordsBuilder(magic, CODEC_ID[codec], batch_size=1 << 20, offset=base_offset)
    for r in sample_records(magic, count=6):
        builder.append(r.timestamp, r.key, r.value, list(r.headers))
    builder.close()
    return bytes(builder.buffer())


BUILDERS: dict[str, tuple[int, Callable[[int], bytes]]] = {}
for _magic, _codec in MAGIC_CODECS:
    BUILDERS[f"ours-v{_magic}-{_codec}"] = (_magic, lambda base, m=_magic, c=_codec: _ours(m, c, base))
    BUILDERS[f"theirs-v{_magic}-{_codec}"] = (_magic, lambda base, m=_magic, c=_codec: _theirs(m, c, base))
BUILDERS["ours-v2-control-none"] = (2, lambda base: kcodecs.build_batch(
    [kcodecs.control_record(kcodecs.ControlType.ABORT, coordinator_epoch=3, timestamp=5)],
    control=True, transactional=True, producer_id=9, producer_epoch=0, base_offset=base,
))
CORPUS = {name: (magic, build(100)) for name, (magic, build) in BUILDERS.items()}
V2_CORPUS = [name for name, (magic, _) in CORPUS.items() if magic == 2]
LEGACY_CORPUS = [name for name, (magic, _) in CORPUS.items() if magic < 2]


def _first_size(data: bytes) -> int:
    """Size of the first batch, read by hand (log overhead + the size field)."""
    return 12 + struct.unpack_from(">i", data, 8)[0]


# --- the harness ---------------------------------------------------------------------------------------------


def _public_properties(cls: type) -> list[str]:
    return [
        name for name in dir(cls)
        if not name.startswith("_") and isinstance(inspect.getattr_static(cls, name), property)
    ]


def exercise(data: bytes | bytearray | memoryview) -> list[KcodecsError]:
    """Drive every read path over ``data``; return the typed errors met. Any other exception escapes."""
    errors: list[KcodecsError] = []

    def attempt(fn: Callable[[], object]) -> object:
        try:
            return fn()
        except KcodecsError as exc:
            assert str(exc)  # the message must render, whatever was filled in
            errors.append(exc)
            return None

    batches: list[kcodecs.Batch] = []

    def collect() -> None:
        for batch in kcodecs.iter_batches(data):
            batches.append(batch)

    attempt(collect)
    single = attempt(lambda: kcodecs.read_batch(data))
    if single is not None:
        batches.append(single)  # type: ignore[arg-type]
    for batch in batches:
        for name in _public_properties(type(batch)):
            attempt(lambda name=name: getattr(batch, name))
        attempt(lambda: repr(batch))
        attempt(lambda: batch.validate())
        attempt(lambda: batch.validate(deep=True, max_size=LIMIT))
        records = attempt(lambda: list(batch.records(max_size=LIMIT)))
        keys = attempt(lambda: list(batch.keys(max_size=LIMIT)))
        if records is not None:  # the keys-only walk reads the same framing (it skips UTF-8 checks)
            assert keys == [record.key for record in records]  # type: ignore[union-attr]
        attempt(lambda: batch.has_contiguous_offsets(max_size=LIMIT))
        if records and attempt(lambda: batch.is_control):
            for record in records:  # type: ignore[union-attr]
                attempt(lambda record=record: kcodecs.parse_control_record(record))
    return errors


def detected(data: bytes | bytearray) -> bool:
    """Whether reading headers and validating every batch raises CorruptBatchError."""
    try:
        for batch in kcodecs.iter_batches(data):
            batch.validate()
    except CorruptBatchError:
        return True
    return False


def flip(data: bytes, position: int, mask: int) -> bytearray:
    out = bytearray(data)
    out[position] ^= mask
    return out


def test_corpus_is_valid_and_compressed_as_asked():
    """The fuzz targets start from batches both implementations accept."""
    for name, (magic, data) in CORPUS.items():
        assert exercise(data) == [], name
        codec = name.rsplit("-", 1)[1]
        assert {b.compression for b in kcodecs.iter_batches(data)} == {Compression.parse(codec)}, name
        assert all(b.magic == magic for b in kcodecs.iter_batches(data))


# --- truncation ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BUILDERS))
def test_clean_truncation_at_every_length(name):
    """A prefix cut anywhere yields exactly the complete batches before the cut, and never raises."""
    _, build = BUILDERS[name]
    parts = [build(base) for base in (100, 200, 300)]
    data = b"".join(parts)
    full = list(kcodecs.iter_batches(data))
    ends = [b.position + b.size for b in full]
    assert ends[-1] == len(data) and len(parts[0]) in ends
    first_end = _first_size(data)
    view = memoryview(data)
    for cut in range(len(data) + 1):
        prefix = view[:cut]
        assert [b.position for b in kcodecs.iter_batches(prefix)] == [
            b.position for b, end in zip(full, ends) if end <= cut
        ], cut
        if cut < first_end:
            with pytest.raises(CorruptBatchError):
                kcodecs.read_batch(prefix)
        else:
            assert kcodecs.read_batch(prefix).size == first_end


@pytest.mark.parametrize("name", list(CORPUS))
@given(data=st.data())
@FUZZ
def test_truncated_body_with_consistent_sizes(name, data):
    """Cut the body but fix up every size field (and the CRC): only typed errors, and compressed
    or v2 bodies must still be caught by deep validation (the decoder sees a short payload)."""
    magic, whole = CORPUS[name]
    raw = bytearray(whole[: _first_size(whole)])
    if magic == 2:
        cut = data.draw(st.integers(_v2.HEADER_SIZE, len(raw) - 1), label="cut")
        short = raw[:cut]
        struct.pack_into(">i", short, _v2.LENGTH, cut - 12)
        struct.pack_into(">I", short, _v2.CRC, crc32c.crc32c(bytes(short[_v2.ATTRIBUTES:])))
        must_detect = True
    else:
        key_at = _legacy.KEY_LENGTH[magic]
        (key_length,) = struct.unpack_from(">i", raw, key_at)
        value_at = key_at + 4 + max(key_length, 0) + 4
        cut = data.draw(st.integers(value_at, len(raw) - 1), label="cut")
        short = raw[:cut]
        struct.pack_into(">i", short, 8, cut - 12)
        struct.pack_into(">i", short, value_at - 4, cut - value_at)
        struct.pack_into(">I", short, 12, zlib.crc32(bytes(short[16:])))
        must_detect = raw[17] & 0x07 != 0  # a shorter plain value is still a valid message
    errors = exercise(short)
    assert all(isinstance(e, KcodecsError) for e in errors)
    if must_detect:
        with pytest.raises(CorruptBatchError):
            kcodecs.read_batch(short).validate(deep=True, max_size=LIMIT)


# --- bit flips in every named header field -------------------------------------------------------------------

# Field widths from the v2 schema (KIP-98, Kafka's DefaultRecordBatch); offsets come from _v2.
V2_WIDTHS = {
    "BASE_OFFSET": 8, "LENGTH": 4, "PARTITION_LEADER_EPOCH": 4, "MAGIC": 1, "CRC": 4, "ATTRIBUTES": 2,
    "LAST_OFFSET_DELTA": 4, "BASE_TIMESTAMP": 8, "MAX_TIMESTAMP": 8, "PRODUCER_ID": 8, "PRODUCER_EPOCH": 2,
    "BASE_SEQUENCE": 4, "RECORD_COUNT": 4,
}
V2_OUTSIDE_CRC = {"BASE_OFFSET", "LENGTH", "PARTITION_LEADER_EPOCH", "MAGIC"}
V2_HARMLESS = {"BASE_OFFSET", "PARTITION_LEADER_EPOCH"}  # outside the CRC by design (broker-assigned)

# Legacy message fields (Kafka's LegacyRecord); TIMESTAMP exists in v1 only.
LEGACY_WIDTHS = {"OFFSET": 8, "SIZE": 4, "CRC": 4, "MAGIC": 1, "ATTRIBUTES": 1, "TIMESTAMP": 8, "KEY_LENGTH": 4}
LEGACY_OUTSIDE_CRC = {"OFFSET", "SIZE"}
LEGACY_HARMLESS = {"OFFSET"}


def _v2_offset(field: str) -> int:
    return MAGIC_OFFSET if field == "MAGIC" else getattr(_v2, field)


def _legacy_offset(field: str, magic: int) -> int:
    return _legacy.KEY_LENGTH[magic] if field == "KEY_LENGTH" else getattr(_legacy, field)


def test_field_tables_match_the_modules():
    """The offsets kcodecs names are contiguous and add up to the documented header sizes."""
    position = 0
    for field, width in V2_WIDTHS.items():
        assert _v2_offset(field) == position, field
        position += width
    assert position == _v2.RECORDS == _v2.HEADER_SIZE == 61
    for magic in (0, 1):
        position = 0
        for field, width in LEGACY_WIDTHS.items():
            if field == "TIMESTAMP" and magic == 0:
                continue
            assert _legacy_offset(field, magic) == position, (magic, field)
            position += width
        assert position == 12 + _legacy.RECORD_OVERHEAD[magic] - 4  # the value length follows


def _check_flip(data: bytes, position: int, mask: int, in_crc: bool, harmless: bool) -> None:
    bad = flip(data, position, mask)
    exercise(bad)
    if in_crc:
        assert detected(bad), f"flip of {mask:#04x} at byte {position} not detected"
    if harmless:
        for batch in kcodecs.iter_batches(bad):
            batch.validate(deep=True)


@pytest.mark.parametrize("field", list(V2_WIDTHS))
def test_v2_header_bit_flips(field):
    start, width = _v2_offset(field), V2_WIDTHS[field]
    for name in V2_CORPUS:
        data = CORPUS[name][1]
        for position in range(start, start + width):
            for bit in range(8):
                _check_flip(data, position, 1 << bit, field not in V2_OUTSIDE_CRC, field in V2_HARMLESS)


@pytest.mark.parametrize(
    ("magic", "field"), [(m, f) for m in (0, 1) for f in LEGACY_WIDTHS if not (f == "TIMESTAMP" and m == 0)]
)
def test_legacy_header_bit_flips(magic, field):
    start, width = _legacy_offset(field, magic), LEGACY_WIDTHS[field]
    for name in LEGACY_CORPUS:
        if CORPUS[name][0] != magic:
            continue
        data = CORPUS[name][1]
        for position in range(start, start + width):
            for bit in range(8):
                _check_flip(data, position, 1 << bit, field not in LEGACY_OUTSIDE_CRC, field in LEGACY_HARMLESS)


@pytest.mark.parametrize("name", list(CORPUS))
def test_payload_bit_flips(name):
    """One flip per payload byte (rotating the bit): records, keys, headers or compressed data."""
    magic, data = CORPUS[name]
    start = _v2.RECORDS if magic == 2 else _legacy.KEY_LENGTH[magic] + 4
    for position in range(start, _first_size(data)):
        _check_flip(data, position, 1 << (position % 8), True, False)


@pytest.mark.parametrize("name", list(CORPUS))
@given(data=st.data())
@FUZZ
def test_random_corruption(name, data):
    """Several bytes overwritten anywhere in the first batch: only typed errors, CRC-covered ones detected."""
    magic, whole = CORPUS[name]
    size = _first_size(whole)
    bad = bytearray(whole)
    changes = data.draw(st.dictionaries(st.integers(0, size - 1), st.integers(0, 255), min_size=1, max_size=6))
    for position, value in changes.items():
        bad[position] = value
    exercise(bad)
    crc_start = _v2.ATTRIBUTES if magic == 2 else MAGIC_OFFSET
    crc_field = range(_v2.CRC, _v2.CRC + 4) if magic == 2 else range(12, 16)
    covered = [p for p in changes if p >= crc_start or p in crc_field]
    if len(covered) == len(changes) and bytes(bad) != whole and bad[MAGIC_OFFSET] == magic:
        # Every change is inside what the CRC protects (the stored CRC included): caught,
        # barring a 2**-32 collision, which this fixed corpus would reproduce every run.
        assert detected(bad)


# --- random bytes --------------------------------------------------------------------------------------------


def _zigzag(value: int) -> bytes:
    """An independent zig-zag varint writer, to feed the decoders plausible fields."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_varints = st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-3, 40)
_chunks = st.one_of(_varints.map(_zigzag), st.binary(max_size=12), st.sampled_from([b"\x80" * 11, b"\xff\xfe", b"\x01"]))
_small = st.integers(-2, 12)
_field = st.one_of(
    st.just(_zigzag(-1)),  # null
    st.binary(max_size=6).map(lambda b: _zigzag(len(b)) + b),  # well formed
    st.tuples(_varints, st.binary(max_size=4)).map(lambda t: _zigzag(t[0]) + t[1]),  # lying length
)
_header_key = st.one_of(
    st.text(max_size=4).map(lambda t: _zigzag(len(t.encode())) + t.encode()),
    st.sampled_from([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80"]).map(lambda b: _zigzag(len(b)) + b),  # not UTF-8
    _field,
)


@st.composite
def v2_record(draw) -> bytes:
    """One v2 record whose fields are mostly well formed, so decoding gets deep before it fails."""
    headers = draw(st.lists(st.tuples(_header_key, _field).map(b"".join), max_size=3))
    header_count = len(headers) + draw(st.sampled_from([0, 0, 0, -1, 1, -3]))
    body = b"".join([
        bytes([draw(st.integers(0, 255) | st.just(0))]),
        _zigzag(draw(_small | _varints)),  # timestamp delta
        _zigzag(draw(_small)),  # offset delta: repeats and disorder included
        draw(_field), draw(_field), _zigzag(header_count), *headers,
    ])
    return _zigzag(len(body) + draw(st.sampled_from([0, 0, 0, 0, -1, 1, 5]))) + body


records_like = st.lists(v2_record() | _chunks, max_size=12).map(b"".join)
"""Bytes that look like v2 records: mostly records with plausible fields, some raw varints and bytes."""


@st.composite
def v2_batches(draw) -> bytes:
    """A v2 header with a correct size and CRC around random (maybe compressed) records."""
    attributes = draw(st.integers(0, 0xFFFF) | st.sampled_from([0, 1, 2, 3, 4, 5, 7, 0x08, 0x30, 0x4000]))
    records = draw(st.lists(v2_record(), max_size=6))
    body = draw(st.just(b"".join(records)) | records_like | st.binary(max_size=200))
    codec = attributes & 0x07
    if codec and codec <= 4 and draw(st.booleans()):
        body = kcodecs.compress(codec, body)
    count = len(records) + draw(st.sampled_from([0, 0, 0, -1, 1])) if draw(st.booleans()) else draw(
        st.integers(-2, 12) | st.integers(-(1 << 31), (1 << 31) - 1))
    last_delta = draw(st.integers(-2, 12) | st.integers(-(1 << 31), (1 << 31) - 1))
    timestamps = st.integers(-(1 << 63), (1 << 63) - 1)
    header = struct.pack(
        ">qiibIhiqqqhii", draw(st.integers(-(1 << 63), (1 << 63) - 1)), 49 + len(body), -1, 2, 0,
        attributes - 0x10000 if attributes & 0x8000 else attributes, last_delta, draw(timestamps),
        draw(timestamps), -1, -1, -1, count,
    )
    out = bytearray(header + body)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _legacy_message(offset: int, magic: int, attributes: int, timestamp: int, key: bytes | None, value: bytes | None,
                    size_delta: int = 0, crc_xor: int = 0) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", timestamp) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1 if field is None else len(field)) + (field or b"")
    return struct.pack(">qiI", offset, 4 + len(body) + size_delta, zlib.crc32(body) ^ crc_xor) + body


@st.composite
def legacy_messages(draw) -> bytes:
    """A v0/v1 message with a correct CRC whose value is random, or a (compressed) random inner set."""
    magic = draw(st.sampled_from([0, 1]))
    attributes = draw(st.integers(0, 255) | st.sampled_from([1, 2, 3, 4, 9, 10, 11]))
    codec = attributes & 0x07
    if codec and draw(st.booleans()):
        inner = b"".join(draw(st.lists(
            st.builds(
                _legacy_message, st.integers(-5, 5), st.sampled_from([magic, magic, 1 - magic]),
                st.integers(0, 255) | st.just(0), st.integers(-2, 2), st.none() | st.binary(max_size=8),
                st.none() | st.binary(max_size=8), st.integers(-30, 3) | st.just(0), st.just(0) | st.integers(0, 255),
            ),
            max_size=4,
        )))
        value = kcodecs.compress(codec, inner, magic=2 if codec == 4 else magic) if codec <= 4 else inner
    else:
        value = draw(st.none() | st.binary(max_size=120))
    key = draw(st.none() | st.binary(max_size=8))
    return _legacy_message(draw(st.integers(-(1 << 63), (1 << 63) - 1)), magic, attributes, 5, key, value)


@given(st.binary(max_size=400))
@FUZZ
def test_random_bytes(data):
    exercise(data)


@given(st.lists(v2_batches() | legacy_messages(), min_size=1, max_size=3).map(b"".join), st.integers(0, 64))
@settings(FUZZ, max_examples=600)
def test_random_batches_with_valid_framing(data, cut):
    """Header, size and CRC right, contents random: only typed errors from records() and validate(deep)."""
    exercise(data)
    exercise(data[: len(data) - cut])


# --- in-place patches on random or corrupt buffers -----------------------------------------------------------

_values64 = st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(-(1 << 70), 1 << 70)
_values32 = st.integers(-(1 << 31), (1 << 31) - 1) | st.integers(-(1 << 40), 1 << 40)
PATCHES = {
    "set_base_offset": (kcodecs.set_base_offset, _values64),
    "set_wrapper_offset": (kcodecs.set_wrapper_offset, _values64),
    "set_partition_leader_epoch": (kcodecs.set_partition_leader_epoch, _values32),
    "set_log_append_time": (kcodecs.set_log_append_time, _values64),
    "clear_log_append_time": (kcodecs.clear_log_append_time, None),
    "clear_producer_state": (kcodecs.clear_producer_state, None),
}


@st.composite
def patch_targets(draw) -> bytearray:
    kind = draw(st.sampled_from(["random", "framed", "corrupt"]))
    if kind == "random":
        return bytearray(draw(st.binary(max_size=120)))
    if kind == "framed":
        return bytearray(draw(v2_batches() | legacy_messages()))
    _, data = CORPUS[draw(st.sampled_from(sorted(CORPUS)))]
    bad = bytearray(data[: draw(st.integers(0, len(data)))])
    for position, value in draw(st.dictionaries(st.integers(0, 70), st.integers(0, 255), max_size=4)).items():
        if position < len(bad):
            bad[position] = value
    return bad


@pytest.mark.parametrize("patch", list(PATCHES))
@given(data=st.data())
@settings(FUZZ, max_examples=150)
def test_patches_on_random_buffers(patch, data):
    """Only typed errors, and a patch that raises leaves the buffer as it was."""
    fn, values = PATCHES[patch]
    buf = data.draw(patch_targets(), label="buffer")
    before = bytes(buf)
    args = () if values is None else (data.draw(values, label="value"),)
    try:
        fn(buf, *args)
    except KcodecsError:
        assert bytes(buf) == before, "a failed patch must not leave half its bytes behind"
    exercise(buf)


# --- random records round trip through an independent reader ------------------------------------------------

_headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3)
_records = st.builds(
    Record,
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=200),
    timestamp=st.integers(-1, 1 << 50),
    headers=_headers,
)


@given(
    records=st.lists(_records, min_size=1, max_size=15),
    codec=st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]),
    base_offset=st.integers(0, 1 << 50),
)
@settings(FUZZ, max_examples=200)
def test_random_records_round_trip_through_kafka_python(records, codec, base_offset):
    data = kcodecs.build_batch(records, compression=codec, base_offset=base_offset)
    batches = list(MemoryRecords(data))
    assert len(batches) == 1 and isinstance(batches[0], DefaultRecordBatch)
    (theirs,) = batches
    assert theirs.validate_crc()
    assert theirs.compression_type == CODEC_ID[codec]
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in theirs]
    assert got == [
        (base_offset + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)
    ]
