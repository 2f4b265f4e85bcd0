"""One entry point for building batches of any magic from :class:`~kcodecs.Record` objects."""

from __future__ import annotations

from typing import Sequence

from ._compression import Compression
from ._errors import InvalidRecordError
from ._legacy import build_legacy
from ._record import Record, TimestampType
from ._v2 import build_v2

__all__ = ["build_batch"]


def build_batch(
    records: Sequence[Record],
    *,
    magic: int = 2,
    compression: Compression | str | int = Compression.NONE,
    base_offset: int = 0,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    control: bool = False,
    partition_leader_epoch: int = -1,
    mark_no_keys: bool = True,
) -> bytes:
    """Build one batch (v2) or message set (v0/v1) holding ``records`` at offsets ``base_offset``..+n-1.

    ``compression`` is a :class:`Compression` or its lower-case name. ``max_timestamp``
    defaults to the largest record timestamp; pass the broker's time with
    ``timestamp_type=LOG_APPEND_TIME``. ``mark_no_keys`` sets kmirror's no-keys flag (v2) when
    no record has a key. Producer state, ``transactional``, ``control`` and
    ``partition_leader_epoch`` exist only in v2. v0/v1 sets cannot carry headers or zstd, and
    v0 has no timestamps.
    """
    if not records:
        raise InvalidRecordError("a batch needs at least one record")
    codec = Compression.parse(compression)
    try:
        timestamp_type = TimestampType(timestamp_type)
    except ValueError as exc:
        raise InvalidRecordError(f"unknown timestamp type {timestamp_type!r}") from exc
    if magic == 2:
        return build_v2(
            records,
            compression=codec,
            base_offset=base_offset,
            timestamp_type=timestamp_type,
            max_timestamp=max_timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
            control=control,
            partition_leader_epoch=partition_leader_epoch,
            mark_no_keys=mark_no_keys,
        )
    if magic in (0, 1):
        v2_fields = (producer_id, producer_epoch, base_sequence, partition_leader_epoch)
        if transactional or control or v2_fields != (-1, -1, -1, -1):
            raise InvalidRecordError(
                f"producer state, leader epochs, transactions and control batches need magic 2, not {magic}"
            )
        return build_legacy(
            records,
            magic=magic,
            compression=codec,
            base_offset=base_offset,
            timestamp_type=timestamp_type,
            max_timestamp=max_timestamp,
        )
    raise InvalidRecordError(f"unknown magic {magic}; kcodecs builds 0, 1 and 2")
