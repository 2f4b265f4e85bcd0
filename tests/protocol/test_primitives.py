"""The field codec Produce and Fetch share (``mirror.protocol.primitives``): the request header
as kafka-python encodes it, lengths in their classic and compact forms, tagged fields skipped,
and a bad unsigned varint (kcodecs's ``VarintError``) translated into a ``ProtocolError`` at
the decoder's boundary, the varint error kept as its cause."""

from __future__ import annotations

import io

import pytest
from kafka.protocol.api_header import RequestHeader

from kcodecs import VarintError
from mirror.kafka import ProtocolError
from mirror.protocol import decode_produce_request, decode_request_header
from mirror.protocol.primitives import ENCODE_ERRORS, INT16, INT32, Reader, Writer, begin_request


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("client_id", [None, "", "kmirror-ü"])
def test_request_header_is_kafka_pythons_bytes_both_ways(flexible, client_id):
    theirs = bytes(RequestHeader(request_api_key=1, request_api_version=12, correlation_id=-7,
                                 client_id=client_id).encode(flexible=flexible))
    ours = b"".join(begin_request(1, 12, -7, client_id, flexible).frame()[1:])
    assert ours == theirs
    header = decode_request_header(memoryview(theirs + b"body"), flexible=flexible)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id, header.size) == \
        (1, 12, -7, client_id, len(theirs))
    assert RequestHeader.decode(io.BytesIO(ours), flexible=flexible).client_id == client_id


def test_a_request_headers_unknown_tagged_fields_are_skipped():
    """Two tags (0: 3 bytes, 200: 1 byte), as a newer client may send: the body starts after them."""
    prefix = bytes(RequestHeader(request_api_key=0, request_api_version=9, correlation_id=1,
                                 client_id="c").encode(flexible=False))
    tagged = prefix + b"\x02" + b"\x00\x03abc" + b"\xc8\x01\x01z"
    assert decode_request_header(tagged + b"body", flexible=True).size == len(tagged)
    with pytest.raises(ProtocolError, match="runs past"):
        decode_request_header(prefix + b"\x01\x00\x09abc", flexible=True)


LENGTHS = [  # (n, classic int16, classic int32, compact uvarint(n + 1))
    (None, b"\xff\xff", b"\xff\xff\xff\xff", b"\x00"),
    (0, b"\x00\x00", b"\x00\x00\x00\x00", b"\x01"),
    (126, b"\x00\x7e", b"\x00\x00\x00\x7e", b"\x7f"),
    (127, b"\x00\x7f", b"\x00\x00\x00\x7f", b"\x80\x01"),
    (300, b"\x01\x2c", b"\x00\x00\x01\x2c", b"\xad\x02"),
]


@pytest.mark.parametrize("n, int16, int32, compact", LENGTHS)
def test_lengths_in_classic_and_compact_form(n, int16, int32, compact):
    for flexible, layout, expected in ((False, INT16, int16), (False, INT32, int32), (True, INT32, compact)):
        out = Writer(flexible)
        out.length(n, layout)
        assert bytes(out.buf) == expected
        reader = Reader(expected + b"\x00" * (n or 0), flexible)
        assert reader.length(layout) == n and reader.pos == len(expected)


def test_a_length_no_uvarint_holds_is_refused_by_the_writer():
    with pytest.raises(ENCODE_ERRORS):
        Writer(True).length(2**32, INT32)


@pytest.mark.parametrize("varint, what", [(b"\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
                                          (b"\xff\xff\xff\xff\x7f", "over 32 bits"),
                                          (b"\xff\xff", "cut off")])
def test_a_bad_uvarint_is_a_protocol_error_caused_by_a_varint_error(varint, what):
    """The transactional id's compact length of a Produce v9 body, and a request header's tag count."""
    with pytest.raises(ProtocolError, match=what) as caught:
        decode_produce_request(varint, 9)
    assert isinstance(caught.value.__cause__, VarintError)
    prefix = bytes(RequestHeader(request_api_key=0, request_api_version=9, correlation_id=1,
                                 client_id=None).encode(flexible=False))
    with pytest.raises(ProtocolError, match=what) as caught:
        decode_request_header(prefix + varint, flexible=True)
    assert isinstance(caught.value.__cause__, VarintError)
