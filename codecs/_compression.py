"""Kafka's compression codecs, byte-for-byte in the framings the Java client writes.

Pure functions over buffers: :func:`compress` and :func:`decompress`. The codec ids equal
the attribute bits of a v2 batch / v0-v1 message (K CompressionType). Each payload is the
whole records section of one batch (or the inner message set of a v0/v1 wrapper).

gzip (K GzipCompression -> java.util.zip.GZIPOutputStream)
    One RFC 1952 member: ``1f 8b 08 00 | mtime 0 | xfl 0 | os ff`` + raw deflate +
    CRC32 LE + ISIZE LE. We write that header by hand because Python's ``gzip`` varies
    XFL and OS with level and version. Decoding accepts concatenated members, like
    GZIPInputStream.

snappy (K SnappyFactory -> org.xerial.snappy.SnappyOutputStream), the "xerial" framing::

     0   8  magic            b"\\x82SNAPPY\\x00"
     8   4  version          int32 BE, 1
    12   4  compatible ver.  int32 BE, 1
    16      blocks           int32 BE compressed length + one raw snappy block,
                             each from at most 32 KiB of input (snappy-java's default)

    SnappyInputStream also reads unframed (raw) snappy and streams concatenated after a
    second magic header, so we do too. Each raw block starts with a varint giving its
    uncompressed length, which lets the size cap act before anything is inflated.

lz4 (K Lz4Compression -> Lz4BlockOutputStream), the LZ4 frame format: magic
    ``04 22 4d 18``, FLG 0x60 (version 01, independent blocks, no block or content
    checksum, no content size), BD 0x40 (64 KiB blocks), HC; blocks; 4-byte end mark.
    HC is ``(xxh32(FLG..last descriptor byte) >> 8) & 0xff``. KAFKA-3160: Kafka before
    0.10 hashed the 4 magic bytes as well, and Kafka still writes that broken HC for
    magic 0 (and ignores HC when reading magic 0). We write it for magic 0 and read both
    variants for every magic.

zstd (K ZstdCompression -> zstd-jni ZstdOutputStream), v2 batches only (KIP-110).
    Plain zstd frames. zstd-jni streams frames without a content size, and some writers
    concatenate frames, so decoding reads across frames and never trusts a size field.

Errors from the libraries never escape: they become :class:`CorruptBatchError`. Output
above ``max_size`` raises :class:`DecompressionLimitError` after inflating at most
``max_size + 1`` bytes (snappy: from the declared lengths, before inflating anything).
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from enum import IntEnum

import lz4.frame  # type: ignore[import-untyped]
import snappy  # type: ignore[import-untyped]
import xxhash
import zstandard

from ._errors import CorruptBatchError, DecompressionLimitError, InvalidRecordError, UnsupportedCodecError

__all__ = ["Compression", "DEFAULT_MAX_DECOMPRESSED_SIZE", "compress", "decompress"]

Buffer = bytes | bytearray | memoryview

#: Kafka caps a batch at message.max.bytes / max.message.bytes (1 MiB by default; people
#: raise it to tens of MiB) and records compress ~2-10x, so a real payload stays far below
#: 256 MiB, while a bomb (a few KiB that inflate to GiBs) is stopped after 256 MiB.
DEFAULT_MAX_DECOMPRESSED_SIZE = 256 * 1024 * 1024


class Compression(IntEnum):
    """Codec ids, equal to the low 3 attribute bits (K CompressionType)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, value: Compression | int | str) -> Compression:
        """Accept a member, its id or its name (any case), e.g. from config strings."""
        if type(value) is cls:  # the batch path's case, once per batch: no lookup
            return value
        try:
            if isinstance(value, str):
                return cls[value.strip().upper()]
            if isinstance(value, int) and not isinstance(value, bool):
                return cls(value)
        except (KeyError, ValueError):
            pass
        names = ", ".join(c.name.lower() for c in cls)
        raise UnsupportedCodecError(f"unknown compression codec {value!r}; valid: {names}")


# Output is pulled from the lz4 and zstd decompressors this much at a time.
_READ_CHUNK = 1 << 20

# Errors the codec libraries raise on bad input; translated at the boundary in decompress().
_LIBRARY_ERRORS: tuple[type[Exception], ...] = (
    zlib.error,  # gzip
    snappy.UncompressError,  # python-snappy wraps cramjam.DecompressionError in this
    RuntimeError,  # lz4.frame reports every LZ4F error as RuntimeError
    zstandard.ZstdError,
    EOFError,
    ValueError,
    OverflowError,
    struct.error,  # our own header walks running off the end
)


def compress(codec: Compression | int | str, data: Buffer, *, magic: int = 2) -> bytes:
    """Compress ``data`` in the framing Kafka's Java producer writes for ``magic``."""
    codec = _check(codec, magic)
    return _ENCODERS[codec](memoryview(data).cast("B"), magic)


def decompress(
    codec: Compression | int | str,
    data: Buffer,
    *,
    magic: int = 2,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> bytes:
    """Inflate a Kafka payload, refusing to produce more than ``max_size`` bytes."""
    codec = _check(codec, magic)
    if max_size < 0:  # zlib and lz4 would read a non-positive max_length as "no limit"
        raise InvalidRecordError(f"max_size must be >= 0, not {max_size}")
    try:
        return _DECODERS[codec](memoryview(data).cast("B"), max_size)
    except _LIBRARY_ERRORS as exc:
        raise CorruptBatchError(f"{codec.name.lower()}: {exc}") from exc


def _check(codec: Compression | int | str, magic: int) -> Compression:
    codec = Compression.parse(codec)
    if codec is Compression.ZSTD and magic < 2:
        # Kafka rejects zstd in v0/v1 (KIP-110: old consumers could not read it).
        raise UnsupportedCodecError(f"zstd needs record format v2, not magic {magic}")
    return codec


# --- none -------------------------------------------------------------------------------


def _none_encode(view: memoryview, magic: int) -> bytes:
    return bytes(view)


def _none_decode(view: memoryview, max_size: int) -> bytes:
    return bytes(view)  # nothing inflates, so there is nothing to cap


# --- gzip -------------------------------------------------------------------------------

# java.util.zip.GZIPOutputStream: no flags, mtime 0, XFL 0, OS 255 (JDK 16+; 0 before).
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
_GZIP_TRAILER = struct.Struct("<II")  # CRC32 and ISIZE (length mod 2**32), little-endian
_GZIP_LEVEL = 6  # Deflater.DEFAULT_COMPRESSION, Kafka's default gzip level
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip wrapper only, as GZIPInputStream accepts


def _gzip_encode(view: memoryview, magic: int) -> bytes:
    deflate = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    trailer = _GZIP_TRAILER.pack(zlib.crc32(view), len(view) & 0xFFFFFFFF)
    return b"".join((_GZIP_HEADER, deflate.compress(view), deflate.flush(), trailer))


def _gzip_decode(view: memoryview, max_size: int) -> bytes:
    out: list[bytes] = []
    total = 0
    rest: Buffer = view
    while True:  # one member per pass; GZIPInputStream reads concatenated members too
        inflater = zlib.decompressobj(_GZIP_WBITS)
        # With max_length, zlib stops early only when the output is full; so if it is not
        # over the cap and not at the member's end, the input ran out: truncated.
        chunk = inflater.decompress(rest, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise DecompressionLimitError(max_size)
        out.append(chunk)
        if not inflater.eof:
            raise CorruptBatchError("gzip: truncated stream")
        rest = inflater.unused_data  # zlib checked this member's CRC32 and ISIZE
        if not rest:
            return b"".join(out)  # a single part is returned as is, not copied


# --- snappy -----------------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version, compatible version (SnappyCodec)
_XERIAL_V1 = _XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1)
_XERIAL_BLOCK_LEN = struct.Struct(">i")
_XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream.DEFAULT_BLOCK_SIZE
# A snappy element of 3 bytes copies at most 64 bytes, so no block inflates more than
# ~21x; a preamble claiming more is a lie, caught before the library allocates for it.
_SNAPPY_MAX_RATIO = 22


def _snappy_encode(view: memoryview, magic: int) -> bytes:
    parts = [_XERIAL_V1]  # SnappyOutputStream writes the header even for no data
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = snappy.compress(view[start : start + _XERIAL_BLOCK_SIZE])
        parts += (_XERIAL_BLOCK_LEN.pack(len(block)), block)
    return b"".join(parts)


def _snappy_decode(view: memoryview, max_size: int) -> bytes:
    blocks = list(_xerial_blocks(view)) if view[:8] == _XERIAL_MAGIC else [view]
    # Check the declared sizes of every block first: the cap costs no inflation at all.
    total = sum(_snappy_length(block) for block in blocks)
    if total > max_size:
        raise DecompressionLimitError(max_size)
    return b"".join(snappy.uncompress(block) for block in blocks)


def _xerial_blocks(view: memoryview) -> Iterator[memoryview]:
    pos = 0
    while pos < len(view):
        if view[pos : pos + 8] == _XERIAL_MAGIC:
            # A stream header, at the start or where snappy-java's SnappyInputStream
            # accepts another concatenated stream. Version fields are ignored: some
            # writers (Redpanda) put them little-endian (kafka-python #2414).
            if len(view) - pos < _XERIAL_HEADER.size:
                raise CorruptBatchError("snappy: truncated xerial header")
            pos += _XERIAL_HEADER.size
            continue
        (length,) = _XERIAL_BLOCK_LEN.unpack_from(view, pos)
        pos += _XERIAL_BLOCK_LEN.size
        if length <= 0 or length > len(view) - pos:
            raise CorruptBatchError(f"snappy: xerial block of {length} bytes at byte {pos - 4} does not fit")
        yield view[pos : pos + length]
        pos += length


def _snappy_length(block: memoryview) -> int:
    """The uncompressed length a raw snappy block declares in its varint preamble."""
    length = 0
    for i, byte in enumerate(block[:5]):  # a uint32 varint takes at most 5 bytes
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            if length > _SNAPPY_MAX_RATIO * len(block):
                raise CorruptBatchError(f"snappy: block of {len(block)} bytes claims {length} bytes")
            return length
    raise CorruptBatchError("snappy: bad length preamble")


# --- lz4 --------------------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_DICT_ID = 0x01


def _lz4_encode(view: memoryview, magic: int) -> bytes:
    # Lz4BlockOutputStream: 64 KiB independent blocks, no checksums, no content size, fast
    # compressor at the default level; incompressible blocks stored raw, as lz4 does too.
    frame: bytes = lz4.frame.compress(
        view,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        block_checksum=False,
        content_checksum=False,
        store_size=False,
    )
    if magic != 0:
        return frame
    # Without content size or dict id the header is magic, FLG, BD, HC: HC is byte 6.
    return b"".join((frame[:6], bytes((_lz4_hc(frame[:6]),)), memoryview(frame)[7:]))


def _lz4_hc(covered: Buffer) -> int:
    """The frame-descriptor checksum byte over ``covered`` (lz4 frame format, section HC)."""
    return (xxhash.xxh32_intdigest(covered) >> 8) & 0xFF


def _lz4_header_checksums(view: memoryview) -> tuple[int, int, int] | None:
    """(HC position, correct HC, KAFKA-3160 HC), or None when there is no whole header."""
    if len(view) < 7 or view[:4] != _LZ4_MAGIC:
        return None
    flg = view[4]
    end = 6 + (8 if flg & _LZ4_FLG_CONTENT_SIZE else 0) + (4 if flg & _LZ4_FLG_DICT_ID else 0)
    if len(view) <= end:
        return None
    return end, _lz4_hc(view[4:end]), _lz4_hc(view[:end])


_LZ4_MAX_RATIO = 256
"""An LZ4 block inflates at most 255-fold (each length-extension byte adds 255 bytes of match),
so a frame of n bytes holds less than 256 n."""


def _lz4_decode(view: memoryview, max_size: int) -> bytes:
    if (len(view) > 7 and view[4] & (_LZ4_FLG_CONTENT_SIZE | _LZ4_FLG_DICT_ID) == 0 and view[:4] == _LZ4_MAGIC
            and view[6] == _lz4_hc(view[4:6]) and len(view) * _LZ4_MAX_RATIO <= max_size):
        # A frame too small to exceed max_size, with no declared size to allocate for: one
        # call, where the streaming decompressor below costs four times a one-record batch's
        # whole inflate (docs/performance.md, "Small source batches").
        out, read = lz4.frame.decompress(view, return_bytes_read=True)
        if read != len(view):  # Lz4BlockInputStream reads exactly one frame
            raise CorruptBatchError(f"lz4: {len(view) - read} bytes after the end mark")
        return out
    inflater = lz4.frame.LZ4FrameDecompressor()
    hc = _lz4_header_checksums(view)
    if hc is not None and view[hc[0]] != hc[1] and view[hc[0]] == hc[2]:
        # KAFKA-3160 header: feed a corrected copy of the header, then the rest as a view.
        inflater.decompress(bytes(view[: hc[0]]) + bytes((hc[1],)))
        view = view[hc[0] + 1 :]
    out: list[bytes] = []
    total = 0
    pending: Buffer = view
    while not inflater.eof:
        # lz4 allocates max_length up front, so read in bounded chunks, not max_size at once.
        chunk = inflater.decompress(pending, max_length=min(max_size - total + 1, _READ_CHUNK))
        pending = b""  # the decompressor keeps whatever input it has not used yet
        if not chunk and not inflater.eof:
            raise CorruptBatchError("lz4: truncated frame")
        total += len(chunk)
        if total > max_size:
            raise DecompressionLimitError(max_size)
        out.append(chunk)
    if inflater.unused_data:  # Lz4BlockInputStream reads exactly one frame
        raise CorruptBatchError(f"lz4: {len(inflater.unused_data)} bytes after the end mark")
    return b"".join(out)


# --- zstd -------------------------------------------------------------------------------

_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50  # low 4 bits free
_ZSTD_U32 = struct.Struct("<I")
_ZSTD_FHD = struct.Struct("<B")  # frame header descriptor
_ZSTD_BLOCK = struct.Struct("<HB")  # 3-byte LE block header: last(1) type(2) size(21)
_ZSTD_RLE_BLOCK = 1
_ZSTD_COMPRESSED_BLOCK = 2


def _zstd_encode(view: memoryview, magic: int) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress(view)  # Kafka's default zstd level


def _zstd_decode(view: memoryview, max_size: int) -> bytes:
    frames, bound = _zstd_check_frames(view)
    if frames and bound <= max_size:
        # Every frame too small to exceed max_size: each in one call, with this thread's
        # decompression context, where a new context and a stream reader cost three times a
        # small batch's whole inflate (docs/performance.md, "Small source batches").
        return _zstd_frames(view)
    out: list[bytes] = []
    total = 0
    with zstandard.ZstdDecompressor().stream_reader(view, read_across_frames=True) as reader:
        while chunk := reader.read(min(max_size - total + 1, _READ_CHUNK)):
            total += len(chunk)
            if total > max_size:
                raise DecompressionLimitError(max_size)
            out.append(chunk)
    return b"".join(out)


def _zstd_frames(view: memoryview) -> bytes:
    """The output of ``view``'s frames (checked whole, none skippable), one call each."""
    context = getattr(_ZSTD_CONTEXT, "decompressor", None)
    if context is None:
        context = _ZSTD_CONTEXT.decompressor = zstandard.ZstdDecompressor()
    out: list[bytes] = []
    pending: Buffer = view
    while pending:
        frame = context.decompressobj()
        out.append(frame.decompress(pending))
        if not frame.eof:
            raise CorruptBatchError("zstd: truncated frame")
        pending = frame.unused_data
    return b"".join(out)


_ZSTD_CONTEXT = threading.local()
"""A decompression context per thread (a context must not be shared by two at once)."""
_ZSTD_MAX_BLOCK = 128 * 1024
"""What a compressed block inflates to at most (RFC 8878, Block_Maximum_Size)."""


def _zstd_check_frames(view: memoryview) -> tuple[int, int]:
    """Walk frame and block headers (RFC 8878) to reject truncation and trailing bytes.

    zstandard's stream_reader returns a cut-off frame's output without complaint. Returns
    the number of frames (0 when any is skippable: those take the stream reader) and a bound
    on their output, from each block's header: a raw or RLE block's size, 128 KiB for a
    compressed one.
    """
    if not view:
        raise CorruptBatchError("zstd: empty payload")
    pos = frames = bound = 0
    skippable = False
    while pos < len(view):
        (magic,) = _ZSTD_U32.unpack_from(view, pos)
        if magic & ~0xF == _ZSTD_SKIPPABLE_MAGIC:
            pos += 8 + _ZSTD_U32.unpack_from(view, pos + 4)[0]
            skippable = True
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptBatchError(f"zstd: bad frame magic {magic:#010x} at byte {pos}")
        (fhd,) = _ZSTD_FHD.unpack_from(view, pos + 4)
        single_segment = fhd >> 5 & 1
        pos += 5 + (1 - single_segment)  # magic, descriptor, window descriptor
        pos += (0, 1, 2, 4)[fhd & 3] + (single_segment, 2, 4, 8)[fhd >> 6]  # dict id, content size
        last = 0
        while not last:
            low, high = _ZSTD_BLOCK.unpack_from(view, pos)
            header = low | high << 16
            last, kind, size = header & 1, header >> 1 & 3, header >> 3
            pos += 3 + (1 if kind == _ZSTD_RLE_BLOCK else size)
            bound += _ZSTD_MAX_BLOCK if kind == _ZSTD_COMPRESSED_BLOCK else size
        pos += 4 if fhd & 0x04 else 0  # content checksum
        frames += 1
    if pos != len(view):
        raise CorruptBatchError("zstd: truncated frame")
    return (0 if skippable else frames), bound


_ENCODERS: dict[Compression, Callable[[memoryview, int], bytes]] = {
    Compression.NONE: _none_encode,
    Compression.GZIP: _gzip_encode,
    Compression.SNAPPY: _snappy_encode,
    Compression.LZ4: _lz4_encode,
    Compression.ZSTD: _zstd_encode,
}
_DECODERS: dict[Compression, Callable[[memoryview, int], bytes]] = {
    Compression.NONE: _none_decode,
    Compression.GZIP: _gzip_decode,
    Compression.SNAPPY: _snappy_decode,
    Compression.LZ4: _lz4_decode,
    Compression.ZSTD: _zstd_decode,
}
