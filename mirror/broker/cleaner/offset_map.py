"""The cleaner's map from key to latest offset, in a fixed amount of memory (Kafka's ``SkimpyOffsetMap``).

Each slot is 24 bytes: the key's MD5 digest (16 bytes) and the offset plus one (8 bytes,
zero marks an empty slot), open addressing with linear probing. Two keys with the same
digest would share a slot, as in Kafka: with 128-bit digests that is not a practical risk.
The memory is an anonymous mapping, so an idle broker pays nothing for the buffer and a
clean touches only the pages its keys hash to; it is released when the map is closed.
"""

from __future__ import annotations

import hashlib
import mmap
import struct

__all__ = ["OffsetMap", "BYTES_PER_ENTRY"]

_HASH_SIZE = 16
BYTES_PER_ENTRY = _HASH_SIZE + 8
_OFFSET = struct.Struct(">q")
_SLOT_OF = struct.Struct(">Q")


class OffsetMap:
    """``put``/``get`` keys in at most ``memory_bytes``; fills to ``load_factor`` of its slots."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9):
        self.slots = memory_bytes // BYTES_PER_ENTRY
        self.max_entries = int(self.slots * load_factor)
        if self.max_entries < 1:
            raise ValueError(f"an offset map of {memory_bytes} bytes has room for no entry")
        self._buffer = mmap.mmap(-1, self.slots * BYTES_PER_ENTRY)
        self.size = 0
        """Distinct keys in the map."""
        self.latest_offset = -1
        """The largest offset put so far."""

    def put(self, key: bytes, offset: int) -> None:
        """Record ``offset`` as ``key``'s latest; raises ``OverflowError`` past :attr:`max_entries`."""
        digest = hashlib.md5(key).digest()
        position = self._find(digest)
        if _OFFSET.unpack_from(self._buffer, position + _HASH_SIZE)[0] == 0:
            if self.size >= self.max_entries:
                raise OverflowError(f"the offset map is full ({self.size} keys)")
            self._buffer[position:position + _HASH_SIZE] = digest
            self.size += 1
        _OFFSET.pack_into(self._buffer, position + _HASH_SIZE, offset + 1)
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """``key``'s latest offset, or -1 if the map has not seen it."""
        position = self._find(hashlib.md5(key).digest())
        return _OFFSET.unpack_from(self._buffer, position + _HASH_SIZE)[0] - 1

    def _find(self, digest: bytes) -> int:
        """The byte position of ``digest``'s slot, or of the empty slot where it would go."""
        buffer, slots = self._buffer, self.slots
        slot = _SLOT_OF.unpack_from(digest)[0] % slots
        while True:
            position = slot * BYTES_PER_ENTRY
            if _OFFSET.unpack_from(buffer, position + _HASH_SIZE)[0] == 0 or buffer[position:position + _HASH_SIZE] == digest:
                return position
            slot = slot + 1 if slot + 1 < slots else 0

    @property
    def memory_bytes(self) -> int:
        return self.slots * BYTES_PER_ENTRY

    def close(self) -> None:
        self._buffer.close()

    def __enter__(self) -> "OffsetMap":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
