"""KafkaConnection's own response-header decoding (it skips kafka-python's, which copies the
payload): v0 and flexible v1 headers, the ApiVersions exception, and pipelined requests; and
its scatter-gather sends."""

from __future__ import annotations

import io

import pytest
from kafka.protocol.api_header import ResponseHeader
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from mirror.broker import EmbeddedBroker
from mirror.kafka import KafkaConnection
from mirror.kafka.connection import _header_size


@pytest.fixture
def broker(tmp_path):
    with EmbeddedBroker(tmp_path / "data") as running:
        yield running


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_response_has_a_v0_header_even_when_its_body_is_flexible(broker, version):
    with KafkaConnection(broker.bootstrap) as conn:
        response = conn.call(ApiVersionsRequest(client_software_name="kmirror", client_software_version="1"), version)
    assert response.error_code == 0 and {api.api_key for api in response.api_keys} >= {0, 1, 3, 18}


def test_requests_pipelined_on_one_connection_are_answered_in_order(broker):
    requests = [(MetadataRequest(topics=None), 9), (ApiVersionsRequest(), 0), (MetadataRequest(topics=None), 1)]
    with KafkaConnection(broker.bootstrap) as conn:
        sent = [(request, version, conn.send(request, version)) for request, version in requests]
        responses = [conn.receive(*entry) for entry in sent]
    assert [type(r).__name__ for r in responses] == ["MetadataResponse", "ApiVersionsResponse", "MetadataResponse"]
    assert responses[0].brokers[0].port == responses[2].brokers[0].port == broker.port


@pytest.mark.interop
def test_header_size_matches_kafka_python_for_tagged_fields():
    plain = bytes(ResponseHeader(correlation_id=9).encode(flexible=False))
    flexible = bytes(ResponseHeader(correlation_id=9).encode(flexible=True))
    assert _header_size(memoryview(plain + b"body"), False) == len(plain) == 4
    assert _header_size(memoryview(flexible + b"body"), True) == len(flexible) == 5
    # Two unknown tagged fields (tag 0: 3 bytes, tag 200: 1 byte), as a newer broker may send.
    tagged = b"\x00\x00\x00\x09" + b"\x02" + b"\x00\x03abc" + b"\xc8\x01\x01z"
    theirs = io.BytesIO(tagged + b"body")
    assert ResponseHeader.decode(theirs, flexible=True).correlation_id == 9
    assert _header_size(memoryview(tagged + b"body"), True) == theirs.tell() == len(tagged)


def test_a_broker_that_stops_answering_mid_frame_is_a_timed_out_connection_failure():
    """Each receive is bounded by the connection's timeout (in the kernel, SO_RCVTIMEO): a broker
    that sends half a frame and then nothing is a typed failure, not a hang."""
    import socket
    import threading

    from mirror.kafka import ConnectionFailedError

    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def half_answer():
        peer, _ = server.accept()
        accepted.append(peer)
        peer.recv(1024)
        peer.sendall(b"\x00\x00\x00\x40\x00\x00")  # a 64-byte frame's size, then 2 of its bytes

    thread = threading.Thread(target=half_answer, daemon=True)
    thread.start()
    try:
        with KafkaConnection(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=0.2) as conn:
            with pytest.raises(ConnectionFailedError, match="timed out"):
                conn.call(ApiVersionsRequest(client_software_name="kmirror", client_software_version="1"), 0)
    finally:
        thread.join(5)
        for peer in accepted:
            peer.close()
        server.close()


def test_pieces_sent_with_sendmsg_arrive_whole_and_in_order_however_the_kernel_cuts_them():
    """``send_buffers`` gives the pieces to ``sendmsg`` as they are and makes views only to
    resume a partial send: a peer that reads slowly through a small receive buffer forces
    many, with a cut inside a piece, on a piece's edge, and in a view whose items are not
    bytes; more pieces than one ``sendmsg`` takes must go out too."""
    import array
    import random
    import socket
    import threading

    rnd = random.Random(3)
    words = array.array("I", range(300_000))  # a view of 4-byte items: its length is not its size
    pieces = [rnd.randbytes(5), memoryview(words), bytearray(rnd.randbytes(700_000)), b"",
              memoryview(bytearray(rnd.randbytes(1_000_000)))[10:-10]]
    pieces += [rnd.randbytes(rnd.randint(0, 9)) for _ in range(1500)]  # over IOV_MAX pieces
    expected = b"".join(bytes(p) for p in pieces)
    server = socket.create_server(("127.0.0.1", 0))
    received = bytearray()

    def read_slowly():
        peer, _ = server.accept()
        with peer:
            while len(received) < len(expected):
                chunk = peer.recv(rnd.randint(1, 65536))
                if not chunk:
                    break
                received.extend(chunk)

    thread = threading.Thread(target=read_slowly, daemon=True)
    thread.start()
    try:
        with KafkaConnection(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=10) as conn:
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            conn.send_buffers(pieces)
            thread.join(10)
        assert bytes(received) == expected
    finally:
        server.close()


def _served(payload: bytes):
    """A connection whose peer has written ``payload`` (in one write) and nothing else; the
    peer's socket and the server, to close."""
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    conn = KafkaConnection(f"127.0.0.1:{server.getsockname()[1]}", timeout_s=10)
    peer, _ = server.accept()
    peer.sendall(payload)
    return conn, peer, server


def _framed(*bodies: bytes) -> bytes:
    return b"".join(len(body).to_bytes(4, "big") + body for body in bodies)


def test_frames_that_arrive_together_are_read_whole_and_in_order_small_and_large():
    """Small frames come out of the read-ahead buffer; a frame at least as large as it goes
    straight into its own buffer. Frames of every size around the buffer's must come out as
    they were sent, whether read into a fresh buffer or into one of ``FrameBuffers``."""
    import random
    import threading

    from mirror.kafka import FrameBuffers
    from mirror.kafka.connection import READ_AHEAD

    rnd = random.Random(7)
    sizes = [0, 1, 10, READ_AHEAD - 5, READ_AHEAD - 4, READ_AHEAD, READ_AHEAD + 1, 3, 2 * READ_AHEAD + 17, 5,
             300_000, 4]
    bodies = [rnd.randbytes(n) for n in sizes]
    stream = _framed(*bodies)
    conn, peer, server = _served(b"")

    def write_in_pieces():
        for at in range(0, len(stream), 70_001):
            peer.sendall(stream[at:at + 70_001])

    writer = threading.Thread(target=write_in_pieces)
    writer.start()
    frames = FrameBuffers(400_000, keep=1)
    try:
        got = [bytes(conn.read_frame(frames if i % 2 else None)) for i in range(len(bodies))]
        writer.join(10)
    finally:
        for sock in (conn, peer, server):
            sock.close()
    assert [len(g) for g in got] == sizes
    assert got == bodies


def test_a_frame_read_ahead_is_readable_though_the_socket_is_empty():
    """Responses a broker sent together are read from the socket at once; the next one then
    waits in the connection, where ``select`` cannot see it. ``wait_readable`` must still
    report it (or the copy loop would sleep until its timeout with an answer in hand)."""
    import select
    from types import SimpleNamespace

    from mirror.kafka.pipeline import InFlight, PipelinedConnection, wait_readable

    conn, peer, server = _served(_framed(b"first", b"second"))
    try:
        pipelined = PipelinedConnection(SimpleNamespace(conn=conn, address="test"), 5)
        pipelined.in_flight.extend([InFlight(1, 0, 0.0, None), InFlight(2, 0, 0.0, None)])
        assert bytes(conn.read_frame()) == b"first"
        assert select.select([conn], [], [], 0)[0] == []  # both frames came in the first read
        assert wait_readable([pipelined], 0) == [pipelined]
        assert bytes(conn.read_frame()) == b"second"
        assert not conn.buffered()
    finally:
        for sock in (conn, peer, server):
            sock.close()


@pytest.mark.parametrize("tags", [b"\xff\xff\xff\xff\xff\x01", b"\x01\x00\xff"])
def test_a_response_header_with_a_bad_tag_varint_is_a_protocol_error(tags):
    """A tag count longer than 5 bytes, or a tag size cut off by the frame's end: kcodecs's
    ``VarintError``, reported as the connection's ``ProtocolError``."""
    from kcodecs import VarintError
    from mirror.kafka import ProtocolError

    conn, peer, server = _served(_framed(b"\x00\x00\x00\x09" + tags))
    try:
        with pytest.raises(ProtocolError, match="truncated Metadata response header") as caught:
            conn.receive_body(9, True, "Metadata")
        assert isinstance(caught.value.__cause__, VarintError)
    finally:
        for sock in (conn, peer, server):
            sock.close()
