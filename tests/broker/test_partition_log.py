"""PartitionLog through its public API: append, read, time look-ups, rolling, retention, recovery."""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path

import pytest

import kcodecs
from kcodecs import KMirrorError, LegacyBatch, Record, V2Batch

from mirror.broker.log import (
    SENDFILE_MIN_BYTES,
    FileRegion,
    InvalidAppendError,
    InvalidArgumentError,
    LogClosedError,
    LogConfig,
    OffsetOutOfRangeError,
    PartitionLog,
    RecordBatchTooLargeError,
)

T0 = 1_700_000_000_000


def batch_bytes(base_offset: int, timestamps: list[int], value_size: int = 40, compression: str = "none") -> bytes:
    """One v2 batch built at offset 0, then given its offsets the way the broker does (a header patch)."""
    records = [Record(key=b"k%d" % i, value=b"v" * value_size, timestamp=ts) for i, ts in enumerate(timestamps)]
    data = bytearray(kcodecs.build_batch(records, compression=compression))
    kcodecs.set_base_offset(data, base_offset)
    return bytes(data)


def append_bytes(log: PartitionLog, data: bytes) -> int:
    batch = kcodecs.read_batch(data)
    return log.append(data, first_offset=log.log_end_offset, last_offset=batch.last_offset,
                      max_timestamp=batch.max_timestamp, offset_of_max_timestamp=batch.last_offset)


def append(log: PartitionLog, timestamps: list[int], value_size: int = 40, compression: str = "none") -> bytes:
    data = batch_bytes(log.log_end_offset, timestamps, value_size, compression)
    append_bytes(log, data)
    return data


def fill(log: PartitionLog, batches: int, seed: int = 1, records: tuple[int, int] = (1, 8)) -> list[bytes]:
    rng = random.Random(seed)
    written, ts = [], T0
    for _ in range(batches):
        ts += rng.randint(-200, 400)
        stamps = [ts + rng.randint(-100, 100) for _ in range(rng.randint(*records))]
        written.append(append(log, stamps, value_size=rng.randint(1, 300), compression=rng.choice(["none", "lz4", "gzip"])))
    return written


def read_all(log: PartitionLog, offset: int = 0, max_bytes: int = 3000) -> list[bytes]:
    """Fetch like a consumer: complete batches only, then continue after the last one."""
    out = []
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes)
        batches = list(kcodecs.iter_batches(data))
        assert batches, "every read returns at least one whole batch"
        out.extend(bytes(b.raw) for b in batches)
        offset = batches[-1].next_offset
    return out


def segment_files(directory: Path, suffix: str) -> list[Path]:
    return sorted(directory.glob("*" + suffix))


@pytest.fixture
def small() -> LogConfig:
    return LogConfig(segment_bytes=6000, index_interval_bytes=700)


# -- append and read -------------------------------------------------------------------------


def test_append_then_read_back_every_batch_across_segments(tmp_path, small):
    log = PartitionLog.open(tmp_path / "t-0", small)
    written = fill(log, 150)
    assert len(log.segment_base_offsets) > 5
    assert log.log_start_offset == 0
    assert log.log_end_offset == sum(kcodecs.read_batch(w).record_count for w in written)
    assert log.size_bytes == sum(map(len, written))
    assert read_all(log) == written
    log.close()
    with PartitionLog.open(tmp_path / "t-0", small) as reopened:
        assert read_all(reopened, max_bytes=1) == written
        assert reopened.log_end_offset == log.log_end_offset


def test_read_of_any_offset_starts_at_the_batch_holding_it(tmp_path, small):
    log = PartitionLog.open(tmp_path / "t-0", small)
    written = fill(log, 120, seed=5)
    by_offset = {}
    for data in written:
        batch = kcodecs.read_batch(data)
        for offset in range(batch.base_offset, batch.last_offset + 1):
            by_offset[offset] = data
    for offset in range(log.log_end_offset):  # brute force: every offset, through the sparse index
        data = log.read(offset, 1)
        assert bytes(data) == by_offset[offset]  # exactly one whole batch, even over max_bytes


def test_read_without_min_one_batch_stays_within_max_bytes(tmp_path, small):
    """A fetch's later partitions get no whole batch beyond their limit (Kafka's ``minOneMessage``
    is for the first non-empty partition only), so the response keeps to its ``max_bytes``."""
    log = PartitionLog.open(tmp_path / "t-0", small)
    written = fill(log, 10, seed=3)
    assert bytes(log.read(0, 5, min_one_batch=False)) == b""  # not a batch cut short: nothing
    assert bytes(log.read(0, 5)) == written[0]
    assert bytes(log.read(0, len(written[0]) + 5, min_one_batch=False)) == written[0] + written[1][:5]


def test_read_returns_one_segment_at_most_and_may_cut_the_last_batch(tmp_path, small):
    log = PartitionLog.open(tmp_path / "t-0", small)
    written = fill(log, 60)
    first_segment = segment_files(tmp_path / "t-0", ".log")[0].read_bytes()
    assert bytes(log.read(0, 10**9)) == first_segment
    data = log.read(0, len(written[0]) + 10)
    assert bytes(data) == written[0] + written[1][:10]
    assert [bytes(b.raw) for b in kcodecs.iter_batches(data)] == [written[0]]


def test_read_at_the_end_is_empty_and_outside_the_log_raises(tmp_path, small):
    log = PartitionLog.open(tmp_path / "t-0", small)
    assert log.read(0, 100) == b""
    fill(log, 10)
    end = log.log_end_offset
    assert log.read(end, 100) == b""
    with pytest.raises(OffsetOutOfRangeError) as info:
        log.read(end + 1, 100)
    assert (info.value.offset, info.value.log_start_offset, info.value.log_end_offset) == (end + 1, 0, end)
    assert isinstance(info.value, KMirrorError)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)
    with pytest.raises(InvalidArgumentError):
        log.read(0, -1)


def test_legacy_message_sets_are_stored_and_served_too(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=50))
    written = []
    for i in range(20):
        records = [Record(value=b"m%d" % j, timestamp=T0 + i * 10 + j) for j in range(3)]
        data = kcodecs.build_batch(records, magic=1, compression="gzip" if i % 2 else "none", base_offset=log.log_end_offset)
        last = list(kcodecs.iter_batches(data))[-1]
        log.append(data, first_offset=log.log_end_offset, last_offset=last.last_offset,
                   max_timestamp=max(r.timestamp for r in records), offset_of_max_timestamp=last.last_offset)
        written.append(data)
    assert log.log_end_offset == 60
    assert b"".join(read_all(log, max_bytes=1)) == b"".join(written)
    assert log.offset_for_timestamp(T0 + 101) == (31, T0 + 101)


# -- append validation -----------------------------------------------------------------------


def test_bad_appends_raise_and_write_nothing(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=2000))
    append(log, [T0])
    before = (log.log_end_offset, log.size_bytes, segment_files(tmp_path / "t-0", ".log")[0].read_bytes())
    good = batch_bytes(1, [T0, T0 + 5])
    args = dict(first_offset=1, last_offset=2, max_timestamp=T0 + 5, offset_of_max_timestamp=2)
    cases = [
        (good, {**args, "first_offset": 2}),  # not the log end offset
        (batch_bytes(3, [T0, T0 + 5]), {**args}),  # header disagrees with first_offset
        (good, {**args, "last_offset": 3}),
        (good, {**args, "max_timestamp": T0}),
        (good, {**args, "offset_of_max_timestamp": 9}),
        (good[:-1], args),  # torn
        (good + good[:20], args),  # trailing garbage
        (b"", args),
        (good[:16] + b"\x07" + good[17:], args),  # unknown magic
        (good + batch_bytes(2, [T0]), {**args, "last_offset": 2}),  # overlapping offsets
    ]
    for data, kwargs in cases:
        with pytest.raises(InvalidAppendError):
            log.append(data, **kwargs)
    with pytest.raises(RecordBatchTooLargeError):
        append(log, [T0] * 10, value_size=300)
    after = (log.log_end_offset, log.size_bytes, segment_files(tmp_path / "t-0", ".log")[0].read_bytes())
    assert after == before
    log.append(bytearray(good), **args)  # and the log still works
    assert log.log_end_offset == 3


def test_appending_several_batches_at_once_indexes_each_batch(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    first = batch_bytes(0, [T0, T0 + 1])
    second = batch_bytes(2, [T0 + 9])
    third = batch_bytes(3, [T0 + 4, T0 + 2])
    log.append(memoryview(first + second + third), first_offset=0, last_offset=4,
               max_timestamp=T0 + 9, offset_of_max_timestamp=2)
    log.close()
    index = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    assert index == bytes.fromhex("00000002") + len(first).to_bytes(4, "big") + bytes.fromhex("00000004") + (
        len(first) + len(second)
    ).to_bytes(4, "big")


# -- rolling ---------------------------------------------------------------------------------


def test_roll_by_size_keeps_batches_whole(tmp_path):
    config = LogConfig(segment_bytes=1000)
    log = PartitionLog.open(tmp_path / "t-0", config)
    written = [append(log, [T0 + i] * 3, value_size=60) for i in range(30)]
    files = segment_files(tmp_path / "t-0", ".log")
    assert len(files) > 3
    for path in files:
        data = path.read_bytes()
        batches = list(kcodecs.iter_batches(data))
        assert len(data) <= 1000 and sum(b.size for b in batches) == len(data)
        assert int(path.name[:20]) == batches[0].base_offset
    assert read_all(log) == written


def test_roll_by_segment_ms_uses_batch_timestamps_not_file_times(tmp_path):
    config = LogConfig(segment_ms=60_000)
    log = PartitionLog.open(tmp_path / "t-0", config, clock=lambda: T0 + 10**10)
    append(log, [T0, T0 + 30])
    log.close()
    for path in (tmp_path / "t-0").iterdir():
        os.utime(path, (0, 0))  # files from 1970: would roll at once if file age counted
    log = PartitionLog.open(tmp_path / "t-0", config, clock=lambda: T0 + 10**10)
    append(log, [T0 + 60_030])  # exactly segment_ms after the first batch's max timestamp: stays
    append(log, [T0 - 5_000])
    assert log.segment_base_offsets == (0,)
    append(log, [T0 + 60_031])
    assert log.segment_base_offsets == (0, 4)
    append(log, [T0 + 60_031 + 60_000])
    assert log.segment_base_offsets == (0, 4)


def test_roll_when_an_index_would_be_full(tmp_path):
    config = LogConfig(index_interval_bytes=0, max_index_bytes=48)  # 6 offset entries, 4 time entries
    log = PartitionLog.open(tmp_path / "t-0", config)
    written = [append(log, [T0]) for _ in range(20)]
    indexes = segment_files(tmp_path / "t-0", ".index")
    assert log.segment_base_offsets == (0, 7, 14)  # 7 batches: the first is never indexed
    assert [p.stat().st_size for p in indexes[:-1]] == [48, 48]
    assert read_all(log) == written
    log.close()


def test_an_empty_active_segment_never_rolls(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=200, segment_ms=1))
    append(log, [T0], value_size=100)
    append(log, [T0 + 10**9], value_size=100)
    append(log, [T0 + 2 * 10**9], value_size=100)
    assert log.segment_base_offsets == (0, 1, 2)
    assert all(p.stat().st_size > 0 for p in segment_files(tmp_path / "t-0", ".log"))


# -- time look-ups ---------------------------------------------------------------------------


def test_offset_for_timestamp_matches_brute_force(tmp_path, small):
    log = PartitionLog.open(tmp_path / "t-0", small)
    written = fill(log, 150, seed=9)
    records = [(r.offset, r.timestamp) for data in written for r in kcodecs.read_batch(data).records()]
    lowest, highest = min(t for _, t in records), max(t for _, t in records)
    targets = sorted({t for _, t in records} | set(range(lowest - 50, highest + 50, 37)))
    for target in targets:
        expected = next(((o, t) for o, t in records if t >= target), None)
        assert log.offset_for_timestamp(target) == expected, target
    log.close()
    with PartitionLog.open(tmp_path / "t-0", small) as reopened:
        for target in targets[::17]:
            assert reopened.offset_for_timestamp(target) == next(((o, t) for o, t in records if t >= target), None)
        assert reopened.offset_for_timestamp(-5) == records[0]  # taken literally, as Kafka's log does


def test_offset_for_timestamp_when_timestamps_go_backwards(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    for stamps in ([100, 500], [50], [300, 200], [600], [10, 700, 20], [650]):
        append(log, stamps)
    assert log.offset_for_timestamp(400) == (1, 500)
    assert log.offset_for_timestamp(550) == (5, 600)
    assert log.offset_for_timestamp(601) == (7, 700)
    assert log.offset_for_timestamp(0) == (0, 100)
    assert log.offset_for_timestamp(701) is None


def test_max_timestamp_offset_is_the_first_record_with_the_largest_time(tmp_path, small):
    # ListOffsets MAX_TIMESTAMP (-3): Kafka's answer since 3.8 (KAFKA-16310) is the record, not its batch.
    log = PartitionLog.open(tmp_path / "t-0", small)
    assert log.max_timestamp_offset() is None
    written = fill(log, 150, seed=4)
    records = [(r.offset, r.timestamp) for data in written for r in kcodecs.read_batch(data).records()]
    latest = max(t for _, t in records)
    assert log.max_timestamp_offset() == next((o, t) for o, t in records if t == latest)
    append(log, [latest - 1, latest + 7, latest + 7])  # a tie: the first of the two
    assert log.max_timestamp_offset() == (records[-1][0] + 2, latest + 7)
    log.close()


# -- no per-record work outside time look-ups -------------------------------------------------


def test_append_read_and_recovery_never_decode_records(tmp_path, monkeypatch, small):
    log = PartitionLog.open(tmp_path / "t-0", small)
    written = fill(log, 40)
    log.close_handles()

    def forbidden(*args, **kwargs):
        raise AssertionError("records decoded")

    for cls in (V2Batch, LegacyBatch):
        monkeypatch.setattr(cls, "records", forbidden)
    log = PartitionLog.open(tmp_path / "t-0", small)  # recovery: CRCs only
    written += fill(log, 40, seed=2)
    assert read_all(log) == written
    monkeypatch.undo()
    assert log.offset_for_timestamp(T0) is not None
    log.close()


# -- recovery ---------------------------------------------------------------------------------


def test_torn_log_keeps_every_complete_batch(tmp_path, small):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, small)
    written = fill(log, 50)
    last_file = segment_files(directory, ".log")[-1]
    log.close_handles()  # a crash
    in_last = list(kcodecs.iter_batches(last_file.read_bytes()))
    assert len(in_last) >= 2
    cut = in_last[-2].position + 30  # tear the last-but-one batch: it and the last are lost
    os.truncate(last_file, cut)
    log = PartitionLog.open(directory, small)
    survivors = written[: len(written) - 2]
    assert read_all(log) == survivors
    assert log.log_end_offset == kcodecs.read_batch(survivors[-1]).next_offset
    assert last_file.stat().st_size == in_last[-2].position
    more = fill(log, 20, seed=4)
    log.close()
    with PartitionLog.open(directory, small) as reopened:
        assert read_all(reopened) == survivors + more


def test_torn_log_after_a_clean_close_is_recovered_too(tmp_path, small):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, small)
    written = fill(log, 50)
    log.close()
    last_file = segment_files(directory, ".log")[-1]
    os.truncate(last_file, last_file.stat().st_size - 1)
    with PartitionLog.open(directory, small) as log:
        assert read_all(log) == written[:-1]
        append(log, [T0])


@pytest.mark.parametrize("damage", ["delete", "garbage", "not_increasing", "past_the_log", "time_offsets"])
def test_missing_or_corrupt_indexes_are_rebuilt_identically(tmp_path, small, damage, caplog):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, small)
    written = fill(log, 80)
    log.close()
    originals = {p: p.read_bytes() for p in directory.iterdir() if p.suffix in (".index", ".timeindex")}
    index, timeindex = segment_files(directory, ".index")[1], segment_files(directory, ".timeindex")[1]
    entries = originals[index]
    assert len(entries) >= 16
    if damage == "delete":
        for path in originals:
            path.unlink()
    elif damage == "garbage":
        index.write_bytes(os.urandom(37))
        timeindex.write_bytes(b"\xff" * 48)
    elif damage == "not_increasing":
        index.write_bytes(entries[8:16] + entries[:8] + entries[16:])
    elif damage == "past_the_log":
        index.write_bytes(entries[:-4] + (10**8).to_bytes(4, "big"))
    elif damage == "time_offsets":
        timeindex.write_bytes(originals[timeindex][:-4] + (10**6).to_bytes(4, "big"))
    with caplog.at_level(logging.INFO, logger="mirror.broker.log"):
        log = PartitionLog.open(directory, small)
    repaired = [r for r in caplog.records if "rebuilt" in r.getMessage()]
    assert len(repaired) == (len(segment_files(directory, ".log")) if damage == "delete" else 1)
    assert read_all(log) == written
    log.close()
    assert {p: p.read_bytes() for p in originals} == originals


def test_a_corrupt_batch_and_everything_after_it_is_truncated(tmp_path, caplog):
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=6000, index_interval_bytes=700, flush="always")
    log = PartitionLog.open(directory, config)
    written = fill(log, 50)
    log.close_handles()
    last_file = segment_files(directory, ".log")[-1]
    data = bytearray(last_file.read_bytes())
    in_last = list(kcodecs.iter_batches(data))
    victim = in_last[-3]
    data[victim.position + victim.size - 1] ^= 0x40  # one bit inside the CRC's coverage
    last_file.write_bytes(data)
    with caplog.at_level(logging.INFO, logger="mirror.broker.log"):
        log = PartitionLog.open(directory, config)
    assert read_all(log) == written[:-3]
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # one line, only the last segment checked
    assert "CRC" in caplog.records[0].getMessage()
    log.close()


def test_os_flush_policy_checks_every_segment_and_drops_what_follows_corruption(tmp_path, small):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, small)
    written = fill(log, 60)
    log.close_handles()
    files = segment_files(directory, ".log")
    assert len(files) > 3
    data = bytearray(files[1].read_bytes())
    victim = next(b for b in kcodecs.iter_batches(data) if b.position + b.size > 100)
    bad_offset = victim.base_offset
    data[100] ^= 0xFF
    files[1].write_bytes(data)
    log = PartitionLog.open(directory, small)
    assert log.log_end_offset == bad_offset
    assert read_all(log) == [w for w in written if kcodecs.read_batch(w).last_offset < bad_offset]
    assert segment_files(directory, ".log") == files[:2]  # the segments after the damage are gone
    append(log, [T0])  # appends continue at the damaged batch's offset
    log.close()


def test_unclean_shutdown_under_flush_always_recovers_only_the_last_segment(tmp_path, caplog):
    config = LogConfig(segment_bytes=6000, index_interval_bytes=700, flush="always")
    log = PartitionLog.open(tmp_path / "t-0", config)
    written = fill(log, 60)
    log.close_handles()
    with caplog.at_level(logging.INFO, logger="mirror.broker.log"):
        log = PartitionLog.open(tmp_path / "t-0", config)
    assert len(caplog.records) == 1 and "unclean shutdown" in caplog.records[0].getMessage()
    assert read_all(log) == written
    log.close()


def test_stray_and_orphan_files_are_removed(tmp_path):
    directory = tmp_path / "t-0"
    with PartitionLog.open(directory, LogConfig()) as log:
        fill(log, 3)
    (directory / "00000000000000000050.index").write_bytes(b"")
    (directory / "00000000000000000050.timeindex").write_bytes(b"")
    (directory / "00000000000000000003.log.deleted").write_bytes(b"x")
    (directory / "leader-epoch-checkpoint").write_bytes(b"0\n0\n")
    with PartitionLog.open(directory, LogConfig()) as log:
        assert log.segment_base_offsets == (0,)
    assert sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]


# -- retention --------------------------------------------------------------------------------


def test_retention_ms_deletes_whole_old_segments_by_their_largest_timestamp(tmp_path):
    config = LogConfig(segment_bytes=1000, retention_ms=60_000)
    log = PartitionLog.open(tmp_path / "t-0", config)
    for i in range(12):  # 2 batches per segment; timestamps one minute apart per segment
        append(log, [T0 + (i // 2) * 60_000], value_size=300)
    assert len(log.segment_base_offsets) == 6
    now = T0 + 3 * 60_000 + 60_001  # segments 0..3 (largest ts up to T0+3min) are past retention
    assert log.delete_old_segments(now) == 4
    assert log.segment_base_offsets == (8, 10)
    assert log.log_start_offset == 8
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    assert len(segment_files(tmp_path / "t-0", ".log")) == 2 and len(segment_files(tmp_path / "t-0", ".index")) == 2
    assert log.delete_old_segments(T0 + 10**10) == 1  # everything expired, but the active segment stays
    assert log.segment_base_offsets == (10,) and log.log_end_offset == 12
    log.close()
    with PartitionLog.open(tmp_path / "t-0", config) as reopened:  # restart keeps both ends
        assert (reopened.log_start_offset, reopened.log_end_offset) == (10, 12)
        assert len(read_all(reopened, offset=10)) == 2


def test_retention_bytes_keeps_at_least_the_limit(tmp_path):
    config = LogConfig(segment_bytes=1000, retention_bytes=2500)
    log = PartitionLog.open(tmp_path / "t-0", config)
    written = [append(log, [T0 + i], value_size=300) for i in range(12)]
    segment_size = 2 * len(written[0])
    assert log.size_bytes == 6 * segment_size
    deleted = log.delete_old_segments(T0)
    # Kafka's rule: delete the oldest segment while the log would still hold retention_bytes without it.
    assert log.size_bytes >= 2500 > log.size_bytes - segment_size
    assert deleted == 6 - log.size_bytes // segment_size and log.log_start_offset == 2 * deleted
    assert read_all(log, offset=2 * deleted) == written[2 * deleted :]
    log.close_handles()
    log = PartitionLog.open(tmp_path / "t-0", config)  # after a crash too
    assert (log.log_start_offset, log.log_end_offset) == (2 * deleted, 12)
    log.close()


# -- lifecycle ----------------------------------------------------------------------------------


def test_closed_log_refuses_use_and_close_is_idempotent(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(flush="always"))
    append(log, [T0])
    log.flush()
    log.close()
    log.close()
    assert (tmp_path / "t-0" / ".kmirror_cleanshutdown").exists()
    with pytest.raises(LogClosedError):
        log.read(0, 1)
    with pytest.raises(LogClosedError):
        append(log, [T0])
    with PartitionLog.open(tmp_path / "t-0", LogConfig()) as log:
        assert not (tmp_path / "t-0" / ".kmirror_cleanshutdown").exists()
        assert log.log_end_offset == 1


@pytest.mark.parametrize("field, value", [
    ("segment_bytes", 13), ("segment_bytes", 2**31), ("segment_ms", 0), ("max_index_bytes", 23),
    ("index_interval_bytes", -1), ("retention_ms", -2), ("retention_bytes", -2), ("flush", "sometimes"),
])
def test_config_is_validated(field, value):
    with pytest.raises(InvalidArgumentError):
        LogConfig(**{field: value})


def test_a_large_fetch_is_a_region_of_the_file_that_outlives_the_segment(tmp_path):
    """From SENDFILE_MIN_BYTES on, a fetch answers with a region of the segment file (sent with
    sendfile): the same bytes a read gives, still readable after the segment is closed and
    deleted, as by retention while the response waits to go out."""
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    written = [append(log, [T0 + i], value_size=6000) for i in range(40)]  # 6 KB batches, each indexed
    small = log.fetch(0, 1000)
    assert isinstance(small.records, memoryview) and bytes(small.records) == written[0]
    fetched = log.fetch(3, SENDFILE_MIN_BYTES + 10)
    assert isinstance(fetched.records, FileRegion)
    expected = bytes(log.read(3, SENDFILE_MIN_BYTES + 10))
    assert expected.startswith(b"".join(written[3:12])) and len(expected) == SENDFILE_MIN_BYTES + 10
    log.close()
    for path in (tmp_path / "t-0").iterdir():
        path.unlink()
    assert fetched.records.read() == expected
    fetched.records.close()
    with pytest.raises(LogClosedError):
        log.fetch(0, 1000)


def test_a_fetch_bounds_its_offsets_from_the_index_as_kafka_does(tmp_path):
    """The upper bound of a fetch's offsets (how far a read_committed fetch lists aborted
    transactions) is Kafka's ``fetchUpperBoundOffset``: the offset of the first index entry at
    or past the end of the bytes, a batch that starts after them; else the segment's end."""
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    written = [append(log, [T0 + i, T0 + i], value_size=3000) for i in range(10)]  # 2 records, > index interval
    starts = [sum(len(w) for w in written[:i]) for i in range(11)]
    # 3 batches and part of a fourth from offset 2 (batch 1): the next batch after the bytes is batch 5.
    fetched = log.fetch(2, starts[4] - starts[1] + 100)
    assert fetched.upper_bound_offset == 11  # batch 5's last offset, the index's key for it
    assert log.fetch(16, 1 << 20).upper_bound_offset == 20  # up to the end: the segment's next offset
    assert log.fetch(20, 1 << 20).upper_bound_offset == 20  # nothing to read
    for result in (fetched, log.fetch(16, 1 << 20)):
        if isinstance(result.records, FileRegion):
            result.records.close()
    log.close()
