"""kcodecs: Kafka record formats v0/v1/v2 and compression, as pure functions over bytes.

Read batches header-only with :func:`iter_batches`, decode them with :meth:`Batch.records`,
build them with :func:`build_batch`, and patch headers in place (offsets, LogAppendTime,
producer state, leader epoch) without touching compressed payloads. The unsigned varints of
the protocol's flexible versions live here too, beside the records' signed ones, so there is
one varint module. No I/O, no Spark.
See ``docs/kcodecs.md`` for the API and ``docs/formats.md`` for the byte layouts.
"""

from . import _errors, _rewrite
from ._batch import Batch
from ._build import build_batch
from ._coalesce import RecordBytes, build_from_record_bytes, record_bytes
from ._compression import DEFAULT_MAX_DECOMPRESSED_SIZE, Compression, compress, decompress
from ._errors import (
    CorruptBatchError,
    DecompressionLimitError,
    InvalidRecordError,
    KcodecsError,
    KMirrorError,
    UnsupportedCodecError,
    VarintError,
)
from ._legacy import LegacyBatch
from ._reader import iter_batches, iter_v2, read_batch
from ._record import NO_TIMESTAMP, ControlType, Header, Record, TimestampType, control_record, parse_control_record
from ._rewrite import (
    clear_log_append_time,
    clear_producer_state,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    set_producer_state,
    set_wrapper_offset,
    stamp_v2,
)
from ._v2 import NO_KEYS_MASK, NO_PARTITION_LEADER_EPOCH, V2Batch, V2Header, check_v2, record_content
from ._v2 import empty_v2 as empty_batch
from ._v2 import retain_v2 as retain_records
from ._varint import MAX_UVARINT_BYTES, read_uvarint, write_uvarint

__all__ = [
    "Batch",
    "V2Batch",
    "V2Header",
    "record_content",
    "LegacyBatch",
    "iter_batches",
    "iter_v2",
    "check_v2",
    "read_batch",
    "build_batch",
    "RecordBytes",
    "record_bytes",
    "build_from_record_bytes",
    "retain_records",
    "empty_batch",
    "Record",
    "Header",
    "TimestampType",
    "NO_TIMESTAMP",
    "ControlType",
    "control_record",
    "parse_control_record",
    "Compression",
    "compress",
    "decompress",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "NO_KEYS_MASK",
    "NO_PARTITION_LEADER_EPOCH",
    *_rewrite.__all__,
    "read_uvarint",
    "write_uvarint",
    "MAX_UVARINT_BYTES",
    *_errors.__all__,
]
