"""Header-only iteration (``iter_batches`` / ``read_batch``): order, truncation, bad sizes and
magics, zero-copy views, no decompression, and where errors say the bad batch was. ``iter_v2``
frames the same v2 batches without an object each, and stops where it should leave the rest to
``iter_batches``; ``check_v2`` fails as ``checked_header`` does.

Modelled on Kafka's ``ByteBufferLogInputStreamTest`` (a cut-off last batch ends iteration,
a bad size raises) and franz-go's decompression-bomb test.
"""

from __future__ import annotations

import struct
import zlib

import crc32c
import lz4.frame
import pytest
import snappy
import zstandard

import kcodecs
from kcodecs import Compression, CorruptBatchError, DecompressionLimitError, Record, _compression, _legacy, _v2

from conftest import sample_records

# magic, codec, record count: v0, v1 and v2 back to back, some compressed. Uncompressed v0/v1
# sets hold one message per batch, so they get one record each to keep one part = one batch.
MIXED = [(0, "none", 1), (1, "gzip", 3), (2, "zstd", 3), (0, "snappy", 2), (2, "none", 2), (1, "none", 1),
         (1, "lz4", 2), (2, "lz4", 1), (0, "gzip", 2), (2, "snappy", 4)]


def _mixed() -> tuple[bytes, list[tuple[int, str, int, int, int, list[Record]]]]:
    """The concatenation, plus (magic, codec, position, base, last, records) per batch, from the build inputs."""
    parts, expected = [], []
    position, offset = 0, 1000
    for magic, codec, count in MIXED:
        records = sample_records(magic, count=count, base_ts=1_650_000_000_000 + offset)
        part = kcodecs.build_batch(records, magic=magic, compression=codec, base_offset=offset)
        expected.append((magic, codec, position, offset, offset + count - 1, records))
        parts.append(part)
        position += len(part)
        offset += count
    return b"".join(parts), expected


def test_mixed_magics_are_yielded_in_order():
    data, expected = _mixed()
    batches = list(kcodecs.iter_batches(data))
    assert len(batches) == len(expected)
    for batch, (magic, codec, position, base, last, records) in zip(batches, expected):
        assert type(batch) is (kcodecs.V2Batch if magic == 2 else kcodecs.LegacyBatch)
        assert (batch.magic, batch.compression, batch.position) == (magic, Compression.parse(codec), position)
        assert (batch.base_offset, batch.last_offset, batch.next_offset) == (base, last, last + 1)
        got = [(r.offset, r.key, r.value) for r in batch.records()]
        assert got == [(base + i, r.key, r.value) for i, r in enumerate(records)]
        batch.validate(deep=True)
    assert batches[-1].position + batches[-1].size == len(data)


def test_start_resumes_at_a_batch_boundary():
    data, expected = _mixed()
    start = expected[4][2]
    batches = list(kcodecs.iter_batches(data, start=start))
    assert [b.position for b in batches] == [e[2] for e in expected[4:]]  # positions stay absolute
    assert list(kcodecs.iter_batches(data, start=len(data))) == []


def test_iter_v2_frames_the_v2_batches_iter_batches_yields_and_stops_before_anything_else():
    data, expected = _mixed()
    v2_starts = [i for i, e in enumerate(expected) if e[0] == 2]
    for i in v2_starts:
        position = expected[i][2]
        run = list(kcodecs.iter_v2(data, start=position))
        assert len(run) == 1  # every v2 batch of MIXED is followed by a v0/v1 one, or is the last
        batch = list(kcodecs.iter_batches(data, start=position))[0]
        assert run[0][0] == position and bytes(run[0][1]) == bytes(batch.raw)
        assert kcodecs.check_v2(run[0][1], position) == batch.checked_header()
    v2_only = b"".join(kcodecs.build_batch(sample_records(2, count=2, base_ts=5), base_offset=10 * i) for i in range(4))
    framed = list(kcodecs.iter_v2(v2_only))
    assert [(p, bytes(raw)) for p, raw in framed] == [(b.position, bytes(b.raw)) for b in kcodecs.iter_batches(v2_only)]
    assert list(kcodecs.iter_v2(data, start=expected[0][2])) == []  # a v0 batch first
    for keep in (0, 11, 12, 60, len(framed[-1][1]) - 1):  # the last batch cut off: the others still come
        cut = v2_only[:framed[-1][0] + keep]
        assert [p for p, _ in kcodecs.iter_v2(cut)] == [p for p, _ in framed[:-1]]
    too_small = bytearray(v2_only)
    struct.pack_into(">i", too_small, framed[1][0] + 8, 48)  # below a v2 header: iter_batches raises there
    assert [p for p, _ in kcodecs.iter_v2(too_small)] == [framed[0][0]]
    with pytest.raises(CorruptBatchError):
        list(kcodecs.iter_batches(too_small, start=framed[1][0]))


def test_check_v2_refuses_as_checked_header_does():
    good = bytearray(kcodecs.build_batch(sample_records(2, count=3, base_ts=5), base_offset=70))
    for flip in (17, 30, len(good) - 1):  # the stored CRC, a header field, the last record byte
        bad = bytearray(good)
        bad[flip] ^= 0x01
        with pytest.raises(CorruptBatchError) as ours:
            kcodecs.check_v2(memoryview(bad), 1234)
        with pytest.raises(CorruptBatchError) as theirs:
            kcodecs.read_batch(bad, position=1234).checked_header()
        assert (ours.value.position, ours.value.offset, ours.value.reason) == \
            (theirs.value.position, theirs.value.offset, theirs.value.reason) == (1234, 70, theirs.value.reason)
        assert "CRC" in ours.value.reason


@pytest.mark.parametrize("keep", [0, 1, 11, 12, 17, 60, -1])
def test_truncated_final_batch_ends_quietly(keep):
    """Cut the last batch after ``keep`` of its bytes (-1: all but one): the earlier ones still come out."""
    data, expected = _mixed()
    last_position = expected[-1][2]
    cut = len(data) - 1 if keep == -1 else last_position + keep
    batches = list(kcodecs.iter_batches(data[:cut]))
    assert [b.position for b in batches] == [e[2] for e in expected[:-1]]
    assert batches[-1].last_offset == expected[-2][4]
    with pytest.raises(CorruptBatchError) as info:
        kcodecs.read_batch(data[last_position:cut], position=last_position)
    assert info.value.position == last_position


def _with_size(data: bytes, position: int, size: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(">i", out, position + 8, size)
    return bytes(out)


@pytest.mark.parametrize("size", [-1, 0, 13, -(2**31)])
def test_size_below_any_format_raises_with_position(size):
    data, expected = _mixed()
    bad_position, bad_offset = expected[3][2], expected[3][4]  # a v0 wrapper: its offset field is its last offset
    bad = _with_size(data, bad_position, size)
    seen = []
    with pytest.raises(CorruptBatchError) as info:
        for batch in kcodecs.iter_batches(bad):
            seen.append(batch.position)
    assert seen == [e[2] for e in expected[:3]]  # the ones before it were yielded
    assert (info.value.position, info.value.offset) == (bad_position, bad_offset)
    assert f"byte {bad_position}" in str(info.value) and str(size) in str(info.value)


@pytest.mark.parametrize(("index", "size"), [(2, 14), (2, 48), (5, 21), (0, 13)])
def test_size_below_the_magics_minimum_raises_with_position(index, size):
    """v2 needs 49 bytes after the log overhead, v1 22, v0 14 (Kafka's RECORD_BATCH_OVERHEAD / RECORD_OVERHEAD)."""
    data, expected = _mixed()
    magic, _, position, base, last, _ = expected[index]
    offset_field = base if magic == 2 else last
    bad = _with_size(data, position, size)
    with pytest.raises(CorruptBatchError) as info:
        list(kcodecs.iter_batches(bad))
    assert (info.value.position, info.value.offset) == (position, offset_field)
    with pytest.raises(CorruptBatchError) as info:
        kcodecs.read_batch(bad[position:], position=position)
    assert (info.value.position, info.value.offset) == (position, offset_field)


@pytest.mark.parametrize("magic", [3, 4, 0x7F, 0xFF])
def test_unknown_magic_raises_with_position(magic):
    data, expected = _mixed()
    position = expected[4][2]
    bad = bytearray(data)
    bad[position + 16] = magic
    with pytest.raises(CorruptBatchError) as info:
        list(kcodecs.iter_batches(bad))
    assert info.value.position == position and "magic" in str(info.value)
    with pytest.raises(CorruptBatchError) as info:
        kcodecs.read_batch(bytes(bad[position:]), position=position)
    assert info.value.position == position


def test_short_or_empty_buffers():
    data, _ = _mixed()
    for cut in range(12):
        assert list(kcodecs.iter_batches(data[:cut])) == []
        with pytest.raises(CorruptBatchError):
            kcodecs.read_batch(data[:cut])


# --- views, not copies --------------------------------------------------------------------------------------


def test_raw_is_a_view_of_a_bytearray():
    data, expected = _mixed()
    buf = bytearray(data)
    batches = list(kcodecs.iter_batches(buf))
    for batch in batches:
        assert isinstance(batch.raw, memoryview)
        assert batch.raw.obj is buf
        assert bytes(batch.raw) == data[batch.position : batch.position + batch.size]
    target = batches[4]
    buf[target.position + 3] ^= 0xFF  # inside the base offset, mutated after iteration
    assert target.raw[3] == buf[target.position + 3]
    assert target.base_offset != expected[4][3]


def test_raw_of_bytes_and_of_a_memoryview_slice_share_the_input():
    data, expected = _mixed()
    for batch in kcodecs.iter_batches(data):
        assert batch.raw.obj is data and batch.raw.readonly
    buf = bytearray(data)
    start = expected[2][2]
    view = memoryview(buf)[start:]
    batches = list(kcodecs.iter_batches(view))
    assert [b.position for b in batches] == [e[2] - start for e in expected[2:]]  # relative to the view
    assert all(b.raw.obj is buf for b in batches)
    single = kcodecs.read_batch(view, position=start)
    assert single.raw.obj is buf and single.position == start


# --- header-only: nothing decompresses ----------------------------------------------------------------------


class Decompressed(AssertionError):
    pass


def _forbid_decompression(monkeypatch):
    def boom(*args, **kwargs):
        raise Decompressed("header-only code decompressed")

    for module in (_compression, _v2, _legacy):
        monkeypatch.setattr(module, "decompress", boom)
    # And the libraries themselves, whatever route _compression takes to them.
    monkeypatch.setattr(zlib, "decompressobj", boom)
    monkeypatch.setattr(zlib, "decompress", boom)
    monkeypatch.setattr(snappy, "uncompress", boom)
    monkeypatch.setattr(snappy, "decompress", boom)
    monkeypatch.setattr(lz4.frame, "LZ4FrameDecompressor", boom)
    monkeypatch.setattr(lz4.frame, "decompress", boom)
    monkeypatch.setattr(zstandard, "ZstdDecompressor", boom)


HEADER_ONLY_V2 = ["magic", "attributes", "base_offset", "last_offset_delta", "last_offset", "next_offset",
                  "partition_leader_epoch", "crc", "compression", "timestamp_type", "base_timestamp", "max_timestamp",
                  "is_control", "is_transactional", "has_delete_horizon", "has_no_keys_flag", "producer_id",
                  "producer_epoch", "base_sequence", "record_count", "size"]
# base_offset of a compressed v0/v1 wrapper is the documented exception: only the inner set knows it.
HEADER_ONLY_LEGACY = ["magic", "attributes", "wrapper_offset", "last_offset", "next_offset", "crc", "compression",
                      "timestamp_type", "max_timestamp", "is_control", "is_transactional", "producer_id",
                      "has_no_keys_flag", "record_count", "size"]


def test_iteration_and_headers_never_decompress(monkeypatch):
    data = b"".join(
        kcodecs.build_batch(sample_records(magic, count=5), magic=magic, compression=codec, base_offset=10 * i)
        for i, (magic, codec) in enumerate(
            (m, c) for m in (0, 1, 2) for c in ("gzip", "snappy", "lz4", "zstd") if not (c == "zstd" and m < 2)
        )
    )
    _forbid_decompression(monkeypatch)
    batches = list(kcodecs.iter_batches(data))
    assert len(batches) == 10 and all(b.compression is not Compression.NONE for b in batches)
    for batch in batches:
        names = HEADER_ONLY_V2 if batch.magic == 2 else HEADER_ONLY_LEGACY
        for name in names:
            getattr(batch, name)
        repr(batch)
        batch.validate()  # shallow: CRC and header consistency only
        if batch.magic == 2:
            assert batch.has_contiguous_offsets()  # v2 answers from the header
        read = kcodecs.read_batch(batch.raw, position=batch.position)
        assert read.last_offset == batch.last_offset
        with pytest.raises(Decompressed):  # the patch above is live: decoding does hit it
            list(batch.records())


# --- decompression bombs ------------------------------------------------------------------------------------

BOMB = 4 << 20
CAP = 1 << 20


@pytest.mark.parametrize(("magic", "codec"), [(2, "zstd"), (2, "gzip"), (2, "lz4"), (2, "snappy"), (1, "gzip"),
                                              (0, "gzip"), (1, "lz4")])
def test_decompression_bomb_inside_a_batch(magic, codec):
    head = kcodecs.build_batch([Record(value=b"small", timestamp=1)], magic=magic, base_offset=999)
    bomb = kcodecs.build_batch([Record(value=bytes(BOMB), timestamp=2)], magic=magic, compression=codec,
                               base_offset=1000)
    assert len(bomb) * 15 < BOMB  # it really is a bomb: far smaller than what it inflates to
    data = head + bomb
    _, batch = kcodecs.iter_batches(data)  # header-only iteration is fine
    assert batch.position == len(head)
    with pytest.raises(DecompressionLimitError) as info:
        list(batch.records(max_size=CAP))
    error = info.value
    assert isinstance(error, CorruptBatchError)
    assert (error.position, error.offset, error.limit) == (len(head), 1000, CAP)
    assert f"byte {len(head)}" in str(error) and "offset 1000" in str(error) and str(CAP) in str(error)
    with pytest.raises(DecompressionLimitError):
        batch.validate(deep=True, max_size=CAP)
    # Under a cap it fits, the same batch decodes: the limit, not corruption, stopped it.
    (record,) = batch.records(max_size=BOMB + 1024)
    assert record.value == bytes(BOMB)


# --- errors say where ---------------------------------------------------------------------------------------


def test_crc_error_names_the_batch_position_and_offset():
    data, expected = _mixed()
    for index in (2, 3):  # a v2 batch and a v0 wrapper
        magic, _, position, base, last, _ = expected[index]
        bad = bytearray(data)
        bad[position + 17 if magic == 2 else position + 12] ^= 0x01  # the stored CRC itself
        batch = list(kcodecs.iter_batches(bad))[index]
        with pytest.raises(CorruptBatchError) as info:
            batch.validate()
        error = info.value
        # v2 errors carry the base offset; a v0/v1 message carries its own offset field (a wrapper's last).
        assert (error.position, error.offset) == (position, base if magic == 2 else last)
        assert "CRC" in error.reason
        assert str(error).startswith(f"corrupt batch at byte {position}, offset {error.offset}: ")


def _v2_with_records_body(body: bytes, count: int, base_offset: int) -> bytes:
    """A v2 batch around an arbitrary records section, with a correct CRC."""
    out = bytearray(struct.pack(">qiibIhiqqqhii", base_offset, 49 + len(body), -1, 2, 0, 0, count - 1, 5, 5, -1, -1, -1,
                                count) + body)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def test_record_level_error_names_the_batch():
    head = kcodecs.build_batch([Record(value=b"x", timestamp=1)])
    # One record whose key length (50) runs past its end: length 7, attrs, ts 0, delta 0, key len 50, ...
    body = bytes([7 * 2, 0, 0, 0, 50 * 2, 1, 1, 0])
    data = head + _v2_with_records_body(body[:8], 1, 77)
    _, batch = kcodecs.iter_batches(data)
    batch.validate()  # the CRC is right: only decoding finds it
    with pytest.raises(CorruptBatchError) as info:
        list(batch.records())
    assert (info.value.position, info.value.offset) == (len(head), 77)
    assert f"byte {len(head)}" in str(info.value)


def _legacy_message(offset: int, magic: int, attributes: int, key: bytes | None, value: bytes | None) -> bytes:
    body = bytes([magic, attributes]) + (struct.pack(">q", 5) if magic == 1 else b"")
    for field in (key, value):
        body += struct.pack(">i", -1 if field is None else len(field)) + (field or b"")
    return struct.pack(">qiI", offset, 4 + len(body), zlib.crc32(body)) + body


@pytest.mark.parametrize("magic", [0, 1])
def test_inner_message_error_names_the_wrapper(magic):
    """A broken message inside a compressed wrapper is reported at the wrapper's position and offset,
    not at its position inside the decompressed inner set."""
    good = _legacy_message(0 if magic == 1 else 500, magic, 0, b"k", b"v")
    broken = bytearray(_legacy_message(1 if magic == 1 else 501, magic, 0, b"k", b"v"))
    value_length_at = _legacy.KEY_LENGTH[magic] + 4 + 1
    struct.pack_into(">i", broken, value_length_at, 50)  # value length runs past the message
    struct.pack_into(">I", broken, 12, zlib.crc32(bytes(broken[16:])))  # ...with a correct inner CRC
    wrapper = _legacy_message(501, magic, int(Compression.GZIP), None, kcodecs.compress("gzip", good + bytes(broken)))
    head = kcodecs.build_batch([Record(value=b"x", timestamp=1)], magic=magic, base_offset=499)
    _, batch = kcodecs.iter_batches(head + wrapper)
    batch.validate()
    for call in (lambda: list(batch.records()), lambda: batch.validate(deep=True)):
        with pytest.raises(CorruptBatchError) as info:
            call()
        assert (info.value.position, info.value.offset) == (len(head), 501)
        assert f"byte {len(head)}, offset 501" in str(info.value)


def test_error_without_location_reads_plainly():
    error = CorruptBatchError("bad thing")
    assert str(error) == "corrupt batch: bad thing" and error.position is None and error.offset is None
    assert str(error.at(40, 3)) == "corrupt batch at byte 40, offset 3: bad thing"
    assert str(error.at(99, 99)) == "corrupt batch at byte 40, offset 3: bad thing"  # the first location wins
