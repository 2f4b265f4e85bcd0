"""The field codec every hand-encoded message shares: primitives in their classic and flexible
encodings, and the request header.

Primitive encodings (Kafka's ``protocol.types``; "flexible" versions, KIP-482, switch to the
compact forms and end every struct with tagged fields)::

    type             classic                        flexible
    string           int16 length + utf-8           uvarint(length + 1) + utf-8
    nullable string  int16 length, -1 = null        uvarint(length + 1), 0 = null
    array            int32 count (-1 = null)        uvarint(count + 1) (0 = null)
    bytes / records  int32 length, -1 = null        uvarint(length + 1), 0 = null
    tagged fields    (none)                         uvarint count, then (uvarint tag, uvarint size, data)*

Unsigned varints are :mod:`kcodecs`'s (``read_uvarint``/``write_uvarint``, at most 5 bytes
as Kafka's ``ByteUtils.readUnsignedVarint``): the one varint module of the project.

Request header (v1; v2 for flexible requests adds tagged fields after client_id, which
stays a classic nullable string in both)::

    api_key int16 | api_version int16 | correlation_id int32 | client_id nullable string

Response header: correlation_id int32 (v0); v1, for flexible responses, adds tagged fields.

:class:`Writer` and :class:`Reader` let their callers' mistakes and short reads surface as
``struct.error``, ``IndexError``, unicode errors or :class:`kcodecs.VarintError`, which is
cheaper than checking every field; each public encoder and decoder catches
:data:`ENCODE_ERRORS` or :data:`DECODE_ERRORS` once, at its boundary, and raises
:class:`~.errors.ProtocolError` from it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from kcodecs import VarintError, read_uvarint, write_uvarint

from .errors import ProtocolError

T = TypeVar("T")

__all__ = [
    "Buffer",
    "RequestHeader",
    "Writer",
    "Reader",
    "begin_request",
    "decode_request_header",
    "check_version",
    "consecutive_runs",
    "ENCODE_ERRORS",
    "DECODE_ERRORS",
    "NULL_LENGTH",
    "INT16",
    "INT32",
    "INT64",
]

Buffer = bytes | bytearray | memoryview

NULL_LENGTH = -1  # classic encodings' null string, array and bytes
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
_HEADER_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_NO_TAGS = b"\x00"  # an empty tagged-field section: what we write, never anything else

ENCODE_ERRORS = (struct.error, UnicodeEncodeError, AttributeError, TypeError, VarintError)
"""What a value that does not fit its field raises while a :class:`Writer` encodes it."""
DECODE_ERRORS = (struct.error, IndexError, UnicodeDecodeError, VarintError)
"""What malformed or truncated bytes raise while a :class:`Reader` reads them."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int
    """Bytes the header takes: the body starts here."""


# --- encoding ------------------------------------------------------------------------------------------------


class Writer:
    """Accumulates small fields in one bytearray; a borrowed buffer cuts it into a piece of its
    own. Counts the bytes of the pieces as they come, for the frame's size prefix."""

    __slots__ = ("pieces", "buf", "flexible", "size")

    def __init__(self, flexible: bool):
        self.pieces: list[Buffer] = [b""]  # [0] becomes the frame size, known at the end
        self.buf = bytearray()
        self.flexible = flexible
        self.size = 0
        """Bytes in ``pieces`` (the size prefix aside)."""

    def length(self, n: int | None, classic: struct.Struct) -> None:
        """A string, array or bytes length (``None`` = null) in this message's encoding."""
        if self.flexible:
            value = 0 if n is None else n + 1
            if 0 <= value < 0x80:  # one byte: nearly every length, so it skips the call
                self.buf.append(value)
            else:
                write_uvarint(self.buf, value)
        else:
            self.buf += classic.pack(NULL_LENGTH if n is None else n)

    def string(self, value: str | None) -> None:
        data = None if value is None else value.encode()
        self.length(None if data is None else len(data), INT16)
        if data is not None:
            self.buf += data

    def tags(self) -> None:
        if self.flexible:
            self.buf += _NO_TAGS

    def topics(self, runs: Sequence[tuple[str, Sequence[T]]], partition: Callable[[T], None]) -> None:
        """Kafka's two-level ``topics[partitions[...]]`` array, each level closed by its tagged
        fields; ``partition`` writes one partition's own fields."""
        self.length(len(runs), INT32)
        for topic, parts in runs:
            self.string(topic)
            self.length(len(parts), INT32)
            for part in parts:
                partition(part)
                self.tags()
            self.tags()

    def borrowed(self, records: Buffer | None) -> None:
        """A nullable bytes field whose data is the caller's buffer, placed in the list as it is."""
        if records is None:
            self.length(None, INT32)
            return
        n = records.nbytes if isinstance(records, memoryview) else len(records)
        self.length(n, INT32)
        buf = self.buf
        self.pieces += (bytes(buf), records)
        self.size += len(buf) + n
        buf.clear()

    def frame(self) -> list[Buffer]:
        """The whole message, its size prefix first, as pieces for ``socket.sendmsg``."""
        buf = self.buf
        if buf:
            self.pieces.append(bytes(buf))
        self.pieces[0] = INT32.pack(self.size + len(buf))
        return self.pieces


def begin_request(api_key: int, version: int, correlation_id: int, client_id: str | None, flexible: bool) -> Writer:
    """A request under way, its header written: v1, or v2 with tagged fields for a
    ``flexible`` version, in whose encoding the body goes on. Bad values raise one of
    :data:`ENCODE_ERRORS`, which the caller's encoder turns into :class:`ProtocolError`."""
    out = Writer(flexible=False)  # client_id stays a classic string in header v2 (KIP-482)
    out.buf += _HEADER_PREFIX.pack(api_key, version, correlation_id)
    out.string(client_id)
    out.flexible = flexible
    out.tags()
    return out


def consecutive_runs(partitions: Sequence) -> list[tuple[str, list]]:
    """Partitions (anything with a ``topic``) grouped by topic where they follow each other, as
    Kafka's ``FetchResponse.toMessage`` groups them, so a decoded response encodes back to the
    same bytes."""
    runs: list[tuple[str, list]] = []
    for part in partitions:
        if not runs or runs[-1][0] != part.topic:
            runs.append((part.topic, []))
        runs[-1][1].append(part)
    return runs


def check_version(api: str, version: int, versions: range) -> None:
    if version not in versions:
        raise ProtocolError(f"{api} v{version} is not hand-encoded here (v{versions[0]}..{versions[-1]} are)")


# --- decoding ------------------------------------------------------------------------------------------------


class Reader:
    """A cursor over a view. Short reads surface as one of :data:`DECODE_ERRORS`, which the
    public decoders turn into :class:`ProtocolError` at their boundary; what only a whole
    message can tell (a null name, a length past the end, bytes left over) is a
    :class:`ProtocolError` here."""

    __slots__ = ("view", "pos", "flexible")

    def __init__(self, data: Buffer, flexible: bool):
        view = memoryview(data)
        self.view = view if view.format == "B" and view.ndim == 1 else view.cast("B")
        self.pos = 0
        self.flexible = flexible

    def fixed(self, layout: struct.Struct) -> tuple:
        values = layout.unpack_from(self.view, self.pos)
        self.pos += layout.size
        return values

    def uvarint(self) -> int:
        view, pos = self.view, self.pos
        first = view[pos]
        if first < 0x80:  # one byte: nearly every length and tag count, so it skips the call
            self.pos = pos + 1
            return first
        value, self.pos = read_uvarint(view, pos)
        return value

    def length(self, classic: struct.Struct) -> int | None:
        """A string, array or bytes length; ``None`` when null."""
        n = self.uvarint() - 1 if self.flexible else self.fixed(classic)[0]
        if n == NULL_LENGTH:
            return None
        if not 0 <= n <= len(self.view) - self.pos:  # every element takes a byte at least
            raise ProtocolError(f"length {n} at {self.pos} runs past the {len(self.view)}-byte body")
        return n

    def take(self, n: int) -> memoryview:
        data = self.view[self.pos : self.pos + n]
        self.pos += n
        return data

    def string(self) -> str | None:
        n = self.length(INT16)
        return None if n is None else str(self.take(n), "utf-8")

    def name(self, what: str) -> str:
        value = self.string()
        if value is None:
            raise ProtocolError(f"null {what} at {self.pos}")
        return value

    def count(self, what: str) -> int:
        n = self.length(INT32)
        if n is None:
            raise ProtocolError(f"null {what} array at {self.pos}")
        return n

    def tags(self) -> None:
        """Skip a tagged-field section: none of the tags these messages define is needed here."""
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                size = self.uvarint()
                if size > len(self.view) - self.pos:
                    raise ProtocolError(f"tagged field of {size} bytes at {self.pos} runs past the body")
                self.pos += size

    def topics(self, partition: Callable[[str], T]) -> list[T]:
        """Kafka's two-level ``topics[partitions[...]]`` array, each level closed by its tagged
        fields; ``partition(topic)`` reads one partition's own fields."""
        parts = []
        for _ in range(self.count("topics")):
            topic = self.name("topic name")
            for _ in range(self.count("partitions")):
                parts.append(partition(topic))
                self.tags()
            self.tags()
        return parts

    def end(self) -> None:
        """The message's own tagged fields, and nothing after them."""
        self.tags()
        if self.pos != len(self.view):
            raise ProtocolError(f"{len(self.view) - self.pos} bytes left over after the last field")


def decode_request_header(frame: Buffer, *, flexible: bool) -> RequestHeader:
    """Request header v1, or v2 when ``flexible`` (the API's flexible versions), at the start of
    ``frame`` (after the size prefix). Kafka-python's own header decoder copies the whole frame."""
    reader = Reader(frame, flexible=False)  # client_id is a classic string even in v2 (KIP-482)
    try:
        api_key, api_version, correlation_id = reader.fixed(_HEADER_PREFIX)
        client_id = reader.string()
        reader.flexible = flexible
        reader.tags()
    except DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed request header: {exc}") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id, reader.pos)
