"""What a Spark task and its resident copier say to each other over the copier's Unix socket:
three typed messages, each framed by its length.

A task sends a :class:`Lease` (or, at the job's end, a :class:`Release`); the copier answers
with a :class:`Report`. Both ends are this kmirror on one machine, so the bodies are pickled,
but read back by an unpickler that builds only kmirror's and kcodecs' own types (and the
few standard ones they are made of) and refuses anything else, and each end checks that it
got the message type it waits for: :func:`receive` returns that type or raises.
"""

from __future__ import annotations

import io
import pickle
import socket
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kcodecs import KMirrorError

from ..ranges import CopyRequest, TaskStats

if TYPE_CHECKING:
    from ..job import CopyJob

__all__ = ["Lease", "Release", "Report", "MessageError", "send", "receive"]

_FRAME = struct.Struct(">I")
_MAX_MESSAGE = 256 * 1024 * 1024
"""Far above any lease or report (a report's size grows with partitions, not with data)."""


@dataclass(frozen=True)
class Lease:
    """Copy ``ranges`` (and keep following their partitions) until ``seconds`` from now; answer
    once every range's end is committed, or at once when ``wait`` is False (a renewal)."""

    job: "CopyJob"
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


Message = Lease | Release | Report
M = TypeVar("M", Lease, Release, Report)


class MessageError(KMirrorError):
    """What came over a copier's socket is not the message expected (another program on the
    socket, or another version of kmirror at the other end)."""


def send(sock: socket.socket, message: Message) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_FRAME.pack(len(data)) + data)


def receive(sock: socket.socket, *expected: type[M]) -> M:
    """The next message, one of the ``expected`` types; EOFError when the other end closed,
    :class:`MessageError` when it sent something else."""
    size = _FRAME.unpack(_exactly(sock, _FRAME.size))[0]
    if size > _MAX_MESSAGE:
        raise MessageError(f"a message of {size} bytes announced: not a kmirror copier's")
    try:
        message = _Unpickler(io.BytesIO(_exactly(sock, size))).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError) as exc:
        raise MessageError(f"not a kmirror copier message: {exc}") from exc
    if not isinstance(message, expected):
        raise MessageError(f"expected {' or '.join(t.__name__ for t in expected)}, got {type(message).__name__}")
    return message


_OWN_MODULES = ("mirror.", "kcodecs.", "pydantic.")
"""Where the types of a message are defined (pydantic's: a secret in a cluster's settings)."""
_BUILTINS = frozenset({"set", "frozenset", "bytearray"})


class _Unpickler(pickle.Unpickler):
    """Builds kmirror's message types and what they hold. Only classes: a function named in the
    data (``os.system``, or one of kmirror's own) is refused, as is any class of another
    package, before it could be called."""

    def find_class(self, module: str, name: str):
        if (module == "builtins" and name in _BUILTINS) or f"{module}.".startswith(_OWN_MODULES):
            found = super().find_class(module, name)
            if isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"{module}.{name} is not a type a copier message holds")


def _exactly(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
