"""In-place header patches: what a broker or a mirror changes without touching the payload.

Each function takes a writable buffer (``bytearray`` or a writable ``memoryview`` slice)
that starts with exactly one batch, patches header fields only, and says whether it
recomputes the CRC. None of them decompresses. Modelled on Kafka's
``DefaultRecordBatch.setLastOffset`` / ``setMaxTimestamp`` / ``setPartitionLeaderEpoch``
and ``LegacyRecord``'s wrapper updates in ``LogValidator``.

=========================  =======  ====================================================
patch                      magics   CRC
=========================  =======  ====================================================
set_base_offset            2        untouched: baseOffset lies before the CRC's coverage
set_wrapper_offset         0, 1     untouched: the offset field lies before the CRC-32's
set_partition_leader_epoch 2        untouched: the epoch lies before the CRC's coverage
set_log_append_time        1, 2     recomputed, and only when a byte changed
clear_log_append_time      1, 2     recomputed, and only when a byte changed
set_producer_state         2        recomputed, and only when a byte changed
clear_producer_state       2        recomputed, and only when a byte changed
stamp_v2                   2        recomputed once, and only when a covered byte changed
=========================  =======  ====================================================

``stamp_v2`` makes the patches a broker's append or a mirror's producer needs (offsets,
leader epoch, timestamp type, and for a producer its own producer state) in one call: on a
16 KiB batch, each separate patch's checks cost about as much as the CRC itself.
"""

from __future__ import annotations

import struct

from . import _legacy, _v2
from ._batch import LOG_OVERHEAD, MAGIC_OFFSET
from ._errors import CorruptBatchError, InvalidRecordError
from ._record import check_int

__all__ = [
    "set_base_offset",
    "set_wrapper_offset",
    "set_partition_leader_epoch",
    "set_log_append_time",
    "clear_log_append_time",
    "set_producer_state",
    "clear_producer_state",
    "stamp_v2",
]


def _patchable(buf: bytearray | memoryview, magics: tuple[int, ...], what: str) -> tuple[memoryview, int]:
    view = memoryview(buf)
    if view.readonly:
        raise InvalidRecordError(f"{what} needs a writable buffer (bytearray or writable memoryview)")
    if len(view) <= MAGIC_OFFSET:
        raise CorruptBatchError(f"{len(view)} bytes cannot hold a batch header")
    magic = view[MAGIC_OFFSET]
    if magic not in magics:
        raise InvalidRecordError(f"{what} applies to magic {' or '.join(map(str, magics))}, not {magic}")
    minimum = _v2.HEADER_SIZE if magic == 2 else LOG_OVERHEAD + _legacy.RECORD_OVERHEAD[magic]
    end = LOG_OVERHEAD + _v2.INT32.unpack_from(view, _v2.LENGTH)[0]
    if not minimum <= end <= len(view):
        raise CorruptBatchError(f"size field says {end} bytes, buffer has {len(view)}, magic {magic} needs {minimum}")
    # Bound the view to this batch, so a CRC never covers whatever follows it in the buffer.
    return view[:end], magic


def set_base_offset(buf: bytearray | memoryview, base_offset: int) -> None:
    """Set a v2 batch's baseOffset (KIP-31: the broker assigns offsets by this patch alone). CRC untouched."""
    view, _ = _patchable(buf, (2,), "set_base_offset")
    _v2.INT64.pack_into(view, _v2.BASE_OFFSET, check_int(base_offset, 64, "baseOffset"))


def set_wrapper_offset(buf: bytearray | memoryview, offset: int) -> None:
    """Set a v0/v1 message's offset field: the message's own offset, or a wrapper's last inner offset.

    CRC untouched. For a v1 wrapper this moves every inner offset (they are relative);
    a v0 wrapper's inner offsets are absolute and stay as they were, which is why v0 sets
    must be rebuilt rather than patched when their offsets change.
    """
    view, _ = _patchable(buf, (0, 1), "set_wrapper_offset")
    _legacy.INT64.pack_into(view, _legacy.OFFSET, check_int(offset, 64, "offset"))


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: int) -> None:
    """Set a v2 batch's partitionLeaderEpoch. CRC untouched (the field is outside it by design)."""
    view, _ = _patchable(buf, (2,), "set_partition_leader_epoch")
    _v2.INT32.pack_into(view, _v2.PARTITION_LEADER_EPOCH, check_int(epoch, 32, "partitionLeaderEpoch"))


def set_log_append_time(buf: bytearray | memoryview, timestamp: int) -> None:
    """Mark the batch LogAppendTime with the broker's ``timestamp`` as its max timestamp (KIP-32).

    Consumers then read ``timestamp`` for every record. v2: attributes bit 3 and maxTimestamp;
    v1: the attributes bit and the (wrapper) timestamp. CRC recomputed when anything changed.
    """
    view, magic = _patchable(buf, (1, 2), "set_log_append_time")
    check_int(timestamp, 64, "timestamp")
    if magic == 2:
        attributes = _v2.INT16.unpack_from(view, _v2.ATTRIBUTES)[0] | _v2.TIMESTAMP_TYPE_MASK
        _patch_v2(view, attributes, timestamp)
    else:
        _patch_v1(view, view[_legacy.ATTRIBUTES] | _legacy.TIMESTAMP_TYPE_MASK, timestamp)


def clear_log_append_time(buf: bytearray | memoryview) -> None:
    """Turn a LogAppendTime batch back into CreateTime, so a destination can stamp its own time.

    Records then read their producer timestamps again (v2 keeps them as deltas; a v1 wrapper's
    inner messages keep theirs). The max timestamp is left as it was: it is the source
    broker's append time, an upper bound a CreateTime destination accepts. CRC recomputed when
    the bit was set.
    """
    view, magic = _patchable(buf, (1, 2), "clear_log_append_time")
    if magic == 2:
        attributes = _v2.INT16.unpack_from(view, _v2.ATTRIBUTES)[0] & ~_v2.TIMESTAMP_TYPE_MASK
        _patch_v2(view, attributes, _v2.INT64.unpack_from(view, _v2.MAX_TIMESTAMP)[0])
    else:
        _patch_v1(view, view[_legacy.ATTRIBUTES] & ~_legacy.TIMESTAMP_TYPE_MASK, _legacy.INT64.unpack_from(view, _legacy.TIMESTAMP)[0])


def set_producer_state(
    buf: bytearray | memoryview,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    *,
    transactional: bool = False,
) -> None:
    """Give a v2 batch a producer identity, as an idempotent or transactional producer would have.

    Writes producerId, producerEpoch, baseSequence and the transactional bit (KIP-98), so a
    mirror can re-produce source batches under its own idempotent producer without
    rebuilding them. Every value is range-checked before a byte is written. CRC recomputed,
    and only when a byte changed (these fields lie inside its coverage).
    """
    view, _ = _patchable(buf, (2,), "set_producer_state")
    state = (
        check_int(producer_id, 64, "producerId"),
        check_int(producer_epoch, 16, "producerEpoch"),
        check_int(base_sequence, 32, "baseSequence"),
    )
    old_attributes = _v2.INT16.unpack_from(view, _v2.ATTRIBUTES)[0]
    if transactional:
        attributes = old_attributes | _v2.TRANSACTIONAL_MASK
    else:
        attributes = old_attributes & ~_v2.TRANSACTIONAL_MASK
    if (old_attributes, _v2.PRODUCER_STATE.unpack_from(view, _v2.PRODUCER_ID)) == (attributes, state):
        return
    _v2.INT16.pack_into(view, _v2.ATTRIBUTES, attributes)
    _v2.PRODUCER_STATE.pack_into(view, _v2.PRODUCER_ID, *state)
    _v2.write_crc(view)


def clear_producer_state(buf: bytearray | memoryview) -> None:
    """Drop the source's idempotence and transaction identity so a destination sees a plain batch.

    Sets producerId, producerEpoch and baseSequence to -1 and clears the transactional bit
    (a transactional batch without a producer id is invalid). CRC recomputed when anything changed.
    """
    set_producer_state(buf, -1, -1, -1, transactional=False)


def stamp_v2(
    buf: bytearray | memoryview,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time: int | None = None,
    clear_producer_state: bool = False,
    clear_delete_horizon: bool = False,
    producer_state: tuple[int, int, int] | None = None,
    transactional: bool = False,
) -> None:
    """What :func:`set_base_offset`, :func:`set_partition_leader_epoch`, then
    :func:`set_log_append_time` (``log_append_time`` given) or :func:`clear_log_append_time`
    (None), then with ``clear_producer_state`` :func:`clear_producer_state`, or with
    ``producer_state`` (producer id, epoch, base sequence) :func:`set_producer_state` with
    ``transactional``, do, in one patch: the header is checked once, every value before a
    byte is written, and the CRC is recomputed once, only when a byte it covers changed.

    ``clear_delete_horizon`` clears attribute bit 6 (KIP-534): a log cleaner set it, and
    the base timestamp holds the time after which the batch's tombstones may go. The base
    timestamp stays, as the base its records' timestamp deltas are read from, so every
    record keeps its timestamp; only the horizon no longer applies."""
    view = _stamp_target(buf)
    if clear_producer_state:
        if producer_state is not None or transactional:
            raise InvalidRecordError("stamp_v2: clear_producer_state contradicts producer_state and transactional")
        producer_state = _NO_PRODUCER
    elif producer_state is None and transactional:
        raise InvalidRecordError("stamp_v2: a transactional batch needs a producer_state")
    try:  # every value checked by packing it once, before a byte of the batch is written
        _STAMP_VALUES.pack(base_offset, partition_leader_epoch, 0 if log_append_time is None else log_append_time,
                           *(producer_state or _NO_PRODUCER))
    except (struct.error, TypeError) as error:
        _refuse_stamp_values(base_offset, partition_leader_epoch, log_append_time, producer_state)
        raise InvalidRecordError(f"stamp_v2: cannot write these values: {error}") from error
    old = _STAMPED.unpack_from(view, _v2.ATTRIBUTES)
    attributes, last_offset_delta, base_timestamp, max_timestamp = old[:4]
    if log_append_time is None:  # CreateTime: the max timestamp stays as it is
        attributes &= ~_v2.TIMESTAMP_TYPE_MASK
    else:
        attributes, max_timestamp = attributes | _v2.TIMESTAMP_TYPE_MASK, log_append_time
    if clear_delete_horizon:
        attributes &= ~_v2.DELETE_HORIZON_MASK
    if producer_state is None:
        producer_state = old[4:]
    else:
        attributes = attributes | _v2.TRANSACTIONAL_MASK if transactional else attributes & ~_v2.TRANSACTIONAL_MASK
    _FRONT.pack_into(view, _v2.BASE_OFFSET, base_offset, len(view) - LOG_OVERHEAD, partition_leader_epoch)
    new = (attributes, last_offset_delta, base_timestamp, max_timestamp, *producer_state)
    if new != old:
        _STAMPED.pack_into(view, _v2.ATTRIBUTES, *new)
        _v2.write_crc(view)


_FRONT = struct.Struct(">qii")
"""baseOffset, batchLength, partitionLeaderEpoch: what a stamp writes before the CRC's coverage."""

_STAMPED = struct.Struct(">hiqqqhi")
"""attributes up to baseSequence (bytes 21-57): what a stamp may change inside the CRC's
coverage, read and written in one call each (five calls apart cost as much as the CRC)."""

_STAMP_VALUES = struct.Struct(">qiqqhi")
"""baseOffset, partitionLeaderEpoch, the append time, producerId, producerEpoch, baseSequence:
packed once to check every value at once."""


def _stamp_target(buf: bytearray | memoryview) -> memoryview:
    """A writable view of the v2 batch ``buf`` starts with, bounded to it: the checks of
    :func:`_patchable`, made inline for the one patch a mirror makes on every batch."""
    view = memoryview(buf)
    if view.readonly or len(view) < _v2.HEADER_SIZE or view[MAGIC_OFFSET] != 2:
        _patchable(buf, (2,), "stamp_v2")  # raises the error that names what is wrong
    end = LOG_OVERHEAD + _v2.INT32.unpack_from(view, _v2.LENGTH)[0]
    if not _v2.HEADER_SIZE <= end <= len(view):
        _patchable(buf, (2,), "stamp_v2")  # raises: the same check
    return view[:end]


def _refuse_stamp_values(base_offset: int, partition_leader_epoch: int, log_append_time: int | None,
                         producer_state: tuple[int, int, int] | None) -> None:
    """The named error for the value that failed :data:`_STAMP_VALUES`' pack."""
    check_int(base_offset, 64, "baseOffset")
    check_int(partition_leader_epoch, 32, "partitionLeaderEpoch")
    if log_append_time is not None:
        check_int(log_append_time, 64, "timestamp")
    if producer_state is not None:
        if not (isinstance(producer_state, tuple) and len(producer_state) == 3):
            raise InvalidRecordError(f"producer_state {producer_state!r} is not (producerId, producerEpoch, baseSequence)")
        producer_id, producer_epoch, base_sequence = producer_state
        check_int(producer_id, 64, "producerId")
        check_int(producer_epoch, 16, "producerEpoch")
        check_int(base_sequence, 32, "baseSequence")


_NO_PRODUCER = (-1, -1, -1)
"""producerId, producerEpoch, baseSequence of a batch from no idempotent producer."""


def _patch_v2(view: memoryview, attributes: int, max_timestamp: int) -> None:
    old_attributes = _v2.INT16.unpack_from(view, _v2.ATTRIBUTES)[0]
    old_max = _v2.INT64.unpack_from(view, _v2.MAX_TIMESTAMP)[0]
    if (old_attributes, old_max) == (attributes, max_timestamp):
        return
    _v2.INT16.pack_into(view, _v2.ATTRIBUTES, attributes)
    _v2.INT64.pack_into(view, _v2.MAX_TIMESTAMP, max_timestamp)
    _v2.write_crc(view)


def _patch_v1(view: memoryview, attributes: int, timestamp: int) -> None:
    old = (view[_legacy.ATTRIBUTES], _legacy.INT64.unpack_from(view, _legacy.TIMESTAMP)[0])
    if old == (attributes, timestamp):
        return
    view[_legacy.ATTRIBUTES] = attributes
    _legacy.INT64.pack_into(view, _legacy.TIMESTAMP, timestamp)
    _legacy.UINT32.pack_into(view, _legacy.CRC, _legacy.message_crc(view))
