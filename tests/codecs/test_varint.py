"""kcodecs's unsigned varints (the protocol's compact lengths, counts and tags), against the
values of Kafka's ``ByteUtilsTest`` (``testUnsignedVarintSerde``, ``testInvalidUnsignedVarint``):
at most 5 bytes, and anything longer, cut off or over 32 bits a typed ``VarintError`` that
says where the varint starts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kcodecs
from kcodecs import KcodecsError, VarintError, read_uvarint, write_uvarint

BYTE_UTILS_TEST = [  # ByteUtilsTest.testUnsignedVarintSerde
    (0, "00"),
    (0x7F, "7f"),
    (0x80, "8001"),
    (0x3FFF, "ff7f"),
    (0x4000, "808001"),
    (0x1FFFFF, "ffff7f"),
    (0x200000, "80808001"),
    (0xFFFFFFF, "ffffff7f"),
    (0x10000000, "8080808001"),
    (2**31 - 1, "ffffffff07"),
    (2**31, "8080808008"),  # Java's Integer.MIN_VALUE, read back as unsigned
    (2**32 - 1, "ffffffff0f"),  # Java's -1
]


@pytest.mark.parametrize("value, encoded", BYTE_UTILS_TEST)
def test_unsigned_varints_are_kafkas_bytes_both_ways(value, encoded):
    out = bytearray()
    write_uvarint(out, value)
    assert out.hex() == encoded
    assert read_uvarint(bytes.fromhex("aa" + encoded + "bb"), 1) == (value, 1 + len(encoded) // 2)
    assert read_uvarint(memoryview(bytes.fromhex(encoded)), 0) == (value, len(encoded) // 2)


@given(st.integers(0, 2**32 - 1))
def test_every_unsigned_32_bit_int_round_trips(value):
    out = bytearray()
    write_uvarint(out, value)
    assert len(out) <= kcodecs.MAX_UVARINT_BYTES
    assert read_uvarint(out, 0) == (value, len(out))


def test_a_six_byte_varint_is_refused():
    """ByteUtilsTest.testInvalidUnsignedVarint: the fifth byte says more follows."""
    with pytest.raises(VarintError, match="longer than 5 bytes") as caught:
        read_uvarint(b"\x00\xff\xff\xff\xff\xff\x01", 1)
    assert caught.value.position == 1
    assert isinstance(caught.value, KcodecsError)


@pytest.mark.parametrize("encoded", ["80", "ffff", "ffffffff"])
def test_a_varint_cut_off_by_the_end_is_refused(encoded):
    with pytest.raises(VarintError, match="cut off") as caught:
        read_uvarint(bytes.fromhex("00" + encoded), 1)
    assert caught.value.position == 1
    with pytest.raises(VarintError, match="cut off"):
        read_uvarint(b"", 0)


def test_a_five_byte_varint_over_32_bits_is_refused():
    """Kafka's Java reader keeps the low 32 bits of these; no length, count or tag that large is honest."""
    with pytest.raises(VarintError, match="over 32 bits"):
        read_uvarint(bytes.fromhex("ffffffff1f"), 0)


@pytest.mark.parametrize("value", [-1, 2**32, 2**63])
def test_a_value_no_unsigned_varint_holds_is_not_written(value):
    out = bytearray(b"x")
    with pytest.raises(VarintError):
        write_uvarint(out, value)
    assert out == b"x"
