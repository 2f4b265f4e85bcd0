"""The coordinator's durable state: an append-only log of transaction metadata.

``<data_dir>/.transactions/state.log`` plays the part of Kafka's ``__transaction_state``
topic: each record is the whole state of one transactional id after a transition, the last
record of an id wins, and replaying the file rebuilds the coordinator. Records, big-endian::

    offset  size  field
     0      4     length   int32    bytes of payload
     4      4     crc      uint32   zlib CRC-32 of the payload
     8      n     payload  UTF-8 JSON: {"id", "pid", "epoch", "timeout_ms", "state" (Kafka's state
                           name), "update_ms", "prev_pid", "last_epoch", "partitions": [[topic, p], ...],
                           "start_ms"}

Why not Kafka's layout: ``__transaction_state`` is a compacted, replicated topic read only by
its coordinator; with one node and no replication a CRC-framed file of self-describing
records does the same job, and stays readable with ``strings``.

Durability follows the broker's flush policy, like the partition logs: under ``always``
each record is fdatasync'ed before :meth:`append` returns (it survives power loss); under
``os`` it is in the page cache (it survives the process being killed). A torn last record,
whose transition was never acknowledged, is cut off when the log is opened.

Compaction: once the file holds many more records than ids, it is rewritten with one
record per id into a temporary file, fsynced and renamed over the old one, so a crash
leaves either file whole.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from pathlib import Path
from typing import Iterable, Literal

from ..log.files import fsync_dir
from .metadata import TxnMetadata, TxnState

__all__ = ["TransactionStateLog"]

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">iI")
COMPACT_SLACK = 1000
"""Records beyond one per id tolerated before a rewrite; bounds the file to O(ids) and the
rewrite cost to once per this many transitions."""


class TransactionStateLog:
    """Appends transaction metadata durably and replays it."""

    def __init__(self, directory: Path, *, flush: Literal["always", "os"] = "os"):
        self.directory = directory
        self.path = directory / "state.log"
        self.fsync = flush == "always"
        self._fd = -1
        self._size = 0
        self._records = 0
        self._live: dict[str, TxnMetadata] = {}

    def load(self) -> dict[str, TxnMetadata]:
        """Replay the file (cutting off a torn tail); the latest state of every id."""
        self.directory.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        data = b"" if created else self.path.read_bytes()
        position = 0
        while position + _FRAME.size <= len(data):
            length, crc = _FRAME.unpack_from(data, position)
            payload = data[position + _FRAME.size:position + _FRAME.size + length]
            if length < 0 or len(payload) < length or zlib.crc32(payload) != crc:
                break
            meta = _decode(payload)
            self._live[meta.transactional_id] = meta
            self._records += 1
            position += _FRAME.size + length
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if created and self.fsync:
            fsync_dir(self.directory)
        if position < len(data):
            log.warning("%s: cutting off %d bytes of a torn or corrupt record at byte %d",
                        self.path, len(data) - position, position)
            os.ftruncate(self._fd, position)
        self._size = position
        self._maybe_compact()
        return dict(self._live)

    def append(self, meta: TxnMetadata) -> None:
        """Persist one transition; only then may the coordinator act on it or answer."""
        payload = _encode(meta)
        frame = _FRAME.pack(len(payload), zlib.crc32(payload)) + payload
        try:
            if os.pwrite(self._fd, frame, self._size) != len(frame):
                raise OSError(f"short write to {self.path}")
            if self.fsync:
                getattr(os, "fdatasync", os.fsync)(self._fd)
        except BaseException:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(frame)
        self._records += 1
        self._live[meta.transactional_id] = meta
        self._maybe_compact()

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def _maybe_compact(self) -> None:
        if self._records <= len(self._live) + COMPACT_SLACK:
            return
        tmp = self.path.with_suffix(".tmp")
        frames = _frames(self._live.values())
        with open(tmp, "wb") as out:
            out.write(frames)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.directory)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR, 0o644)
        self._size, self._records = len(frames), len(self._live)
        log.info("%s: compacted to %d records", self.path, self._records)


def _frames(metas: Iterable[TxnMetadata]) -> bytes:
    out = bytearray()
    for meta in metas:
        payload = _encode(meta)
        out += _FRAME.pack(len(payload), zlib.crc32(payload)) + payload
    return bytes(out)


def _encode(meta: TxnMetadata) -> bytes:
    return json.dumps({
        "id": meta.transactional_id, "pid": meta.producer_id, "epoch": meta.producer_epoch,
        "timeout_ms": meta.timeout_ms, "state": meta.state.kafka_name, "update_ms": meta.last_update_ms,
        "prev_pid": meta.previous_producer_id, "last_epoch": meta.last_producer_epoch,
        "partitions": sorted([topic, partition] for topic, partition in meta.partitions),
        "start_ms": meta.txn_start_ms,
    }, separators=(",", ":")).encode()


def _decode(payload: bytes) -> TxnMetadata:
    fields = json.loads(payload)
    return TxnMetadata(
        transactional_id=fields["id"], producer_id=fields["pid"], producer_epoch=fields["epoch"],
        timeout_ms=fields["timeout_ms"], state=TxnState.named(fields["state"]), last_update_ms=fields["update_ms"],
        previous_producer_id=fields["prev_pid"], last_producer_epoch=fields["last_epoch"],
        partitions=frozenset((topic, partition) for topic, partition in fields["partitions"]),
        txn_start_ms=fields["start_ms"],
    )
