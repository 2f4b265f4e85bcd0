"""The bench's WAN link: the proxy adds the round-trip time it claims, keeps every byte in order,
keeps many chunks in flight rather than one per delay, and closes as the peers do. Loopback only;
timings are asserted from below (the delay is injected on purpose), never tightly from above."""

from __future__ import annotations

import contextlib
import hashlib
import math
import queue
import random
import socket
import socketserver
import statistics
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mirror.bench.latency_proxy import READ_BYTES, LatencyProxy, free_port

TIMEOUT_S = 30.0
"""Socket timeout: a hung proxy fails the test instead of hanging it."""


@contextlib.contextmanager
def tcp_server(handle: Callable[[socket.socket], None], port: int = 0) -> Iterator[int]:
    """A loopback server running ``handle`` on each connection, in a thread of its own; yields
    the port. The connection is closed when ``handle`` returns."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            handle(self.request)

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True  # a port given again while its last connection is in TIME_WAIT

    server = Server(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def echo(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := sock.recv(1 << 20):
            sock.sendall(data)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        data = sock.recv(min(size - len(out), 1 << 20))
        assert data, f"EOF after {len(out)} of {size} bytes"
        out += data
    return bytes(out)


def recv_to_eof(sock: socket.socket) -> bytes:
    out = bytearray()
    while data := sock.recv(1 << 20):
        out += data
    return bytes(out)


def median_round_trip_s(port: int, exchanges: int = 10) -> float:
    """Median time of small ping-pong exchanges over one connection."""
    times = []
    with connect(port) as sock:
        for i in range(exchanges):
            message = b"ping %02d" % i
            start = time.perf_counter()
            sock.sendall(message)
            assert recv_exactly(sock, len(message)) == message
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def send_in_thread(sock: socket.socket, chunks: list[bytes]) -> threading.Thread:
    """Write every chunk back to back (nothing waits for the echo) while the caller reads."""
    thread = threading.Thread(target=lambda: [sock.sendall(chunk) for chunk in chunks], daemon=True)
    thread.start()
    return thread


def test_adds_the_round_trip_time_it_claims():
    with tcp_server(echo) as port, LatencyProxy("127.0.0.1", port, rtt_ms=50) as proxy:
        assert proxy.address == f"127.0.0.1:{proxy.port}"
        direct = median_round_trip_s(port)
        proxied = median_round_trip_s(proxy.port)
    assert proxied >= 0.050
    assert proxied - direct >= 0.045
    assert proxied < 1.0  # only a sanity ceiling, far above the 50 ms injected


def test_keeps_every_byte_in_order():
    rng = random.Random(7)
    payload = rng.randbytes(20_000_000)
    chunks, at = [], 0
    while at < len(payload):
        size = rng.choice((1, 17, 1000, rng.randint(1, 300_000), 2_000_000))
        chunks.append(payload[at : at + size])
        at += size
    with tcp_server(echo) as port, LatencyProxy("127.0.0.1", port, rtt_ms=20) as proxy, connect(proxy.port) as sock:
        sender = send_in_thread(sock, chunks)
        received = recv_exactly(sock, len(payload))
        sender.join()
    assert hashlib.sha256(received).digest() == hashlib.sha256(payload).digest()


def pipelined_echo_s(rtt_ms: float, chunks: list[bytes]) -> float:
    """Seconds from the first chunk sent, back to back, to the last byte echoed through a proxy;
    checks the echo too."""
    total = sum(map(len, chunks))
    with tcp_server(echo) as port, LatencyProxy("127.0.0.1", port, rtt_ms=rtt_ms) as proxy, connect(proxy.port) as sock:
        start = time.perf_counter()
        sender = send_in_thread(sock, chunks)
        received = recv_exactly(sock, total)
        elapsed = time.perf_counter() - start
        sender.join()
    assert hashlib.sha256(received).digest() == hashlib.sha256(b"".join(chunks)).digest()
    return elapsed


def test_throughput_is_not_capped_by_the_delay():
    """1000 chunks of 50 KB at an RTT of 100 ms: a proxy that passed one of the sender's chunks
    per one-way delay would need 1000 x 50 ms = 50 s; a pipe needs about one RTT plus the transfer."""
    rtt_s, chunk_count = 0.100, 1000
    rng = random.Random(11)
    elapsed = pipelined_echo_s(rtt_s * 1000, [rng.randbytes(50_000) for _ in range(chunk_count)])
    assert rtt_s <= elapsed < chunk_count * rtt_s / 2


def test_many_reads_are_in_flight_at_once():
    """The test above cannot tell a pipe from a proxy that sleeps the delay after each read: the
    proxy reads up to READ_BYTES at once, so the latter passes 50 MB in 48 reads, 2.4 s at an
    RTT of 100 ms. At an RTT of 1 s it would need 48 x 0.5 s = 24 s, against about 1 s for a
    pipe, a margin no loaded machine eats."""
    rtt_s = 1.0
    rng = random.Random(12)
    chunks = [rng.randbytes(50_000) for _ in range(1000)]
    elapsed = pipelined_echo_s(rtt_s * 1000, chunks)
    one_read_per_delay_s = math.ceil(sum(map(len, chunks)) / READ_BYTES) * rtt_s / 2
    assert rtt_s <= elapsed < one_read_per_delay_s


def test_upstream_close_reaches_the_client_after_every_byte():
    payload = random.Random(3).randbytes(3_000_000)
    with tcp_server(lambda sock: sock.sendall(payload)) as port, \
            LatencyProxy("127.0.0.1", port, rtt_ms=20) as proxy, connect(proxy.port) as sock:
        assert recv_to_eof(sock) == payload


def test_client_close_reaches_the_upstream_after_every_byte():
    payload = random.Random(4).randbytes(3_000_000)
    received: queue.Queue[bytes] = queue.Queue()
    with tcp_server(lambda sock: received.put(recv_to_eof(sock))) as port, \
            LatencyProxy("127.0.0.1", port, rtt_ms=20) as proxy:
        with connect(proxy.port) as sock:
            sock.sendall(payload)
        assert received.get(timeout=TIMEOUT_S) == payload


def test_a_failed_connection_leaves_the_proxy_serving():
    """Upstream refused, then an upstream that resets: each ends its own connection only. Also
    the bench's order of things: a fixed port chosen before anything listens on it."""
    upstream_port, listen_port = free_port(), free_port()
    with LatencyProxy("127.0.0.1", upstream_port, rtt_ms=10, listen_port=listen_port) as proxy:
        assert proxy.port == listen_port
        with connect(proxy.port) as sock, contextlib.suppress(ConnectionResetError):
            assert sock.recv(1) == b""

        def reset(sock: socket.socket) -> None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            sock.recv(1)

        with tcp_server(reset, upstream_port), connect(proxy.port) as sock, \
                contextlib.suppress(ConnectionResetError):
            sock.sendall(b"x")
            assert sock.recv(1) == b""

        with tcp_server(echo, upstream_port), connect(proxy.port) as sock:
            sock.sendall(b"still here")
            assert recv_exactly(sock, 10) == b"still here"


def test_stop_closes_connections_and_the_listener():
    with tcp_server(echo) as port:
        proxy = LatencyProxy("127.0.0.1", port, rtt_ms=10).start()
        sock = connect(proxy.port)
        sock.sendall(b"hello")
        assert recv_exactly(sock, 5) == b"hello"
        listen_port = proxy.port
        proxy.stop()
        with sock, contextlib.suppress(ConnectionResetError):
            assert sock.recv(1) == b""
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", listen_port), timeout=TIMEOUT_S).close()
        with pytest.raises(RuntimeError):
            proxy.port
