"""Receive buffers for fetch responses, reused once nothing views them any more.

A fetch response is read into a buffer of its own, and its record sets go on as views of
that buffer: forwarded batches are rewritten in place and produced from there, so the buffer
lives until the last of its batches is acknowledged. A fresh buffer per response cost more
than any other item of the mirror's own work in a sampling profile (docs/performance.md):
``bytearray(n)`` of up to ``fetch_max_bytes`` maps new pages, zeroes them, and the socket then
writes every byte again. :class:`FrameBuffers` keeps the large buffers and hands one out again
once nothing views it.

Whether anything still views a buffer is CPython's own count of its buffer exports, not
something the caller must remember to release: a bytearray with exports refuses to change
size (``BufferError``), so a one-byte append tells exactly. A view kept anywhere (a batch
waiting for a retry, a traceback) keeps its buffer out of reuse; a buffer is never reused
while something can still read it.

The buffers are memory the caller must bound (``max_buffer_bytes``): :meth:`FrameBuffers.usage`
says how much is pinned by views and how much lies idle, ready for the next responses.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FrameBuffers", "FrameUsage", "FRAME_SLACK"]

FRAME_SLACK = 64 * 1024
"""Room in a buffer for a fetch response's framing beyond ``max_bytes`` of records (headers of
up to about a thousand partitions), so that a full response fits a kept buffer."""


@dataclass(frozen=True)
class FrameUsage:
    pinned: int
    """Bytes of buffers that something still views."""
    idle: int
    """Bytes of buffers kept for the next responses."""


class FrameBuffers:
    """Buffers for response frames: ``size`` bytes each (more for a larger frame), at most
    ``keep`` times ``size`` bytes of them kept while idle. A frame smaller than half of ``size`` gets a buffer of its
    own size, never kept: small allocations are cheap, and a large buffer would pin more memory
    than the frame needs."""

    def __init__(self, size: int, keep: int):
        if size < 1 or keep < 0:
            raise ValueError(f"frame buffers need a positive size and keep >= 0, not {size} and {keep}")
        self.size = size
        self.keep = keep
        self._buffers: list[bytearray] = []
        """Every buffer handed out and not yet found idle-and-surplus: pinned ones and kept ones."""

    def take(self, n: int) -> bytearray:
        """A buffer of at least ``n`` bytes that nothing views (its contents are stale)."""
        _, free = self._sweep()  # also lets surplus buffers go, for a caller that never asks usage()
        large = n * 2 >= self.size
        if large:
            fitting = [buf for buf in free if len(buf) >= n]
            if fitting:
                return min(fitting, key=len)
        buf = _probeable(max(n, self.size) if large else n)
        self._buffers.append(buf)
        return buf

    def usage(self) -> FrameUsage:
        """What the buffers take now; idle ones beyond ``keep`` (and small ones) are let go."""
        return self._sweep()[0]

    def _sweep(self) -> tuple[FrameUsage, list[bytearray]]:
        """Probe every buffer once: keep the pinned ones and idle ones of at least ``size``
        while they take up to ``keep`` times ``size`` (a larger frame's buffer counts as the
        bytes it takes); return what they take and the idle ones kept."""
        pinned = idle = 0
        kept: list[bytearray] = []
        free: list[bytearray] = []
        for buf in self._buffers:
            if not _unviewed(buf):
                pinned += len(buf)
                kept.append(buf)
            elif len(buf) >= self.size and idle + len(buf) <= self.keep * self.size:
                idle += len(buf)
                free.append(buf)
                kept.append(buf)
        self._buffers = kept
        return FrameUsage(pinned, idle), free

    def clear(self) -> None:
        """Let every buffer go (views still held stay valid: they keep their buffer alive)."""
        self._buffers.clear()


def _probeable(n: int) -> bytearray:
    """A zeroed buffer of ``n`` bytes whose allocation has room for :func:`_unviewed`'s byte.

    ``bytearray(n)`` allocates exactly ``n`` bytes and the terminating NUL, so the first probe
    would grow the allocation by an eighth. Once the C library has raised its mmap threshold
    (it does when a large block is freed: after a copy's first buffers are let go) large
    buffers come from its heap, where growing one usually means copying it: a noticeable share
    of the mirror's CPU in every copy after the first in a process, which is every
    micro-batch of a long-running job after its first (figures: docs/performance.md, "A probe
    that copied the buffer"). One byte more, then deleted, leaves that room: deleting at the
    end keeps the allocation."""
    buf = bytearray(n + 1)
    del buf[-1]
    return buf


def _unviewed(buf: bytearray) -> bool:
    """No memoryview of ``buf`` is alive. A bytearray with buffer exports cannot be resized;
    the append fits the allocation's spare room (:func:`_probeable`), so this costs next to nothing."""
    try:
        buf.append(0)
    except BufferError:
        return False
    del buf[-1]
    return True
