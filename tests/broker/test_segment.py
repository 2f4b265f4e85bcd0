"""Segments on disk: Kafka's file names and index layout (parsed here with struct, independently of
the index code), where entries go, when segments roll, and recovery of one segment."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import kcodecs
from kcodecs import Record

from mirror.broker.log import LogConfig, PartitionLog
from mirror.broker.log.segment import BatchInfo, LogSegment

T0 = 1_700_000_000_000


def batch_bytes(base_offset: int, timestamps: list[int], value_size: int = 40, compression: str = "none") -> bytes:
    """One v2 batch built at offset 0, then given its offsets the way the broker does (a header patch)."""
    records = [Record(value=b"v" * value_size, timestamp=ts) for ts in timestamps]
    data = bytearray(kcodecs.build_batch(records, compression=compression))
    kcodecs.set_base_offset(data, base_offset)
    return bytes(data)


def append(log: PartitionLog, timestamps: list[int], value_size: int = 40) -> bytes:
    data = batch_bytes(log.log_end_offset, timestamps, value_size)
    batch = kcodecs.read_batch(data)
    log.append(data, first_offset=batch.base_offset, last_offset=batch.last_offset,
               max_timestamp=batch.max_timestamp, offset_of_max_timestamp=batch.last_offset)
    return data


def parse(path: Path, fmt: str) -> list[tuple[int, int]]:
    data = path.read_bytes()
    size = struct.calcsize(fmt)
    assert len(data) % size == 0
    return [struct.unpack_from(fmt, data, i) for i in range(0, len(data), size)]


def test_files_and_index_entries_follow_kafkas_layout(tmp_path):
    rng = random.Random(11)
    config = LogConfig(segment_bytes=40_000, index_interval_bytes=1500)
    log = PartitionLog.open(tmp_path / "orders-3", config)
    written = []  # (base_offset, last_offset, max_timestamp, bytes)
    ts = T0
    for i in range(120):
        ts += rng.randint(-300, 500)  # timestamps also go backwards between batches
        stamps = [ts + rng.randint(-50, 50) for _ in range(rng.randint(1, 6))]
        data = append(log, stamps, value_size=rng.randint(10, 400))
        written.append((log.log_end_offset - len(stamps), log.log_end_offset - 1, max(stamps), data))
    log.close()

    bases = sorted(int(p.name[:20]) for p in (tmp_path / "orders-3").glob("*.log"))
    assert len(bases) >= 3
    names = {p.name for p in (tmp_path / "orders-3").iterdir()}
    for base in bases:
        stem = f"{base:020d}"
        assert {stem + ".log", stem + ".index", stem + ".timeindex"} <= names
    for base, next_base in zip(bases, bases[1:] + [None]):
        batches = [w for w in written if w[0] >= base and (next_base is None or w[0] < next_base)]
        stem = tmp_path / "orders-3" / f"{base:020d}"
        assert batches[0][0] == base  # a segment is named after the offset of its first batch
        assert stem.with_suffix(".log").read_bytes() == b"".join(w[3] for w in batches)

        # Expected entries, straight from Kafka's LogSegment.append rules (see the module docstring).
        offsets, times = [], []
        since = position = 0
        max_ts, max_offset = -1, base
        for first, last, batch_max, data in batches:
            if batch_max > max_ts:
                max_ts, max_offset = batch_max, last
            if since > config.index_interval_bytes:
                offsets.append((last - base, position))
                if not times or max_ts > times[-1][0]:
                    times.append((max_ts, max_offset - base))
                since = 0
            since += len(data)
            position += len(data)
        if max_ts > (times[-1][0] if times else -1):
            times.append((max_ts, max_offset - base))  # the entry written when the segment rolls or closes

        assert parse(stem.with_suffix(".index"), ">ii") == offsets
        assert parse(stem.with_suffix(".timeindex"), ">qi") == times
        assert len(offsets) >= 3
        # Each entry is a batch's last offset and the position where that batch starts.
        starts = {}
        pos = 0
        for first, last, _, data in batches:
            starts[last - base] = pos
            pos += len(data)
        assert all(starts[rel] == position for rel, position in offsets)
        assert all(b[1] - a[1] > config.index_interval_bytes for a, b in zip(offsets, offsets[1:]))


def test_active_index_files_are_preallocated_and_trimmed_on_close(tmp_path):
    config = LogConfig(max_index_bytes=8 * 1000, index_interval_bytes=10)
    log = PartitionLog.open(tmp_path / "t-0", config)
    for i in range(5):
        append(log, [T0 + i])
    index = tmp_path / "t-0" / "00000000000000000000.index"
    assert index.stat().st_size == 8 * 1000
    log.close()
    assert index.stat().st_size == 8 * 4  # batches 2..5 are indexed, the first never is
    assert (tmp_path / "t-0" / "00000000000000000000.timeindex").stat().st_size == 12 * 4


def make_segment(tmp_path, config, stamps_per_batch):
    segment = LogSegment.create(tmp_path, 0, config, now_ms=0)
    offset = 0
    for stamps in stamps_per_batch:
        data = batch_bytes(offset, stamps)
        batch = kcodecs.read_batch(data)
        segment.append(data, [BatchInfo(0, batch.size, batch.last_offset, batch.max_timestamp)])
        offset = batch.next_offset
    return segment


def test_roll_by_size_counts_the_incoming_batch(tmp_path):
    size = len(batch_bytes(0, [T0]))
    segment = make_segment(tmp_path, LogConfig(segment_bytes=3 * size), [[T0], [T0]])
    assert segment.should_roll([size], T0, 2, now_ms=0) is None
    segment.append(batch_bytes(2, [T0]), [BatchInfo(0, size, 2, T0)])
    assert "segment_bytes" in segment.should_roll([1], T0, 3, now_ms=0)


def test_roll_by_time_measures_from_the_first_batchs_timestamp(tmp_path):
    segment = make_segment(tmp_path, LogConfig(segment_ms=1000), [[T0 + 5, T0 + 200], [T0 - 100]])
    # The first batch's max timestamp (T0 + 200) is the reference; wall-clock time is irrelevant.
    assert segment.should_roll([100], T0 + 1200, 5, now_ms=T0 + 10**9) is None
    assert "segment_ms" in segment.should_roll([100], T0 + 1201, 5, now_ms=0)


def test_an_empty_segment_never_rolls(tmp_path):
    segment = LogSegment.create(tmp_path, 0, LogConfig(segment_bytes=100, segment_ms=1), now_ms=0)
    assert segment.should_roll([10_000], T0 + 10**9, 2**40, now_ms=10**15) is None


def test_roll_when_an_index_would_be_full(tmp_path):
    config = LogConfig(index_interval_bytes=0, max_index_bytes=48)  # 6 offset entries, 4 time entries
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    # Same timestamps: the time index keeps one entry and the offset index fills (batches 2..7).
    segment = make_segment(tmp_path / "a", config, [[T0]] * 6)
    assert (segment.offset_index.entries, segment.time_index.entries) == (5, 1)
    assert segment.should_roll([100], T0, 6, now_ms=0) is None
    data = batch_bytes(6, [T0])
    segment.append(data, [BatchInfo(0, len(data), 6, T0)])
    assert segment.offset_index.is_full
    assert segment.should_roll([100], T0, 7, now_ms=0) == "an index would be full"
    # Growing timestamps: the time index is full at 3 entries (Kafka keeps the last slot for the roll entry).
    segment = make_segment(tmp_path / "b", config, [[T0 + i] for i in range(4)])
    assert (segment.offset_index.entries, segment.time_index.entries) == (3, 3)
    assert segment.should_roll([100], T0 + 9, 4, now_ms=0) == "an index would be full"


def test_recover_rebuilds_indexes_and_truncates_a_torn_tail(tmp_path):
    config = LogConfig(index_interval_bytes=100)
    segment = make_segment(tmp_path, config, [[T0 + i, T0 + i + 3] for i in range(30)])  # offsets 0..59
    segment.seal()
    offsets, times = parse(segment.offset_index.path, ">ii"), parse(segment.time_index.path, ">qi")
    full = segment.size
    segment.log.truncate_to(full - 7)  # tear the last batch
    result = segment.recover(upper_bound=None)
    assert (result.batches, result.truncated_bytes) == (29, full - 7 - result.valid_bytes)
    assert "torn" in result.reason and segment.next_offset == 58 and segment.size == result.valid_bytes
    segment.seal()
    # The rebuilt indexes hold the original entries for the batches kept, then the new largest timestamp.
    assert parse(segment.offset_index.path, ">ii") == [e for e in offsets if e[1] < result.valid_bytes]
    assert parse(segment.time_index.path, ">qi") == [e for e in times if e[1] < 57] + [(T0 + 31, 57)]
    segment.close_handles()


def test_load_refuses_a_torn_tail_even_with_good_indexes(tmp_path):
    segment = make_segment(tmp_path, LogConfig(index_interval_bytes=100), [[T0 + i] for i in range(10)])
    segment.close()
    with open(segment.log.path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x01\x00")  # a header whose body never arrived
    reopened = LogSegment.open(tmp_path, 0, segment.config, now_ms=0)
    assert "torn" in reopened.load(upper_bound=None)
    reopened.close_handles()
    os.truncate(segment.log.path, segment.log.path.stat().st_size - 12)
    reopened = LogSegment.open(tmp_path, 0, segment.config, now_ms=0)
    assert reopened.load(upper_bound=None) is None and reopened.next_offset == 10
    assert reopened.max_timestamp_and_offset == (T0 + 9, 9)
    reopened.close_handles()


def test_a_short_write_goes_on_with_the_rest(tmp_path, monkeypatch):
    """pwrite may write less than asked (a signal, a nearly full disk): the rest follows, in order."""
    real_pwrite = os.pwrite
    calls = []

    def short_pwrite(fd, data, position):
        calls.append(position)
        return real_pwrite(fd, memoryview(data)[:1000], position)

    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    monkeypatch.setattr(os, "pwrite", short_pwrite)
    data = append(log, [T0 + i for i in range(5)], value_size=900)
    monkeypatch.setattr(os, "pwrite", real_pwrite)
    assert len(calls) == -(-len(data) // 1000) > 1
    assert bytes(log.read(0, 1 << 20)) == data
    log.close()
    assert (tmp_path / "t-0" / "00000000000000000000.log").read_bytes() == data
