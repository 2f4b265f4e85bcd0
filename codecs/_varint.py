"""Zig-zag varints, as in protobuf and Kafka's ``ByteUtils.writeVarint/readVarlong``.

Record fields in format v2 (KIP-98) are zig-zag varints: ``(n << 1) ^ (n >> 63)``, then
7 bits per byte, least significant group first, high bit = "more follows".
These loops run once per record field, which only happens where records must be read or
rebuilt; header-only paths never get here.
"""

from __future__ import annotations

from ._errors import CorruptBatchError

__all__ = ["read_varint", "write_varint", "varint_size"]

_MAX_VARLONG_BYTES = 10


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (a signed 64-bit int) zig-zag encoded."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def varint_size(value: int) -> int:
    """Bytes that :func:`write_varint` would append for ``value``."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while v > 0x7F:
        v >>= 7
        size += 1
    return size


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode one zig-zag varint at ``pos``; return ``(value, next_pos)``.

    Raises :class:`CorruptBatchError` on a varint longer than 10 bytes or cut off by the
    end of ``buf``.
    """
    end = len(buf)
    result = 0
    shift = 0
    for _ in range(_MAX_VARLONG_BYTES):
        if pos >= end:
            raise CorruptBatchError("varint runs past the end of the records")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    raise CorruptBatchError("varint longer than 10 bytes")
