"""OffsetIndex and TimeIndex on their own: byte layout, look-ups against brute force, loading checks."""

from __future__ import annotations

import mmap
import random
import struct

import pytest

from mirror.broker.log.errors import CorruptIndexError, LogError
from mirror.broker.log.index import OffsetIndex, OffsetPosition, TimeIndex, TimestampOffset

BASE = 1000


def offset_index(tmp_path, max_bytes=8 * 4096):
    return OffsetIndex.create(tmp_path / "00000000000000001000.index", BASE, max_bytes)


def time_index(tmp_path, max_bytes=12 * 4096):
    return TimeIndex.create(tmp_path / "00000000000000001000.timeindex", BASE, max_bytes)


def test_offset_index_is_preallocated_then_trimmed_to_big_endian_entries(tmp_path):
    index = offset_index(tmp_path, max_bytes=8 * 100 + 5)
    assert index.path.stat().st_size == 8 * 100  # rounded down to whole entries, like Kafka
    index.append(BASE + 3, 4100)
    index.append(BASE + 9, 8300)
    index.trim()
    assert index.path.read_bytes() == struct.pack(">ii", 3, 4100) + struct.pack(">ii", 9, 8300)


def test_offset_lookup_matches_brute_force_and_uses_the_mapping(tmp_path):
    rng = random.Random(7)
    index = offset_index(tmp_path, max_bytes=8 * 5000)
    entries, offset, position = [], BASE, 0
    for _ in range(3000):  # more than the 1024-entry warm section, so both halves are searched
        offset += rng.randint(1, 5)
        position += rng.randint(1, 9000)
        index.append(offset, position)
        entries.append((offset, position))
    for target in [BASE - 5, BASE, *range(BASE, offset + 10, 3)]:
        below = [entry for entry in entries if entry[0] <= target]
        assert index.lookup(target) == (below[-1] if below else OffsetPosition(BASE, 0))
    assert isinstance(index._buffer(), mmap.mmap)
    index.trim()  # sealed: looked up through a read-only mapping made on first use
    assert index.lookup(entries[1500][0] + 1) == entries[1500]
    assert index.entries == 3000 and index.last_entry == entries[-1]


def test_the_first_entry_at_or_after_a_position_matches_brute_force(tmp_path):
    """What bounds a fetch's offsets (Kafka's ``fetchUpperBoundOffset``): searched by position."""
    rng = random.Random(11)
    index = offset_index(tmp_path, max_bytes=8 * 5000)
    entries, offset, position = [], BASE, 0
    for _ in range(3000):
        offset += rng.randint(1, 5)
        position += rng.randint(1, 9000)
        index.append(offset, position)
        entries.append((offset, position))
    for target in [0, 1, *range(0, position + 20, 997), entries[1500][1], entries[-1][1], entries[-1][1] + 1]:
        after = [entry for entry in entries if entry[1] >= target]
        assert index.first_at_or_after(target) == (after[0] if after else None)


def test_offset_index_refuses_going_backwards_and_overflowing(tmp_path):
    index = offset_index(tmp_path, max_bytes=24)
    index.append(BASE + 5, 100)
    with pytest.raises(LogError):
        index.append(BASE + 5, 200)
    index.append(BASE + 6, 200)
    index.append(BASE + 7, 300)
    assert index.is_full
    with pytest.raises(LogError):
        index.append(BASE + 8, 400)
    with pytest.raises(LogError):
        OffsetIndex.create(tmp_path / "x.index", BASE, 80).append(BASE + 2**31, 1)


def test_time_index_appends_only_when_the_timestamp_grows(tmp_path):
    index = time_index(tmp_path)
    assert index.maybe_append(500, BASE + 4)
    assert not index.maybe_append(500, BASE + 9)  # same timestamp: not an entry
    assert index.maybe_append(700, BASE + 9)
    with pytest.raises(LogError):
        index.maybe_append(600, BASE + 12)  # max timestamps never go back
    index.trim()
    assert index.path.read_bytes() == struct.pack(">qi", 500, 4) + struct.pack(">qi", 700, 9)


def test_time_lookup_matches_brute_force(tmp_path):
    rng = random.Random(3)
    index = time_index(tmp_path)
    entries, timestamp, offset = [], 10_000, BASE
    for _ in range(1500):
        timestamp += rng.randint(1, 50)
        offset += rng.randint(0, 3)
        index.maybe_append(timestamp, offset)
        entries.append((timestamp, offset))
    for target in range(9_990, timestamp + 20, 7):
        below = [entry for entry in entries if entry[0] <= target]
        assert index.lookup(target) == (below[-1] if below else TimestampOffset(-1, BASE))


def test_time_index_keeps_its_last_slot_for_the_roll_entry(tmp_path):
    index = time_index(tmp_path, max_bytes=36)  # 3 entries
    index.maybe_append(1, BASE)
    index.maybe_append(2, BASE + 1)
    assert index.is_full
    with pytest.raises(LogError):
        index.maybe_append(3, BASE + 2)
    assert index.maybe_append(3, BASE + 2, skip_full_check=True)
    assert not index.maybe_append(4, BASE + 3, skip_full_check=True)  # no room left at all


def test_load_drops_trailing_zero_entries_left_by_a_crash(tmp_path):
    index = offset_index(tmp_path)
    index.append(BASE + 1, 100)
    index.append(BASE + 2, 256)  # ends in a zero byte, which must not be mistaken for padding
    index.close()  # not trimmed: the rest of the preallocated file is zeros
    loaded = OffsetIndex.load(index.path, BASE, 8 * 4096)
    assert loaded.entries == 2 and not loaded.trimmed
    loaded.sanity_check(log_size=1000)
    assert loaded.lookup(BASE + 50) == (BASE + 2, 256)


@pytest.mark.parametrize(
    "content, log_size",
    [
        (b"\x00" * 13, 10_000),  # not a multiple of the entry size
        (struct.pack(">iiii", 5, 100, 3, 200), 10_000),  # offsets go backwards
        (struct.pack(">iiii", 5, 300, 6, 200), 10_000),  # positions go backwards
        (struct.pack(">ii", 5, 20_000), 10_000),  # points past the log
        (b"\xff" * 64, 10_000),  # garbage
    ],
)
def test_corrupt_offset_indexes_are_detected(tmp_path, content, log_size):
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        OffsetIndex.load(path, BASE, 4096).sanity_check(log_size)


@pytest.mark.parametrize(
    "content",
    [
        b"\x01" * 11,
        struct.pack(">qiqi", 10, 1, 9, 2),  # timestamps go backwards
        struct.pack(">qiqi", 10, 5, 11, 2),  # offsets go backwards
        struct.pack(">qi", 10, 500),  # offset past the segment's next offset
        struct.pack(">qi", 10, -3),  # offset below the base offset
    ],
)
def test_corrupt_time_indexes_are_detected(tmp_path, content):
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(content)
    with pytest.raises(CorruptIndexError):
        TimeIndex.load(path, BASE, 4096).sanity_check(next_offset=BASE + 100)
