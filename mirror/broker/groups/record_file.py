"""An append-only file of CRC-framed records, replayed whole on load and rewritten to compact.

Layout: records back to back, each ``length int32 | crc32 uint32 | payload`` (big-endian,
zlib's CRC-32 of the payload). What a payload means is the caller's business.

Durability follows the broker's ``--flush``: under ``always`` every append is fdatasync'ed
before :meth:`append` returns (it survives power loss); under ``os`` it is in the page cache
(it survives the process being killed). A torn or corrupt tail, whose writer was never
acknowledged, is cut off when the file is opened. :meth:`rewrite` writes the compacted
records to a temporary file, fsyncs it and renames it over the old one, so a crash leaves
one whole file or the other.

(The transaction coordinator's ``state.log`` uses the same framing, written by its own
:class:`~mirror.broker.transactions.TransactionStateLog`.)
"""

from __future__ import annotations

import logging
import os
import struct
import zlib
from pathlib import Path
from typing import Iterable, Literal

from ..log.files import fsync_dir

__all__ = ["RecordFile"]

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">iI")


class RecordFile:
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
        fsync_dir(self.path.parent)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR, 0o644)
        self._size, self.records = len(frames), len(payloads)

    def close(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1


def _frames(payloads: Iterable[bytes]) -> bytes:
    return b"".join(_FRAME.pack(len(payload), zlib.crc32(payload)) + payload for payload in payloads)
