"""Validate a produced batch and assign its offsets in place: the broker side of KIP-31/32.

Pure, like Kafka's ``LogValidator``: it takes the bytes, the next offset, the topic config
and the broker's time, and returns an immutable :class:`ValidationResult`; the log does the I/O.
A produced batch's header is read once, when it is inspected, and carried from there: at
16 KiB batches the broker's work per batch, not per byte, sets its pace.
Offsets are assigned by patching the base offset and LogAppendTime by patching the header
(CRC recomputed): the compressed payload is never opened, unless the topic's
``compression.type`` names another codec, where Kafka recompresses too, or the topic needs
each record's key (compacted) or earliest time (``message.timestamp.before.max.ms`` set).
"""

from __future__ import annotations

from typing import NamedTuple

import kcodecs
from kcodecs import ControlType, CorruptBatchError, KcodecsError, TimestampType, V2Batch, V2Header

from .errors import ApiError, kerr
from .topic_config import TopicConfig

__all__ = ["ProducedBatch", "ValidationResult", "inspect_produced", "check_timestamps", "assign_offsets", "control_batch",
           "last_sequence"]

LEADER_EPOCH = 0
"""A single-node broker is always the leader, in epoch 0."""


def last_sequence(batch: V2Batch | V2Header) -> int:
    """Sequence of the batch's last record; sequences wrap at Int32.MAX (``DefaultRecordBatch.lastSequence``).

    Counted from lastOffsetDelta, not the record count, as Kafka does: a batch the log
    cleaner thinned (or emptied) keeps the sequence range it was produced with.
    """
    return (batch.base_sequence + batch.last_offset_delta) % (1 << 31)


class ProducedBatch(NamedTuple):
    """A produced batch that passed :func:`inspect_produced`, with its header as it arrived."""

    batch: V2Batch
    header: V2Header


class ValidationResult(NamedTuple):
    """A batch ready for the log: its bytes with offsets assigned, and what the log indexes."""

    data: bytes | bytearray
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int


def inspect_produced(data: bytes | bytearray | memoryview, config: TopicConfig) -> ProducedBatch:
    """Check a partition's produce payload from its header: exactly one intact v2 batch."""
    try:
        batch = _only_batch(data)
        if not isinstance(batch, V2Batch):
            raise ApiError(kerr.InvalidRecordError, f"produce v3+ requires magic 2, got magic {batch.magic}")
        if batch.size > config.max_message_bytes:
            raise ApiError(kerr.MessageSizeTooLargeError, f"batch of {batch.size} bytes exceeds max.message.bytes={config.max_message_bytes}")
        header = batch.checked_header()  # validate()'s checks, and the header they read
        if header.is_control:
            raise ApiError(kerr.InvalidRecordError, "clients may not produce control batches")
        if not header.has_contiguous_offsets or header.record_count == 0:
            raise ApiError(kerr.InvalidRecordError,
                           f"recordCount {header.record_count} must equal lastOffsetDelta + 1 = {header.last_offset_delta + 1}")
        if header.producer_id >= 0 and header.base_sequence < 0:
            # Kafka's LogValidator.validateBatch: a producer id without a sequence could be neither
            # deduplicated nor checked for order.
            raise ApiError(kerr.InvalidRecordError,
                           f"invalid sequence number {header.base_sequence} in a batch of producer {header.producer_id}")
        if config.compacted and any(key is None for key in batch.keys()):
            # Kafka's LogValidator: the cleaner could never tell which record such a one replaces.
            raise ApiError(kerr.InvalidRecordError, "a compacted topic cannot accept a record without a key")
    except CorruptBatchError as exc:
        raise ApiError(kerr.CorruptRecordError, str(exc)) from exc
    except KcodecsError as exc:
        raise ApiError(kerr.InvalidRecordError, str(exc)) from exc
    return ProducedBatch(batch, header)


def check_timestamps(produced: ProducedBatch, config: TopicConfig, now_ms: int) -> None:
    """Kafka's ``LogValidator.validateTimestamp``, INVALID_TIMESTAMP when it fails: on a
    CreateTime topic every record's time (but "none", -1) lies within
    ``[now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]``
    (KIP-937); a LogAppendTime topic takes no batch that claims LogAppendTime itself.

    The header's max timestamp is the latest record's time, so the after-limit (Kafka 4's
    default: an hour) needs no record read. The before-limit needs the earliest, which the
    header does not hold: the records are read then, and only if that limit is set (it is
    not by default)."""
    batch, header = produced
    if config.timestamp_type is TimestampType.LOG_APPEND_TIME:
        if batch.timestamp_type is TimestampType.LOG_APPEND_TIME:
            raise ApiError(kerr.InvalidTimestampError, "a producer may not set the timestamp type to LogAppendTime")
        return
    latest = header.max_timestamp
    if latest != kcodecs.NO_TIMESTAMP and latest - now_ms > config.message_timestamp_after_max_ms:
        raise _out_of_range(latest, now_ms, config)
    if config.message_timestamp_before_max_ms < TopicConfig.message_timestamp_before_max_ms:
        try:
            times = [record.timestamp for record in batch.records()]  # a LogAppendTime batch's: its max
        except KcodecsError as exc:
            raise ApiError(kerr.CorruptRecordError, str(exc)) from exc
        for timestamp in times:
            if timestamp != kcodecs.NO_TIMESTAMP and now_ms - timestamp > config.message_timestamp_before_max_ms:
                raise _out_of_range(timestamp, now_ms, config)


def _out_of_range(timestamp: int, now_ms: int, config: TopicConfig) -> ApiError:
    return ApiError(kerr.InvalidTimestampError,
                    f"timestamp {timestamp} is out of range: it should be within "
                    f"[{now_ms - config.message_timestamp_before_max_ms}, {now_ms + config.message_timestamp_after_max_ms}]")


def _only_batch(data: bytes | bytearray | memoryview) -> kcodecs.Batch:
    """The payload's one batch, read directly when it is exactly one whole batch (nearly
    always); otherwise the error that says what else it is, found by reading all of it."""
    size = data.nbytes if isinstance(data, memoryview) else len(data)
    try:
        batch = kcodecs.read_batch(data)
        if batch.size == size:
            return batch
    except CorruptBatchError:
        pass  # iter_batches below tells a cut-off batch from an impossible one
    batches = list(kcodecs.iter_batches(data))
    consumed = batches[-1].position + batches[-1].size if batches else 0  # they follow each other from 0
    if consumed != size:
        raise ApiError(kerr.CorruptRecordError, f"{size - consumed} trailing bytes after the last batch")
    raise ApiError(kerr.InvalidRecordError, f"a produce request must carry exactly one batch per partition, got {len(batches)}")


def assign_offsets(produced: ProducedBatch, *, next_offset: int, now_ms: int, config: TopicConfig) -> ValidationResult:
    """Give the batch its offsets and timestamps, recompressing only if the topic demands a codec.

    The stamp changes only the base offset, the leader epoch, and with LogAppendTime the
    timestamp type and max timestamp, so the result's offsets and max timestamp follow from
    the header as inspected (the log checks them against the bytes it is given)."""
    batch, header = produced
    target = config.target_compression
    if target is not None and target is not batch.compression:
        buf = _recompress(batch, target)
        header = kcodecs.read_batch(buf).header()
    else:
        buf = bytearray(batch.raw)
    if config.timestamp_type is TimestampType.LOG_APPEND_TIME:
        kcodecs.stamp_v2(buf, base_offset=next_offset, partition_leader_epoch=LEADER_EPOCH, log_append_time=now_ms)
        max_timestamp, log_append_time = now_ms, now_ms
    else:
        kcodecs.stamp_v2(buf, base_offset=next_offset, partition_leader_epoch=LEADER_EPOCH)
        max_timestamp, log_append_time = header.max_timestamp, -1
    last_offset = next_offset + header.last_offset_delta
    return ValidationResult(buf, next_offset, last_offset, max_timestamp, last_offset, log_append_time)


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
