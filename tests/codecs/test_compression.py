"""Tests for kcodecs._compression: round trips, Kafka framings, interop, bombs, corruption."""

from __future__ import annotations

import os
import random
import struct
import tracemalloc
import zlib

import lz4.frame
import pytest
import snappy
import xxhash
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kp  # kafka-python: an independent implementation

from kcodecs._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from kcodecs._errors import CorruptBatchError, DecompressionLimitError, InvalidRecordError, UnsupportedCodecError

MiB = 1024 * 1024
CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
ALL_PAIRS = [(c, m) for c in Compression for m in (0, 1, 2) if not (c is Compression.ZSTD and m < 2)]

_rng = random.Random(1234)
PAYLOADS = {
    "empty": b"",
    "small": b"kafka record batch payload",
    # > 1 MiB and compressible: many 32 KiB snappy / 64 KiB lz4 blocks, several gzip windows
    "large": b"".join(b"key-%08d:value-%08d;" % (i, i * 7) for i in range(60_000)),
    "incompressible": _rng.randbytes(200_000),
}


def lz4_hc(covered: bytes) -> int:
    """The lz4 frame header checksum byte, computed independently of the module."""
    return xxhash.xxh32(covered).digest()[2]


# --- round trips ------------------------------------------------------------------------


@pytest.mark.parametrize(("codec", "magic"), ALL_PAIRS, ids=lambda v: str(getattr(v, "name", v)))
@pytest.mark.parametrize("name", PAYLOADS)
def test_round_trip(codec: Compression, magic: int, name: str) -> None:
    data = PAYLOADS[name]
    packed = compress(codec, data, magic=magic)
    assert isinstance(packed, bytes)
    if codec is not Compression.NONE and name == "large":
        assert len(packed) < len(data) // 2
    for view in (packed, bytearray(packed), memoryview(packed)):
        out = decompress(codec, view, magic=magic)
        assert type(out) is bytes and out == data


def test_accepts_views_and_names() -> None:
    data = PAYLOADS["large"]
    window = memoryview(b"xx" + data + b"yy")[2:-2]
    assert compress("zstd", window) == compress(Compression.ZSTD, data)
    assert decompress(3, compress("LZ4", bytearray(data))) == data
    assert compress(0, window) == data and decompress("none", window) == data


# --- Compression.parse ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Compression.GZIP, Compression.GZIP),
        (0, Compression.NONE),
        (2, Compression.SNAPPY),
        (4, Compression.ZSTD),
        ("none", Compression.NONE),
        ("gzip", Compression.GZIP),
        ("snappy", Compression.SNAPPY),
        ("lz4", Compression.LZ4),
        ("ZSTD", Compression.ZSTD),
        ("Lz4", Compression.LZ4),
    ],
)
def test_parse(value: object, expected: Compression) -> None:
    assert Compression.parse(value) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [5, -1, 7, "lzma", "", "gz", b"gzip", None, 1.0, True])
def test_parse_rejects(value: object) -> None:
    with pytest.raises(UnsupportedCodecError, match="none, gzip, snappy, lz4, zstd"):
        Compression.parse(value)  # type: ignore[arg-type]


def test_values_are_kafka_attribute_bits() -> None:
    assert [(c.name, int(c)) for c in Compression] == [
        ("NONE", 0),
        ("GZIP", 1),
        ("SNAPPY", 2),
        ("LZ4", 3),
        ("ZSTD", 4),
    ]


@pytest.mark.parametrize("magic", [0, 1])
def test_zstd_needs_magic_2(magic: int) -> None:
    valid = compress(Compression.ZSTD, b"abc")
    with pytest.raises(UnsupportedCodecError):
        compress(Compression.ZSTD, b"abc", magic=magic)
    with pytest.raises(UnsupportedCodecError):
        decompress("zstd", valid, magic=magic)


@pytest.mark.parametrize("call", [compress, decompress])
def test_unknown_codec(call) -> None:
    with pytest.raises(UnsupportedCodecError):
        call(5, b"abc")


# --- exact Kafka framings ---------------------------------------------------------------


def test_gzip_header_is_gzipoutputstreams() -> None:
    packed = compress(Compression.GZIP, b"hi")
    # java.util.zip.GZIPOutputStream: CM deflate, no flags, mtime 0, XFL 0, OS 255
    assert packed[:10] == bytes.fromhex("1f8b08000000000000ff")
    assert struct.unpack("<II", packed[-8:]) == (zlib.crc32(b"hi"), 2)


def test_snappy_xerial_layout() -> None:
    data = PAYLOADS["large"]
    packed = compress(Compression.SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(packed):
        (n,) = struct.unpack_from(">i", packed, pos)
        blocks.append(snappy.uncompress(packed[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    assert pos == len(packed)
    assert {len(b) for b in blocks[:-1]} == {32 * 1024} and b"".join(blocks) == data
    # an empty payload is the bare header, as SnappyOutputStream writes it
    assert compress(Compression.SNAPPY, b"") == packed[:16]


@pytest.mark.parametrize("magic", [0, 1, 2])
def test_lz4_frame_header(magic: int) -> None:
    packed = compress(Compression.LZ4, PAYLOADS["large"], magic=magic)
    assert packed[:6] == bytes.fromhex("04224d18 60 40")  # version 01 + independent, 64 KiB
    assert packed[-4:] == b"\0\0\0\0"  # end mark, no content checksum
    correct, broken = lz4_hc(packed[4:6]), lz4_hc(packed[:6])
    assert correct != broken
    assert packed[6] == (broken if magic == 0 else correct)  # KAFKA-3160


def test_lz4_blocks_are_at_most_64k() -> None:
    packed = compress(Compression.LZ4, PAYLOADS["incompressible"])
    pos, sizes = 7, []
    while (word := struct.unpack_from("<I", packed, pos)[0]) != 0:
        sizes.append(word & 0x7FFFFFFF)
        assert word & 0x80000000  # incompressible blocks are stored raw, as Java does
        pos += 4 + sizes[-1]
    assert sizes[:-1] == [64 * 1024] * (len(sizes) - 1)


# --- interop with kafka-python ----------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("codec, encode, decode", [(Compression.GZIP, kp.gzip_encode, kp.gzip_decode),
                                                   (Compression.ZSTD, kp.zstd_encode, kp.zstd_decode)],
                         ids=["gzip", "zstd"])
@pytest.mark.parametrize("name", PAYLOADS)
def test_interop_gzip_and_zstd(name: str, codec, encode, decode) -> None:
    data = PAYLOADS[name]
    assert decompress(codec, encode(data)) == data
    assert decode(compress(codec, data)) == data


@pytest.mark.interop
@pytest.mark.parametrize("name", PAYLOADS)
def test_interop_snappy(name: str) -> None:
    data = PAYLOADS[name]
    assert decompress(Compression.SNAPPY, kp.snappy_encode(data, xerial_compatible=True)) == data
    assert decompress(Compression.SNAPPY, kp.snappy_encode(data, xerial_compatible=False)) == data
    ours = compress(Compression.SNAPPY, data)
    assert ours == kp.snappy_encode(data, xerial_compatible=True)
    if data:  # kafka-python only detects xerial when there is more than the bare header
        assert kp.snappy_decode(ours) == data


@pytest.mark.interop
@pytest.mark.parametrize("name", PAYLOADS)
def test_interop_lz4(name: str) -> None:
    data = PAYLOADS[name]
    theirs_new, theirs_old = kp.lz4_encode(data), kp.lz4_encode_old_kafka(data)
    if data:  # their frames carry a content size (when non-zero): our header parse must skip it
        assert theirs_new[4] & 0x08
    for magic in (0, 1, 2):
        assert decompress(Compression.LZ4, theirs_new, magic=magic) == data
        assert decompress(Compression.LZ4, theirs_old, magic=magic) == data
    assert kp.lz4_decode(compress(Compression.LZ4, data, magic=1)) == data
    assert kp.lz4_decode(compress(Compression.LZ4, data, magic=2)) == data
    old = compress(Compression.LZ4, data, magic=0)
    assert kp.lz4_decode_old_kafka(old) == data
    with pytest.raises(RuntimeError, match="headerChecksum"):
        kp.lz4_decode(old)  # the broken HC really is broken


# --- decoder leniency: what other writers produce ---------------------------------------


def test_snappy_raw_unframed() -> None:
    for data in PAYLOADS.values():
        assert decompress(Compression.SNAPPY, snappy.compress(data)) == data


def test_snappy_concatenated_xerial_streams() -> None:
    a, b = PAYLOADS["small"], PAYLOADS["large"]
    assert decompress(Compression.SNAPPY, compress("snappy", a) + compress("snappy", b)) == a + b


def test_snappy_ignores_xerial_version_fields() -> None:
    packed = bytearray(compress(Compression.SNAPPY, b"redpanda"))
    packed[8:16] = struct.pack("<ii", 1, 1)  # little-endian, as Redpanda wrote it
    assert decompress(Compression.SNAPPY, packed) == b"redpanda"


def test_gzip_concatenated_members() -> None:
    a, b = PAYLOADS["small"], PAYLOADS["large"]
    assert decompress(Compression.GZIP, compress("gzip", a) + kp.gzip_encode(b)) == a + b


def _lz4_with(flags: int, extra: bytes, *, broken: bool, data: bytes) -> bytes:
    """An lz4 frame with extra descriptor fields (content size / dict id) and a chosen HC."""
    plain = lz4.frame.compress(data, block_linked=False, store_size=False)
    descriptor = bytes((plain[4] | flags, plain[5])) + extra
    header = plain[:4] + descriptor
    return header + bytes((lz4_hc(header if broken else descriptor),)) + plain[7:]


@pytest.mark.parametrize("broken", [False, True])
@pytest.mark.parametrize(
    ("flags", "extra"),
    [(0x08, struct.pack("<Q", 5)), (0x01, b"\x01\x02\x03\x04"), (0x09, struct.pack("<Q", 5) + b"\x09\x08\x07\x06")],
    ids=["content-size", "dict-id", "both"],
)
@pytest.mark.parametrize("magic", [0, 1, 2])
def test_lz4_header_fields_and_both_checksums(flags: int, extra: bytes, broken: bool, magic: int) -> None:
    frame = _lz4_with(flags, extra, broken=broken, data=b"hello")
    assert decompress(Compression.LZ4, frame, magic=magic) == b"hello"


def test_lz4_wrong_header_checksum_is_corrupt() -> None:
    frame = bytearray(compress(Compression.LZ4, b"hello"))
    frame[6] = next(v for v in range(256) if v not in (lz4_hc(frame[4:6]), lz4_hc(frame[:6])))
    with pytest.raises(CorruptBatchError):
        decompress(Compression.LZ4, frame)


def test_zstd_without_content_size() -> None:
    data = PAYLOADS["large"]
    one_shot = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    streamed = zstandard.ZstdCompressor().compressobj()
    streamed_frame = streamed.compress(data) + streamed.flush()
    for frame in (one_shot, streamed_frame):
        assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
        assert decompress(Compression.ZSTD, frame) == data


def test_zstd_concatenated_and_skippable_frames() -> None:
    a, b = PAYLOADS["small"], PAYLOADS["large"]
    skippable = struct.pack("<II", 0x184D2A5E, 3) + b"xyz"
    checked = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False).compress(b)
    payload = compress("zstd", a) + skippable + checked + compress("zstd", b"")
    assert decompress(Compression.ZSTD, payload) == a + b


# --- decompression bombs ----------------------------------------------------------------

BOMB_SIZE = 50_000_000


@pytest.fixture(scope="module")
def bombs() -> dict[Compression, bytes]:
    return {c: compress(c, bytes(BOMB_SIZE)) for c in CODECS}


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_bomb_is_stopped_without_inflating_it(codec: Compression, bombs: dict[Compression, bytes]) -> None:
    bomb = bombs[codec]
    assert len(bomb) < BOMB_SIZE // 20  # snappy inflates at most ~21x per block
    tracemalloc.start()
    try:
        with pytest.raises(DecompressionLimitError) as info:
            decompress(codec, bomb, max_size=MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(info.value, CorruptBatchError) and info.value.limit == MiB
    assert peak < 8 * MiB, f"{peak} bytes allocated to reject a bomb"


def test_bomb_measurement_is_not_vacuous(bombs: dict[Compression, bytes]) -> None:
    """Inflating the bomb for real does show up in tracemalloc, so the bound above means something."""
    tracemalloc.start()
    try:
        assert len(decompress(Compression.ZSTD, bombs[Compression.ZSTD])) == BOMB_SIZE
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak >= BOMB_SIZE


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_small_payload_does_not_allocate_the_cap(codec: Compression) -> None:
    """lz4 allocates max_length up front: asking it for the whole 256 MiB cap at once would."""
    packed = compress(codec, b"tiny")
    tracemalloc.start()
    try:
        assert decompress(codec, packed) == b"tiny"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_limit_is_inclusive(codec: Compression) -> None:
    data = PAYLOADS["large"][:MiB]
    packed = compress(codec, data)
    assert decompress(codec, packed, max_size=MiB) == data
    with pytest.raises(DecompressionLimitError):
        decompress(codec, packed, max_size=MiB - 1)


def test_snappy_raw_limit_uses_declared_length() -> None:
    packed = snappy.compress(bytes(MiB))
    assert decompress(Compression.SNAPPY, packed, max_size=MiB) == bytes(MiB)
    with pytest.raises(DecompressionLimitError):
        decompress(Compression.SNAPPY, packed, max_size=MiB - 1)


def test_snappy_preamble_larger_than_block_can_hold() -> None:
    lie = b"\xff\xff\xff\x07" + b"\x00" * 8  # claims 16 MiB from 12 bytes
    with pytest.raises(CorruptBatchError) as info:
        decompress(Compression.SNAPPY, lie)
    assert not isinstance(info.value, DecompressionLimitError)


def test_default_limit() -> None:
    assert DEFAULT_MAX_DECOMPRESSED_SIZE == 256 * MiB


# --- corrupt input ----------------------------------------------------------------------


def _valid(codec: Compression) -> bytes:
    return compress(codec, PAYLOADS["large"][:100_000])


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize(
    "mangle",
    [
        lambda v: b"",
        lambda v: b"\xff",
        lambda v: b"this is not compressed at all, honest",
        lambda v: v[: len(v) // 2],
        lambda v: v[:-1],
        lambda v: v[:5],
        lambda v: v + b"trailing junk",
    ],
    ids=["empty", "one-byte", "text", "half", "minus-one", "header-only", "trailing"],
)
def test_corrupt_input(codec: Compression, mangle) -> None:
    with pytest.raises(CorruptBatchError) as info:
        decompress(codec, mangle(_valid(codec)))
    assert not isinstance(info.value, DecompressionLimitError)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_library_error_is_chained(codec: Compression) -> None:
    packed = bytearray(_valid(codec))
    packed[len(packed) // 2 : len(packed) // 2 + 16] = os.urandom(16)
    packed[-12:] = b"\xff" * 12
    try:
        decompress(codec, packed)
    except CorruptBatchError as exc:
        assert codec.name.lower() in str(exc)
    else:
        pytest.fail("a scribbled-over payload decoded")


def test_xerial_truncated_header() -> None:
    with pytest.raises(CorruptBatchError, match="xerial"):
        decompress(Compression.SNAPPY, compress("snappy", b"abc") + b"\x82SNAPPY\x00\x00")


def _survives(codec: Compression, payload: bytes) -> None:
    try:
        out = decompress(codec, payload, max_size=MiB)
    except CorruptBatchError:
        return
    assert isinstance(out, bytes) and len(out) <= MiB


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), payload=st.binary(max_size=300))
def test_fuzz_random_bytes(codec: Compression, payload: bytes) -> None:
    _survives(codec, payload)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(codec=st.sampled_from(CODECS), magic=st.sampled_from([0, 2]), data=st.data())
def test_fuzz_mangled_payloads(codec: Compression, magic: int, data: st.DataObject) -> None:
    original = data.draw(st.sampled_from([b"", b"x", PAYLOADS["small"] * 50, PAYLOADS["incompressible"][:3000]]))
    packed = bytearray(compress(codec, original, magic=2 if codec is Compression.ZSTD else magic))
    cut = data.draw(st.integers(0, len(packed)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(cut - 1, 0)), st.integers(0, 7)), max_size=4))
    mangled = packed[:cut]
    for pos, bit in flips:
        if pos < len(mangled):
            mangled[pos] ^= 1 << bit
    _survives(codec, bytes(mangled))


def test_negative_cap_is_a_typed_error():
    # zlib and lz4 read a non-positive max_length as "no limit"; refuse it instead of unbounding.
    data = compress("gzip", b"x" * 100)
    with pytest.raises(InvalidRecordError):
        decompress("gzip", data, max_size=-1)
