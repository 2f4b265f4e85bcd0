"""Transactions in one partition (Kafka's ProducerStateManager and UnifiedLog): open transactions,
the last stable offset, commit/abort markers, the aborted-transaction index and its recovery.

Data batches are built with kafka-python's ``DefaultRecordBatchBuilder`` and markers and
``.txnindex`` files decoded by hand from Kafka's layouts (``EndTransactionMarker``,
``AbortedTxn``), so our encoders are not checked against themselves.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

import kcodecs

from mirror.broker.errors import ApiError
from mirror.broker.topics import Partition, TopicStore

T0 = 1_700_000_000_000
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE = 47, 48


def data_batch(producer_id: int, epoch: int, sequence: int, records: int = 2, *, transactional: bool = True) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                        batch_size=1 << 20)
    for i in range(records):
        builder.append(i, timestamp=T0 + i, key=None, value=b"p%d-s%d-%d" % (producer_id, sequence, i), headers=[])
    return bytes(builder.build())


def open_partition(data_dir: Path, **configs: str) -> tuple[TopicStore, Partition]:
    store = TopicStore(data_dir)
    store.load()
    if "t" not in store.topics:
        store.create("t", 1, configs)
    return store, store.partition("t", 0)


def aborted_txn_entries(path: Path) -> list[tuple[int, int, int, int, int]]:
    """Decode a .txnindex as Kafka's AbortedTxn lays it out: version at 0 (2 bytes), producerId
    at 2, firstOffset at 10, lastOffset at 18, lastStableOffset at 26 (8 bytes each), 34 in all."""
    raw = path.read_bytes()
    assert len(raw) % 34 == 0
    return [
        (int.from_bytes(raw[i:i + 2], "big", signed=True),) + tuple(
            int.from_bytes(raw[i + at:i + at + 8], "big", signed=True) for at in (2, 10, 18, 26))
        for i in range(0, len(raw), 34)
    ]


def stored_batches(partition: Partition) -> list[DefaultRecordBatch]:
    raw = bytes(partition.log.read(0, 1 << 20))
    batches, pos = [], 0
    while pos < len(raw):
        size = 12 + struct.unpack_from(">i", raw, pos + 8)[0]
        batches.append(DefaultRecordBatch(raw[pos:pos + size]))
        pos += size
    return batches


def test_an_open_transaction_holds_the_last_stable_offset_until_its_marker(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(-1, -1, -1, transactional=False), T0)  # offsets 0-1, no producer
    assert part.last_stable_offset == 2
    part.append(data_batch(7, 0, 0), T0)  # 2-3 opens producer 7's transaction
    part.append(data_batch(-1, -1, -1, transactional=False), T0)  # 4-5
    assert (part.last_stable_offset, part.log.log_end_offset) == (2, 6)
    assert part.write_marker(7, 0, commit=True, coordinator_epoch=0, now_ms=T0 + 5) == 6
    assert part.last_stable_offset == 7
    store.close()


def test_read_stops_at_the_lso_batch(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(-1, -1, -1, transactional=False), T0)
    part.append(data_batch(7, 0, 0), T0)
    part.append(data_batch(-1, -1, -1, transactional=False), T0)
    lso = part.last_stable_offset
    below = [batch.base_offset for batch in kcodecs.iter_batches(part.log.read(0, 1 << 20, max_offset=lso))]
    assert below == [0]
    assert part.log.read(lso, 1 << 20, max_offset=lso).nbytes == 0
    assert part.log.read(4, 1 << 20, max_offset=lso).nbytes == 0  # past the LSO: nothing either
    store.close()


@pytest.mark.parametrize("configs, timestamp_type", [
    ({}, 0),
    ({"message.timestamp.type": "LogAppendTime", "compression.type": "gzip"}, 1),
])
def test_markers_are_control_batches_in_kafkas_layout(tmp_path, configs, timestamp_type):
    store, part = open_partition(tmp_path, **configs)
    part.append(data_batch(7, 3, 0), T0)
    part.write_marker(7, 3, commit=False, coordinator_epoch=5, now_ms=T0 + 9)
    _, marker = stored_batches(part)
    assert marker.validate_crc() and marker.is_control_batch and marker.is_transactional
    assert (marker.base_offset, marker.producer_id, marker.producer_epoch, marker.base_sequence) == (2, 7, 3, -1)
    assert (marker.compression_type, marker.timestamp_type, marker.max_timestamp) == (0, timestamp_type, T0 + 9)
    (record,) = list(marker)
    assert bytes(record.key) == struct.pack(">hh", 0, 0)  # ControlRecordType ABORT = 0
    assert bytes(record.value) == struct.pack(">hi", 0, 5)  # EndTransactionMarker: version, coordinator epoch
    assert record.timestamp == T0 + 9
    store.close()


def test_an_abort_is_indexed_in_kafkas_aborted_txn_layout(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(7, 0, 0), T0)   # 0-1 producer 7
    part.append(data_batch(8, 0, 0), T0)   # 2-3 producer 8, still open when 7 aborts
    part.write_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=T0)  # 4
    part.write_marker(8, 0, commit=False, coordinator_epoch=0, now_ms=T0)  # 5
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    # version, producerId, firstOffset, lastOffset (the marker), lastStableOffset after it
    assert aborted_txn_entries(index) == [(0, 7, 0, 4, 2), (0, 8, 2, 5, 6)]
    assert part.aborted_transactions(0, 6) == [(7, 0), (8, 2)]
    assert part.aborted_transactions(5, 6) == [(8, 2)]
    assert part.aborted_transactions(0, 1) == [(7, 0)]
    store.close()


def test_a_commit_is_not_indexed_and_an_empty_transaction_closes_nothing(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(7, 0, 0), T0)
    part.write_marker(7, 0, commit=True, coordinator_epoch=0, now_ms=T0)
    part.write_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=T0)  # a repeated marker (coordinator retry)
    assert not (tmp_path / "t-0" / "00000000000000000000.txnindex").exists()
    assert part.last_stable_offset == part.log.log_end_offset == 4
    store.close()


def test_a_marker_from_a_fenced_epoch_is_refused_and_a_newer_one_fences_the_producer(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(7, 2, 0), T0)
    with pytest.raises(ApiError) as old:
        part.write_marker(7, 1, commit=True, coordinator_epoch=0, now_ms=T0)
    assert old.value.code == INVALID_PRODUCER_EPOCH
    part.write_marker(7, 3, commit=False, coordinator_epoch=0, now_ms=T0)  # the coordinator bumped the epoch
    with pytest.raises(ApiError) as zombie:
        part.append(data_batch(7, 2, 2), T0)
    assert zombie.value.code == INVALID_PRODUCER_EPOCH
    part.append(data_batch(7, 3, 0), T0)  # the new epoch starts at sequence 0
    store.close()


def test_plain_data_inside_an_open_transaction_is_refused(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(7, 0, 0), T0)
    with pytest.raises(ApiError) as refused:
        part.append(data_batch(7, 0, 2, transactional=False), T0)
    assert refused.value.code == INVALID_TXN_STATE
    part.write_marker(7, 0, commit=True, coordinator_epoch=0, now_ms=T0)
    part.append(data_batch(7, 0, 2, transactional=False), T0)  # sequences carry on across transactions
    store.close()


def test_transactions_survive_a_clean_restart(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(7, 0, 0), T0)
    part.write_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=T0)
    part.append(data_batch(8, 0, 0), T0)  # 3-4 stays open
    store.close()
    store, part = open_partition(tmp_path)
    assert part.last_stable_offset == 3
    assert part.aborted_transactions(0, 5) == [(7, 0)]
    part.write_marker(8, 0, commit=True, coordinator_epoch=0, now_ms=T0)
    assert part.last_stable_offset == 6
    store.close()


@pytest.mark.parametrize("damage", ["deleted", "torn", "unclean"])
def test_the_index_is_rebuilt_from_the_log(tmp_path, damage):
    store, part = open_partition(tmp_path)
    part.append(data_batch(7, 0, 0), T0)
    part.append(data_batch(8, 0, 0), T0)
    part.write_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=T0)
    part.write_marker(8, 0, commit=False, coordinator_epoch=0, now_ms=T0)
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    written = index.read_bytes()
    part.log.close_handles()  # as a crash leaves it: no clean-shutdown marker
    if damage == "deleted":
        index.unlink()
    elif damage == "torn":
        index.write_bytes(written[:-5])
    _, part = open_partition(tmp_path)
    assert index.read_bytes() == written
    assert part.aborted_transactions(0, 6) == [(7, 0), (8, 2)]


def test_a_corrupt_index_is_rebuilt_even_after_a_clean_shutdown(tmp_path):
    store, part = open_partition(tmp_path)
    part.append(data_batch(7, 0, 0), T0)
    part.write_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=T0)
    store.close()
    index = tmp_path / "t-0" / "00000000000000000000.txnindex"
    written = index.read_bytes()
    index.write_bytes(written + b"\0" * 7)
    store, part = open_partition(tmp_path)
    assert index.read_bytes() == written
    store.close()


def test_an_abort_spanning_segments_is_found_from_the_first(tmp_path):
    store, part = open_partition(tmp_path, **{"segment.bytes": "300"})
    part.append(data_batch(7, 0, 0), T0)             # offsets 0-1, segment 0
    sequence = 2
    while part.log.segment_base_offsets == (0,):
        part.append(data_batch(9, 0, sequence, transactional=False), T0)
        sequence += 2
    marker = part.write_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=T0)
    last_segment = part.log.segment_base_offsets[-1]
    assert marker >= last_segment
    assert aborted_txn_entries(tmp_path / "t-0" / f"{last_segment:020d}.txnindex") == [(0, 7, 0, marker, marker + 1)]
    assert part.aborted_transactions(0, 2) == [(7, 0)]
    assert part.aborted_transactions(marker + 1, marker + 2) == []
    store.close()


def test_retention_deletes_the_index_with_its_segment(tmp_path):
    store, part = open_partition(tmp_path, **{"segment.bytes": "300", "retention.ms": "1000"})
    part.append(data_batch(7, 0, 0), T0)
    part.write_marker(7, 0, commit=False, coordinator_epoch=0, now_ms=T0)
    first = tmp_path / "t-0" / "00000000000000000000.txnindex"
    assert first.exists()
    sequence = 0
    while part.log.log_start_offset == 0:
        part.append(data_batch(9, 0, sequence, transactional=False), T0 + 10_000)
        sequence += 2
    assert not first.exists()
    store.close()
