"""Validate a produced batch and assign its offsets in place: the broker side of KIP-31/32.

Pure, like Kafka's ``LogValidator``: it takes the bytes, the next offset, the topic config
and the broker's time, and returns a frozen :class:`ValidationResult`; the log does the I/O.
Offsets are assigned by patching the base offset and LogAppendTime by patching the header
(CRC recomputed): the compressed payload is never opened, unless the topic's
``compression.type`` names another codec, where Kafka recompresses too.
"""

from __future__ import annotations

from dataclasses import dataclass

import kcodecs
from kcodecs import ControlType, CorruptBatchError, KcodecsError, TimestampType, V2Batch, V2Header

from .errors import ApiError, kerr
from .topic_config import TopicConfig

__all__ = ["ValidationResult", "inspect_produced", "assign_offsets", "control_batch", "last_sequence"]

LEADER_EPOCH = 0
"""A single-node broker is always the leader, in epoch 0."""


def last_sequence(batch: V2Batch | V2Header) -> int:
    """Sequence of the batch's last record; sequences wrap at Int32.MAX (``DefaultRecordBatch.lastSequence``).

    Counted from lastOffsetDelta, not the record count, as Kafka does: a batch the log
    cleaner thinned (or emptied) keeps the sequence range it was produced with.
    """
    return (batch.base_sequence + batch.last_offset_delta) % (1 << 31)


@dataclass(frozen=True)
class ValidationResult:
    data: bytes | bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int


def inspect_produced(data: bytes | bytearray | memoryview, config: TopicConfig) -> V2Batch:
    """Check a partition's produce payload from its header: exactly one intact v2 batch."""
    try:
        batches = list(kcodecs.iter_batches(data))
        consumed = batches[-1].position + batches[-1].size if batches else 0  # they follow each other from 0
        if consumed != len(data):
            raise ApiError(kerr.CorruptRecordError, f"{len(data) - consumed} trailing bytes after the last batch")
        if len(batches) != 1:
            raise ApiError(kerr.InvalidRecordError, f"a produce request must carry exactly one batch per partition, got {len(batches)}")
        (batch,) = batches
        if not isinstance(batch, V2Batch):
            raise ApiError(kerr.InvalidRecordError, f"produce v3+ requires magic 2, got magic {batch.magic}")
        if batch.size > config.max_message_bytes:
            raise ApiError(kerr.MessageSizeTooLargeError, f"batch of {batch.size} bytes exceeds max.message.bytes={config.max_message_bytes}")
        batch.validate()
        if batch.is_control:
            raise ApiError(kerr.InvalidRecordError, "clients may not produce control batches")
        if not batch.has_contiguous_offsets() or batch.record_count == 0:
            raise ApiError(kerr.InvalidRecordError,
                           f"recordCount {batch.record_count} must equal lastOffsetDelta + 1 = {batch.last_offset_delta + 1}")
        if config.compacted and any(key is None for key in batch.keys()):
            # Kafka's LogValidator: the cleaner could never tell which record such a one replaces.
            raise ApiError(kerr.InvalidRecordError, "a compacted topic cannot accept a record without a key")
    except CorruptBatchError as exc:
        raise ApiError(kerr.CorruptRecordError, str(exc)) from exc
    except KcodecsError as exc:
        raise ApiError(kerr.InvalidRecordError, str(exc)) from exc
    return batch


def assign_offsets(batch: V2Batch, *, next_offset: int, now_ms: int, config: TopicConfig) -> ValidationResult:
    """Give the batch its offsets and timestamps, recompressing only if the topic demands a codec."""
    target = config.target_compression
    if target is not None and target is not batch.compression:
        buf = _recompress(batch, target)
    else:
        buf = bytearray(batch.raw)
    stamp = now_ms if config.timestamp_type is TimestampType.LOG_APPEND_TIME else None
    kcodecs.stamp_v2(buf, base_offset=next_offset, partition_leader_epoch=LEADER_EPOCH, log_append_time=stamp)
    stored = kcodecs.read_batch(buf).header()
    return ValidationResult(
        data=buf,
        first_offset=next_offset,
        last_offset=stored.last_offset,
        max_timestamp=stored.max_timestamp,
        offset_of_max_timestamp=stored.last_offset,
        log_append_time=-1 if stamp is None else stamp,
    )


def control_batch(*, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, next_offset: int,
                  now_ms: int, config: TopicConfig) -> ValidationResult:
    """A COMMIT or ABORT marker at ``next_offset``: a v2 batch with the control and
    transactional bits, the producer's id and epoch, no sequence, and one control record
    (Kafka's ``MemoryRecords.withEndTransactionMarker``). Stamped with the broker's time; on
    LogAppendTime topics as the append time, as Kafka's ``LogValidator`` does for every batch.
    Never compressed: the topic's ``compression.type`` is for data."""
    append_time = config.timestamp_type is TimestampType.LOG_APPEND_TIME
    marker = kcodecs.control_record(ControlType.COMMIT if commit else ControlType.ABORT,
                                    coordinator_epoch=coordinator_epoch, timestamp=now_ms)
    data = kcodecs.build_batch(
        [marker],
        base_offset=next_offset,
        timestamp_type=config.timestamp_type,
        max_timestamp=now_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        control=True,
        partition_leader_epoch=LEADER_EPOCH,
    )
    return ValidationResult(data=data, first_offset=next_offset, last_offset=next_offset, max_timestamp=now_ms,
                            offset_of_max_timestamp=next_offset, log_append_time=now_ms if append_time else -1)


def _recompress(batch: V2Batch, target: kcodecs.Compression) -> bytearray:
    """Kafka's LogValidator path for a topic-level codec: decode, rebuild, keep producer state."""
    try:
        records = list(batch.records())
    except KcodecsError as exc:
        raise ApiError(kerr.CorruptRecordError, str(exc)) from exc
    return bytearray(kcodecs.build_batch(
        records,
        compression=target,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        transactional=batch.is_transactional,
    ))
