"""Fetch-response buffers are reused only once nothing views them (mirror.kafka.frames)."""

from __future__ import annotations

import pytest

from mirror.kafka import FrameBuffers


def test_a_buffer_comes_back_once_its_last_view_is_gone():
    frames = FrameBuffers(1000, keep=2)
    first = frames.take(900)
    view = memoryview(first)[:900]
    batch = view[100:200]  # a view of a view still pins the buffer
    del view
    assert frames.take(900) is not first
    del batch
    assert frames.take(900) is first


def test_a_reused_buffer_is_at_least_as_large_as_the_frame():
    frames = FrameBuffers(1000, keep=2)
    frames.take(1500)  # larger than size: a buffer of the frame's own size
    again = frames.take(1200)
    assert len(again) >= 1200


def test_usage_counts_pinned_and_idle_bytes_and_keeps_at_most_keep_idle():
    frames = FrameBuffers(1000, keep=1)
    views = [memoryview(frames.take(800)) for _ in range(3)]  # each viewed before the next is taken
    usage = frames.usage()
    assert (usage.pinned, usage.idle) == (3000, 0)
    del views[1:]
    usage = frames.usage()
    assert (usage.pinned, usage.idle) == (1000, 1000)  # one of b and c kept, the other let go
    views.clear()
    assert frames.usage().idle == 1000


def test_a_small_frame_gets_its_own_buffer_which_is_counted_while_viewed_and_never_kept():
    frames = FrameBuffers(1000, keep=4)
    small = memoryview(frames.take(100))
    assert len(small) == 100
    assert frames.usage().pinned == 100
    del small
    assert frames.usage().idle == 0 and frames.usage().pinned == 0


def test_contents_survive_while_viewed():
    frames = FrameBuffers(10, keep=1)
    buf = frames.take(10)
    buf[:] = b"0123456789"
    view = memoryview(buf)[2:5]
    other = frames.take(10)
    other[:] = b"x" * 10
    assert bytes(view) == b"234"


@pytest.mark.parametrize("n", [100, 1000, 5000])
def test_probing_a_buffer_never_reallocates_it(n):
    """Whether a buffer is viewed is probed by appending a byte; a probe that grew the allocation
    would copy a large buffer (milliseconds for a fetch response's). ``__sizeof__`` counts the
    allocation, so it must not move over probes."""
    frames = FrameBuffers(1000, keep=2)
    buf = frames.take(n)
    allocated = buf.__sizeof__()
    for _ in range(3):
        assert frames.usage().idle in (0, len(buf))
    assert buf.__sizeof__() == allocated and len(buf) == n


@pytest.mark.parametrize("size, keep", [(0, 1), (10, -1)])
def test_nonsense_sizes_are_refused(size, keep):
    with pytest.raises(ValueError):
        FrameBuffers(size, keep)


def test_idle_buffers_larger_than_size_are_kept_only_within_keep_times_size():
    """A far leader's fetch may ask for several times ``size`` (mirror.kafka.fetcher's units);
    its buffer, once idle, must not let the idle bytes grow past the bound."""
    frames = FrameBuffers(1000, keep=3)
    views = [memoryview(frames.take(n)) for n in (2500, 2000, 1000)]
    views.clear()
    usage = frames.usage()
    assert usage.pinned == 0
    assert usage.idle in (2500, 2000 + 1000)  # whichever fit first, never all 5500
    assert usage.idle <= 3 * 1000
