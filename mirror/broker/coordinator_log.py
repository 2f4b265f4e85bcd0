"""The coordinators' state logs: an append-only file of CRC-framed records, replayed whole
on load and rewritten to compact. Not a partition's log: segments and their batches are
:mod:`.log.file_records` (Kafka's ``FileRecords``).

Both ``<data_dir>/.transactions/state.log`` (:mod:`.transactions.state_log`) and
``<data_dir>/.groups/state.log`` (:mod:`.groups.state_log`) are such files; what a payload
means is theirs to say. Records lie back to back from byte 0, no file header, big-endian::

    offset  size  field
     0      4     length   int32    bytes of payload
     4      4     crc      uint32   zlib CRC-32 of the payload (a corrupt length makes it
                                    cover the wrong bytes, so it fails too)
     8      n     payload  the caller's bytes (both coordinators write one UTF-8 JSON object)

Why not Kafka's layout: ``__transaction_state`` and ``__consumer_offsets`` are compacted,
replicated topics read only by their coordinators; on one node with no replication a file
of self-describing records does the same job, and stays readable with ``strings``.

Reading stops at the first record that is cut short, has a negative length or fails its
CRC; everything from there on is a torn tail, whose writer was never acknowledged (a record
is appended before its change is applied or answered), and is cut off when the file is
opened.

Durability follows the broker's ``--flush``, like the partition logs: under ``always``
every append is fdatasync'ed before :meth:`CoordinatorLog.append` returns (it survives power
loss); under ``os`` it is in the page cache (it survives the process being killed).

Compaction: the last record about a key wins on replay, so the file only grows; when the
caller decides it holds too many records more than its live state (each state log has its
``COMPACT_SLACK``), :meth:`CoordinatorLog.compact` writes the live state to ``<name>.tmp``,
fsyncs it and renames it over the file, so a crash leaves one whole file or the other.
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path
from typing import Iterable, Literal

from .log.files import fsync_dir

__all__ = ["CoordinatorLog"]

log = logging.getLogger(__name__)

_FRAME = struct.Struct(
    ">i"  # length: bytes of payload
    "I"   # crc: zlib.crc32(payload)
)


class CoordinatorLog:
    """One coordinator's state log file (the module docstring has its framing and rules)."""

    def __init__(self, path: Path, *, flush: Literal["always", "os"] = "os"):
        self.path = path
        self.fsync = flush == "always"
        self.records = 0
        """Records in the file: what compaction compares with the live state."""
        self._fd = -1
        self._size = 0

    def load(self) -> list[bytes]:
        """Open the file (creating it) and return every whole record's payload, cutting off a torn tail."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        data = b"" if created else self.path.read_bytes()
        payloads, position = [], 0
        while position + _FRAME.size <= len(data):
            length, crc = _FRAME.unpack_from(data, position)
            payload = data[position + _FRAME.size:position + _FRAME.size + length]
            if length < 0 or len(payload) < length or zlib.crc32(payload) != crc:
                break
            payloads.append(payload)
            position += _FRAME.size + length
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if created and self.fsync:
            fsync_dir(self.path.parent)
        if position < len(data):
            log.warning("%s: cutting off %d bytes of a torn or corrupt record at byte %d",
                        self.path, len(data) - position, position)
            os.ftruncate(self._fd, position)
        self._size, self.records = position, len(payloads)
        return payloads

    def append(self, payloads: list[bytes]) -> None:
        """Persist records with one write (and one fdatasync); on failure the file is as before."""
        frames = _frames(payloads)
        try:
            if os.pwrite(self._fd, frames, self._size) != len(frames):
                raise OSError(f"short write to {self.path}")
            if self.fsync:
                getattr(os, "fdatasync", os.fsync)(self._fd)
        except BaseException:
            os.ftruncate(self._fd, self._size)
            raise
        self._size += len(frames)
        self.records += len(payloads)

    def rewrite(self, payloads: list[bytes]) -> None:
        """Replace the whole file with these records, atomically."""
        frames = _frames(payloads)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            out.write(frames)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.path)
        # Reopen before anything else can fail, so appends never go to the replaced inode.
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR, 0o644)
        self._size, self.records = len(frames), len(payloads)
        fsync_dir(self.path.parent)

    def compact(self, payloads: list[bytes]) -> None:
        """:meth:`rewrite`, but a failure is only logged: the appended records are safe as
        they are, compaction only saves space, and the caller tries again later."""
        try:
            self.rewrite(payloads)
            log.info("%s: compacted to %d records", self.path, len(payloads))
        except OSError as exc:
            log.error("%s: compaction failed, will retry: %s", self.path, exc)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def _frames(payloads: Iterable[bytes]) -> bytes:
    return b"".join(_FRAME.pack(len(payload), zlib.crc32(payload)) + payload for payload in payloads)
