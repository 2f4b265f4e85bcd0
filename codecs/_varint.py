"""Varints, the one module that reads and writes them: signed (zig-zag) for record fields,
unsigned for the protocol's flexible versions.

Both are 7 bits per byte, least significant group first, high bit = "more follows".

- Signed, Kafka's ``ByteUtils.writeVarint/readVarlong``: record fields in format v2 (KIP-98)
  are zig-zag encoded first, ``(n << 1) ^ (n >> 63)``, as in protobuf. At most 10 bytes (a
  64-bit value); a bad one is a :class:`CorruptBatchError`, since it can only come from inside
  a batch. These loops run once per record field, which only happens where records must be
  read or rebuilt; header-only paths never get here.
- Unsigned, Kafka's ``ByteUtils.writeUnsignedVarint/readUnsignedVarint``: the compact
  lengths, counts and tagged fields of flexible requests and responses (KIP-482). They hold
  an unsigned 32-bit int, so at most 5 bytes; a bad one is a :class:`VarintError`, which the
  protocol layer (``mirror.protocol``) turns into its own error. Kafka's Java reader keeps
  the low 32 bits of a 5-byte value that has more; here such a value is refused, since no
  length, count or tag that large can be honest.
"""

from __future__ import annotations

from ._errors import CorruptBatchError, VarintError

__all__ = ["read_varint", "write_varint", "read_uvarint", "write_uvarint", "MAX_UVARINT_BYTES"]

_MAX_VARLONG_BYTES = 10
MAX_UVARINT_BYTES = 5
"""Bytes an unsigned 32-bit int takes at most: 32 bits in groups of 7."""
_MAX_UINT32 = 0xFFFFFFFF


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (a signed 64-bit int) zig-zag encoded."""
    v = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


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


def write_uvarint(out: bytearray, value: int) -> None:
    """Append ``value``, an unsigned 32-bit int; anything else is a :class:`VarintError`
    (written, it would be a varint no Kafka reader takes)."""
    if not 0 <= value <= _MAX_UINT32:
        raise VarintError(f"{value} is not an unsigned 32-bit int")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Decode one unsigned varint at ``pos``; return ``(value, next_pos)``.

    Raises :class:`VarintError` (with the varint's start as ``position``) on one longer than
    :data:`MAX_UVARINT_BYTES`, cut off by the end of ``buf``, or over 32 bits. ``buf`` is read
    byte by byte: a memoryview must have format ``B``.
    """
    start, end = pos, len(buf)
    value = 0
    for shift in range(0, 7 * MAX_UVARINT_BYTES, 7):
        if pos >= end:
            raise VarintError("unsigned varint cut off by the end of the buffer", position=start)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > _MAX_UINT32:
                raise VarintError(f"unsigned varint {value} over 32 bits", position=start)
            return value, pos
    raise VarintError(f"unsigned varint longer than {MAX_UVARINT_BYTES} bytes", position=start)
