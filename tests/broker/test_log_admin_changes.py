"""What topic administration asks of a PartitionLog: DeleteRecords (a log start offset inside a
segment, checkpointed), a new LogConfig at once, and deletion of the whole directory."""

from __future__ import annotations

import logging
import threading

import pytest

import kcodecs
from kcodecs import Record

from mirror.broker.log import LogClosedError, LogConfig, OffsetOutOfRangeError, PartitionLog
from mirror.broker.log.files import LOG_START_OFFSET_FILE

T0 = 1_700_000_000_000
SMALL = LogConfig(segment_bytes=600, retention_ms=-1)


def append_records(log: PartitionLog, count: int, value_size: int = 100) -> None:
    """``count`` batches of one record each."""
    for _ in range(count):
        data = bytearray(kcodecs.build_batch([Record(key=None, value=b"v" * value_size, timestamp=T0)]))
        kcodecs.set_base_offset(data, log.log_end_offset)
        offset = log.log_end_offset
        log.append(bytes(data), first_offset=offset, last_offset=offset, max_timestamp=T0,
                   offset_of_max_timestamp=offset)


def first_offset_read(log: PartitionLog, offset: int) -> int:
    (batch, *_) = kcodecs.iter_batches(log.read(offset, 1))
    return batch.base_offset


def test_delete_records_moves_the_start_inside_a_segment_and_deletes_those_below(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL)
    append_records(log, 20)
    bases = log.segment_base_offsets
    target = bases[2] + 1  # inside the third segment
    assert log.delete_records(target) == target
    assert log.log_start_offset == target and log.segment_base_offsets == bases[2:]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 1000)
    assert first_offset_read(log, target) == target  # one record per batch: the batch holding it
    assert log.offset_for_timestamp(T0) == (target, T0)  # look-ups start at the log start
    assert log.delete_records(target - 1) == target  # below the start: nothing moves
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(log.log_end_offset + 1)
    log.close()

    reopened = PartitionLog.open(tmp_path / "t-0", SMALL)
    assert reopened.log_start_offset == target and reopened.log_end_offset == 20
    reopened.close()


def test_delete_records_waits_for_the_cleaner_to_delete_segments(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", SMALL)
    append_records(log, 20)
    bases = log.segment_base_offsets
    with log.cleaning():
        assert log.delete_records(bases[3]) == bases[3]
        assert log.segment_base_offsets == bases  # the cleaner reads them without the lock
    assert log.delete_old_segments(T0) == 3  # the next retention run deletes what lies below
    assert log.segment_base_offsets == bases[3:]
    log.close()


def test_an_unreadable_checkpoint_is_ignored_and_one_past_the_end_is_capped(tmp_path, caplog):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, SMALL)
    append_records(log, 5)
    log.close()
    (directory / LOG_START_OFFSET_FILE).write_text("0\n1\nfive\n")
    with caplog.at_level(logging.ERROR):
        log = PartitionLog.open(directory, SMALL)
    assert log.log_start_offset == 0 and "does not parse" in caplog.text
    log.close()
    (directory / LOG_START_OFFSET_FILE).write_text("0\n1\n9\n")  # records lost after it was written
    log = PartitionLog.open(directory, SMALL)
    assert log.log_start_offset == log.log_end_offset == 5
    log.close()


def test_a_new_config_rolls_and_retains_by_its_limits_at_once(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(retention_ms=-1))
    append_records(log, 5)
    assert log.segment_base_offsets == (0,)
    log.reconfigure(LogConfig(segment_bytes=300, retention_bytes=600, retention_ms=-1))
    append_records(log, 6)  # the active segment, 5 batches long, rolls at the first of these
    assert len(log.segment_base_offsets) > 2
    log.delete_old_segments(T0)
    assert log.size_bytes - log.cleanable_segments()[0].size < 600 <= log.size_bytes  # retention.bytes 600
    log.close()


def test_delete_waits_for_a_clean_in_progress_then_removes_the_directory(tmp_path):
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, SMALL)
    append_records(log, 10)
    cleaning, release, deleted = threading.Event(), threading.Event(), threading.Event()

    def cleaner() -> None:
        with log.cleaning():
            cleaning.set()
            release.wait()

    def delete() -> None:
        log.delete()
        deleted.set()

    threads = [threading.Thread(target=cleaner), threading.Thread(target=delete)]
    threads[0].start()
    cleaning.wait()
    threads[1].start()
    assert not deleted.wait(0.2) and directory.exists()  # still cleaning: the files stay open and named
    release.set()
    for thread in threads:
        thread.join()
    assert deleted.is_set() and not directory.exists()
    assert list(tmp_path.iterdir()) == []  # the renamed directory went too
    with pytest.raises(LogClosedError):
        log.read(0, 100)
