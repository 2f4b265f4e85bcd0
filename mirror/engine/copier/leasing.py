"""How a Spark task hands its work to the resident copier of its task index (:mod:`.server`):
the task's side of the copier's socket.

A long-running job's copy does not stop between micro-batches: each task index has a copier,
a process of its own on the executor, that keeps following its partitions and commits every
few milliseconds. A Spark task is a *lease*: it gives the copier its ranges of the
micro-batch and a deadline, waits until the copier has committed through the ranges' ends
(or reports a failure), and returns what the copier copied since the last report, copied-ahead
records included. The next micro-batch's task renews the lease; a copier whose lease runs out
commits and exits.

The copier of task ``i`` is found by its Unix socket, named after the job, the run and ``i``,
in a private directory of the machine's temporary directory. The first task of an index on an
executor starts it (a lock file keeps two from doing so at once). It is a child of the Python
worker and so in the process group of PySpark's worker daemon, which sends the group SIGHUP
when its executor ends: the copier ends with its executor. Where a task lands on another
executor, that one starts a copier of its own, whose ``InitProducerId`` fences the first
(exactly-once): a zombie cannot commit.

What they say to each other is :mod:`.messages`.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from kcodecs import KMirrorError

from ..errors import CopierRefusedError
from ..ranges import CopyRequest, TaskStats
from .messages import Lease, MessageError, Release, Report, receive, send

if TYPE_CHECKING:
    from ..job import CopyJob

__all__ = ["CopierLostError", "lease", "release", "socket_path"]

log = logging.getLogger(__name__)

_START_TIMEOUT_S = 60.0


class CopierLostError(KMirrorError):
    """The copier did not start, or went away before it answered."""


def socket_path(job: str, run_id: str, task: int) -> Path:
    """Unique per job, run and task index, in the temporary directory; in ``/tmp`` where that
    directory's path is too long for a Unix socket (108 bytes), under a name that still tells
    temporary directories apart."""
    base = tempfile.gettempdir()
    name = hashlib.sha1(f"{job}\0{run_id}\0{task}".encode()).hexdigest()[:20]
    directory = Path(base) / f"kmirror-copiers-{os.getuid()}"
    if len(str(directory)) > 60:
        directory = Path("/tmp") / f"kmirror-copiers-{os.getuid()}-{hashlib.sha1(base.encode()).hexdigest()[:8]}"
    directory.mkdir(mode=0o700, exist_ok=True)
    return directory / f"{name}.sock"


def lease(job: "CopyJob", task: int, ranges: Sequence[CopyRequest], seconds: float, *, wait: bool = True) -> TaskStats:
    """Hand ``ranges`` to the copier of ``task`` (started if need be) and return its report."""
    path = socket_path(job.job, job.run_id, task)
    reply = _ask(path, Lease(job, task, tuple(ranges), seconds, wait), start=True)
    if reply.crash is not None:
        raise CopierLostError(f"copier {task}: {reply.crash}")
    return reply.stats


def release(job: "CopyJob", task: int) -> TaskStats | None:
    """Tell the copier of ``task`` on this machine, if there is one, to commit and exit."""
    path = socket_path(job.job, job.run_id, task)
    try:
        reply = _ask(path, Release(), start=False)
    except CopierLostError:
        return None
    except CopierRefusedError as exc:
        log.warning("%s", exc)  # it ends with its lease, committing what it copied
        return None
    return reply.stats


def _ask(path: Path, message: Lease | Release, *, start: bool) -> Report:
    sock = _connect(path, start)
    try:
        send(sock, message)
        reply = receive(sock, Report)
    except (OSError, EOFError) as exc:
        raise CopierLostError(f"the copier at {path} went away before it answered: {exc}") from exc
    except MessageError as exc:
        raise CopierLostError(f"the copier at {path} answered: {exc}") from exc
    finally:
        sock.close()
    if reply.refused is not None:
        raise CopierRefusedError(f"the copier at {path} could not read its task's {type(message).__name__}: "
                                 f"{reply.refused}")
    return reply


def _connect(path: Path, start: bool) -> socket.socket:
    sock = _try_connect(path)
    if sock is not None or not start:
        if sock is None:
            raise CopierLostError(f"no copier at {path}")
        return sock
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _try_connect(path)
        if sock is not None:
            return sock
        path.unlink(missing_ok=True)
        process = _start(path)
        deadline = time.monotonic() + _START_TIMEOUT_S
        while sock is None:
            if process.poll() is not None:
                raise CopierLostError(f"the copier exited with {process.returncode} before it listened")
            if time.monotonic() > deadline:
                process.kill()
                raise CopierLostError(f"the copier did not listen at {path} within {_START_TIMEOUT_S:g} s")
            time.sleep(0.01)
            sock = _try_connect(path)
        return sock


def _try_connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _start(path: Path) -> subprocess.Popen:
    """The copier, with this worker's interpreter and import path (kmirror may have reached the
    executor as files on ``sys.path`` rather than installed). Its stderr is the worker's."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.Popen([sys.executable, "-m", "mirror.engine.copier", str(path)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)
