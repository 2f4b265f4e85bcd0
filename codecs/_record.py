"""The record as users see it, whatever format carried it."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Sequence

from ._errors import CorruptBatchError, InvalidRecordError

__all__ = ["Record", "Header", "TimestampType", "ControlType", "control_record", "parse_control_record", "NO_TIMESTAMP"]

Header = tuple[str, "bytes | None"]

NO_TIMESTAMP = -1
"""Kafka's ``RecordBatch.NO_TIMESTAMP``: what v0 messages and unset timestamps read as."""


class TimestampType(enum.IntEnum):
    """Kafka's ``TimestampType``; the attribute bit is 0 for CreateTime, 1 for LogAppendTime (KIP-32)."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


@dataclass(frozen=True, slots=True)
class Record:
    """One record. ``offset`` is filled in when read from a batch and ignored by builders."""

    key: bytes | None = None
    value: bytes | None = None
    timestamp: int = NO_TIMESTAMP
    headers: Sequence[Header] = field(default_factory=list)
    offset: int = -1


class ControlType(enum.IntEnum):
    """Type of a transaction marker (Kafka's ``ControlRecordType``)."""

    ABORT = 0
    COMMIT = 1


# Control record key: version int16 (0), type int16. Value (EndTransactionMarker):
# version int16 (0), coordinator epoch int32.
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")


def control_record(kind: ControlType, *, coordinator_epoch: int = 0, timestamp: int = NO_TIMESTAMP) -> Record:
    """A commit or abort marker, to be built into a batch with ``control=True``."""
    return Record(
        key=_CONTROL_KEY.pack(0, int(kind)),
        value=_CONTROL_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
    )


def parse_control_record(record: Record) -> tuple[ControlType, int]:
    """Return ``(type, coordinator_epoch)`` of a marker read from a control batch."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise CorruptBatchError("control record key is missing or too short", offset=record.offset)
    _, kind = _CONTROL_KEY.unpack_from(record.key)
    try:
        control_type = ControlType(kind)
    except ValueError as exc:
        raise CorruptBatchError(f"unknown control record type {kind}", offset=record.offset) from exc
    epoch = -1
    if record.value is not None and len(record.value) >= _CONTROL_VALUE.size:
        _, epoch = _CONTROL_VALUE.unpack_from(record.value)
    return control_type, epoch


def check_headers(headers: Sequence[Header]) -> None:
    """Reject header shapes the wire format cannot carry, before any bytes are written."""
    for item in headers:
        if not (
            isinstance(item, tuple)
            and len(item) == 2
            and isinstance(item[0], str)
            and (item[1] is None or isinstance(item[1], (bytes, bytearray, memoryview)))
        ):
            raise InvalidRecordError(f"a header must be a (str, bytes | None) pair, got {item!r}")
        try:
            item[0].encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidRecordError(f"header key {item[0]!r} has no UTF-8 encoding: {exc}") from exc


def check_int(value: int, bits: int, what: str) -> int:
    """Refuse a value a signed ``bits``-bit field cannot hold, before any byte is written.

    Checked up front because ``struct.pack_into`` writes part of an out-of-range int64
    before raising, which would leave a half-patched batch behind, and because a varlong
    past 64 bits would silently wrap.
    """
    limit = 1 << (bits - 1)
    if not (isinstance(value, int) and -limit <= value < limit):
        raise InvalidRecordError(f"{what} {value!r} does not fit a signed {bits}-bit field")
    return value
