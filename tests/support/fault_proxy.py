"""A TCP proxy on loopback that cuts connections in the middle of traffic, slows it down, or
puts a long link between client and broker.

Put in front of an embedded broker (advertised at the proxy's port, so clients come back
through it after Metadata), it breaks pipelines the ways networks do: a cut while a request
is on its way (the broker sees half a frame, or none of the later requests), or while answers
come back (the broker wrote batches whose acknowledgements are lost). Cut points are drawn
from a seeded generator, so a failing run can be replayed.

With ``rtt_s`` each direction's bytes are held for half of it from when they are read, order
kept, any number of chunks in flight at once: a WAN round trip, unlike ``delay_s``, which
holds each chunk in turn (a slow broker).
"""

from __future__ import annotations

import queue
import random
import socket
import threading
import time

__all__ = ["FaultProxy"]

_CHUNK = 64 * 1024


class FaultProxy:
    """Forwards every accepted connection to ``target``; see the module docstring."""

    def __init__(self, *, seed: int = 0):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.target: tuple[str, int] | None = None
        self.cut_after: tuple[int, int] | None = None
        """Cut each connection after a random number of bytes in this range, either direction."""
        self.max_cuts = 0
        self.delay_s = 0.0
        """Pause before forwarding each chunk towards the target (a slow broker)."""
        self.rtt_s = 0.0
        """Round trip added to every connection opened after it is set (a WAN link)."""
        self.cuts = 0
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._sockets |= {client, upstream}
                budget: list[float | None] = [None]
            for src, dst, towards_target in ((client, upstream, True), (upstream, client, False)):
                if self.rtt_s:
                    held: queue.Queue = queue.Queue()
                    threading.Thread(target=self._deliver, args=(held, dst), daemon=True).start()
                    dst = _Held(held, self.rtt_s / 2)
                threading.Thread(target=self._pump, args=(src, dst, budget, towards_target), daemon=True).start()

    def _budget(self) -> float | None:
        """Bytes this connection may still carry; drawn on its first traffic after ``cut_after``
        is set, so connections opened before the faults began are cut too."""
        if self.cut_after is None:
            return None
        if self.cuts >= self.max_cuts:
            return float("inf")
        return self._random.randint(*self.cut_after)

    def _pump(self, src: socket.socket, dst: socket.socket, budget: list[float], towards_target: bool) -> None:
        try:
            while True:
                data = src.recv(_CHUNK)
                if not data:
                    break
                if towards_target and self.delay_s:
                    time.sleep(self.delay_s)
                with self._lock:
                    if budget[0] is None:
                        budget[0] = self._budget()
                    allowed = budget[0] if budget[0] is not None else float("inf")
                    if budget[0] is not None:
                        budget[0] -= len(data)
                    cut = allowed < len(data) and self.cuts < self.max_cuts
                    if cut:
                        self.cuts += 1
                if cut:
                    dst.sendall(data[: int(allowed)])  # part of a frame goes through, the rest never does
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(src, dst)

    def _deliver(self, held: "queue.Queue", dst: socket.socket) -> None:
        """Write each held chunk once its time has come; None (its source closed) ends it."""
        try:
            while (item := held.get()) is not None:
                due, data = item
                time.sleep(max(0.0, due - time.monotonic()))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self._close(dst)

    def _close(self, *socks) -> None:
        for sock in socks:
            if isinstance(sock, _Held):
                sock.close()
                continue
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
            with self._lock:
                self._sockets.discard(sock)

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        with self._lock:
            socks = list(self._sockets)
        self._close(*socks)


class _Held:
    """The writing end of a direction with a one-way delay: chunks queued with when they are due."""

    def __init__(self, held: "queue.Queue", one_way_s: float):
        self.held, self.one_way_s = held, one_way_s

    def sendall(self, data: bytes) -> None:
        self.held.put((time.monotonic() + self.one_way_s, data))

    def close(self) -> None:
        self.held.put(None)
