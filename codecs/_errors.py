"""The one exception hierarchy of kcodecs (and the root of kmirror's).

::

    KMirrorError                      root of everything kmirror raises on purpose
    └── KcodecsError                  byte-level problems (this package)
        ├── CorruptBatchError         bytes that do not parse, fail their CRC or lie about sizes
        │   └── DecompressionLimitError   a payload inflates past the caller's cap (bomb guard)
        ├── UnsupportedCodecError     a codec id or name we do not know, or not allowed for a magic
        ├── InvalidRecordError        a caller asked a builder or a patch for something the format cannot hold
        └── VarintError               an unsigned varint (protocol lengths, tags) too long, cut off or too big

The product (``mirror``) hangs its own errors (protocol, configuration, ...) under
:class:`KMirrorError`, so ``except KMirrorError`` catches every deliberate failure.
Lower-level exceptions (``struct.error``, ``zlib.error``, lz4/zstd errors) are translated
at the boundary with ``raise ... from exc`` and never escape.
"""

from __future__ import annotations

__all__ = [
    "KMirrorError",
    "KcodecsError",
    "CorruptBatchError",
    "DecompressionLimitError",
    "UnsupportedCodecError",
    "InvalidRecordError",
    "VarintError",
]


class KMirrorError(Exception):
    """Root of every error kmirror raises deliberately."""


class KcodecsError(KMirrorError):
    """Root of the errors raised by :mod:`kcodecs`."""


class CorruptBatchError(KcodecsError):
    """A batch or message set that cannot be trusted.

    ``position`` is the byte position of the batch in the buffer that was being read
    (``None`` when unknown), ``offset`` its base offset when the header got that far.
    """

    def __init__(self, reason: str, *, position: int | None = None, offset: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.position = position
        self.offset = offset

    def at(self, position: int | None, offset: int | None) -> "CorruptBatchError":
        """Fill in where the batch was, for errors raised by code that only saw its payload."""
        if self.position is None:
            self.position = position
        if self.offset is None:
            self.offset = offset
        return self

    def __str__(self) -> str:
        where = []
        if self.position is not None:
            where.append(f"byte {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"corrupt batch at {', '.join(where)}: {self.reason}" if where else f"corrupt batch: {self.reason}"


class DecompressionLimitError(CorruptBatchError):
    """A compressed payload inflates beyond ``max_size`` (a decompression bomb or a wrong cap)."""

    def __init__(self, limit: int, *, position: int | None = None, offset: int | None = None):
        super().__init__(f"decompressed size exceeds the limit of {limit} bytes", position=position, offset=offset)
        self.limit = limit


class UnsupportedCodecError(KcodecsError):
    """A compression codec that is unknown, or not valid for the record format."""


class InvalidRecordError(KcodecsError, ValueError):
    """A request to build or patch something the record format cannot express."""


class VarintError(KcodecsError):
    """An unsigned varint that cannot be read (longer than 5 bytes, cut off, over 32 bits), or
    a value no unsigned varint holds given to be written.

    Not a :class:`CorruptBatchError`: unsigned varints are the request and response framing of
    the protocol's flexible versions (KIP-482), not record data, and the protocol layer turns
    this into its own ``ProtocolError``. ``position`` is where the varint starts in the buffer
    being read (``None`` for a write).
    """

    def __init__(self, reason: str, *, position: int | None = None):
        super().__init__(reason if position is None else f"{reason} at byte {position}")
        self.reason = reason
        self.position = position
