"""What a Spark task and its resident copier say to each other over the copier's Unix socket:
three typed messages, each sent as data.

A task sends a :class:`Lease` (or, at the job's end, a :class:`Release`); the copier answers
with a :class:`Report`. On the wire a message is a frame header (the body's length, the
message's kind) and a body: the message's JSON, as pydantic writes the types it is made of
(the configuration's models, the engine's dataclasses). On receipt the body is validated
against the type its kind names, and the receiver says which kinds it waits for: anything
else is a :class:`MessageError` that names the kind and the fields at fault.

Data, not pickles: nothing in a message can name code to run, and no list of admitted classes
has to follow the configuration's models. A field of a type JSON cannot hold is written by the
type's own pydantic schema (an offset-sync log is its entries). Secrets (a SASL password, a
key's password) are written in clear (:data:`~mirror.config.REVEAL_SECRETS`) to the copier's
socket only, in a directory of mode 0700 (:func:`~.leasing.socket_path`), as the job hands
them to its Spark tasks; an error never quotes what it failed to read.
"""

from __future__ import annotations

import functools
import socket
import struct
from dataclasses import dataclass
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from kcodecs import KMirrorError

from ...config import REVEAL_SECRETS
from ..job import CopyJob
from ..ranges import CopyRequest, TaskStats

__all__ = ["Lease", "Release", "Report", "MessageError", "send", "receive", "encode", "decode"]

_FRAME = struct.Struct(">IB")
"""The body's length in bytes, then the message's kind: its index in :data:`_KINDS`."""
_MAX_MESSAGE = 256 * 1024 * 1024
"""Far above any lease or report (a report's size grows with partitions, not with data)."""


@dataclass(frozen=True)
class Lease:
    """Copy ``ranges`` (and keep following their partitions) until ``seconds`` from now; answer
    once every range's end is committed, or at once when ``wait`` is False (a renewal)."""

    job: CopyJob
    """The job as of this micro-batch: its routes may have grown since the last lease."""
    task: int
    ranges: tuple[CopyRequest, ...]
    seconds: float
    wait: bool = True


@dataclass(frozen=True)
class Release:
    """Commit what is copied, answer, and exit."""


@dataclass(frozen=True)
class Report:
    """A copier's answer: what it copied since its last report, or why it stopped."""

    stats: TaskStats | None = None
    crash: str | None = None
    """An error a new attempt may fix (a fenced producer): the task fails with
    :class:`~.leasing.CopierLostError`, and the driver runs it again (a new copier starts)."""
    refused: str | None = None
    """The copier could not read the message it was sent (:class:`MessageError`: its kind, the
    fields at fault): the task fails with :class:`~mirror.engine.errors.CopierRefusedError`,
    and the job with it."""


Message = Lease | Release | Report
M = TypeVar("M", Lease, Release, Report)

_KINDS: tuple[type, ...] = (Lease, Release, Report)
"""Each kind's number on the wire is its place here: append, never reorder."""


class MessageError(KMirrorError):
    """What came over a copier's socket is not the message expected: another kind, a body that
    does not validate as its kind (another version of kmirror at the other end), or bytes that
    are not a kmirror copier's at all. ``kind`` is the kind the frame named, when it named one."""

    def __init__(self, message: str, kind: str | None = None):
        super().__init__(message)
        self.kind = kind


@functools.cache
def _adapter(kind: type) -> TypeAdapter:
    """Built once per process, when the first message of ``kind`` goes or comes."""
    return TypeAdapter(kind)


def encode(message: Message) -> bytes:
    """``message`` as one frame: header and JSON body."""
    kind = type(message)
    body = _adapter(kind).dump_json(message, context=REVEAL_SECRETS)
    return _FRAME.pack(len(body), _KINDS.index(kind)) + body


def decode(kind_number: int, body: bytes, *expected: type[M]) -> M:
    """The message of kind ``kind_number`` in ``body``, if that kind is one of ``expected``."""
    if kind_number >= len(_KINDS):
        raise MessageError(f"a message of unknown kind {kind_number}: not a kmirror copier's")
    kind = _KINDS[kind_number]
    if kind not in expected:
        raise MessageError(f"expected {' or '.join(t.__name__ for t in expected)}, got {kind.__name__}",
                           kind.__name__)
    try:
        return _adapter(kind).validate_json(body)
    except ValidationError as exc:
        raise MessageError(f"a {kind.__name__} that does not validate: {_fields_at_fault(exc)}", kind.__name__) from None
    except KMirrorError as exc:  # a dataclass's own check (a routing policy, an offset sync)
        raise MessageError(f"a {kind.__name__} that does not validate: {exc}", kind.__name__) from None


def _fields_at_fault(error: ValidationError) -> str:
    """Where and why, without the values: a field at fault may be a password."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the body'}: {e['msg']}"
                     for e in error.errors(include_input=False, include_url=False))


def send(sock: socket.socket, message: Message) -> None:
    sock.sendall(encode(message))


def receive(sock: socket.socket, *expected: type[M]) -> M:
    """The next message, one of the ``expected`` types; EOFError when the other end closed,
    :class:`MessageError` when it sent something else."""
    size, kind_number = _FRAME.unpack(_exactly(sock, _FRAME.size))
    if size > _MAX_MESSAGE:
        raise MessageError(f"a message of {size} bytes announced: not a kmirror copier's")
    return decode(kind_number, _exactly(sock, size), *expected)


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
