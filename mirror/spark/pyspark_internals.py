"""Every place kmirror leans on PySpark's internals, in one module, each with why.

PySpark's public API does not offer these, and each is worth it (figures in
docs/performance.md, "The Spark job"). They were checked on the versions in
:data:`CHECKED_VERSIONS`; tests/spark/test_pyspark_internals.py fails on any other, so a
PySpark upgrade is a decision to look at this module again, not a surprise at run time.

- :func:`start_context`: the JVM started in a session of its own, with SIGTERM ignored
  (``java_gateway.Popen`` wrapped for the launch, ``launch_gateway``'s ``popen_kwargs``), and the
  accumulator server's disconnect traceback silenced.
- :func:`planned_groups`: a micro-batch's copy groups read from Spark's plan (a
  ``DataSourceRDD``'s ``PythonStreamingInputPartition``), so the rows are never computed.
- :func:`serve_quick_ack_workers`: PySpark's worker daemon, its ``worker`` function wrapped so
  each task's socket acknowledges at once.
- :func:`spark_failure`: what failed, read from the text of Spark's errors (kmirror's error
  from the Python traceback Spark wraps it in, else Spark's innermost cause), in one place.
- :func:`checkpoint_started` and :func:`committed_source_offsets`: the checkpoint's offsets
  and commits logs read as files, to know whether a job has one, and where its last committed
  micro-batch ended (``--once`` checks every partition got to its end).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import re
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    from .source import CopyGroup

__all__ = ["CHECKED_VERSIONS", "start_context", "planned_groups", "serve_quick_ack_workers", "SparkFailure",
           "spark_failure", "checkpoint_started", "committed_source_offsets"]

log = logging.getLogger(__name__)

CHECKED_VERSIONS = ("4.3",)
"""PySpark's major.minor versions whose internals this module was checked against."""


# --- the JVM, and the context on it ----------------------------------------------------------

def start_context(conf):
    """A new SparkContext for ``conf``, its JVM started as kmirror needs it.

    Stopping is the driver's to do (:mod:`mirror.run_cli`): Spark's JVM runs in a session of
    its own, so that a signal sent to the whole process group (a terminal's Ctrl-C, ``kill --
    -PGID``, ``timeout``) reaches the driver only; the JVM's shutdown hook would otherwise stop
    the SparkContext under the micro-batch the driver is finishing. The JVM still ends with
    the driver: it exits when its stdin, a pipe from the driver, closes.

    systemd's default ``KillMode=control-group`` sends SIGTERM to every process of the service,
    the JVM included, whatever its session: its shutdown hook then stopped the SparkContext
    while the driver finished its micro-batch, and Spark printed the stream thread's
    ``RpcEnvStoppedException``. HotSpot leaves a shutdown signal it inherits as ignored alone,
    so the JVM is started with SIGTERM ignored, as PySpark starts it with SIGINT ignored; it
    ends the way it always ends otherwise, when the driver closes its stdin. PySpark sets
    ``preexec_fn`` itself, so its ``Popen`` is wrapped for the launch.

    A JVM that ended on a signal of its own drops the accumulator server's connection, which
    socketserver would print as a traceback: it is the end of the job, not an error."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    with _jvm_ignoring_sigterm():
        gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
        context = SparkContext(conf=conf, gateway=gateway)
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda _request, address: log.debug("Spark's accumulator connection %s ended", address)
    return context


def context_running() -> bool:
    """Whether this process has a SparkContext already (``getOrCreate`` would reuse it)."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context is not None


def under_spark_submit() -> bool:
    """Whether ``spark-submit`` started this process (its JVM is this driver's parent, and
    hands PySpark its gateway's port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


class _SignalToDriver:
    """A JVM signal handler (``sun.misc.SignalHandler``, implemented over py4j's callback
    server) that sends the signal on to this Python process, whose own handler stops the job."""

    def __init__(self, signal_number: int):
        self.signal_number = signal_number

    def handle(self, _signal) -> None:
        os.kill(os.getpid(), self.signal_number)

    class Java:
        implements = ["sun.misc.SignalHandler"]


def forward_jvm_signals(context) -> None:
    """Under ``spark-submit``, SIGTERM and SIGINT reach the JVM, whose default is to exit at
    once: its shutdown hook would stop the SparkContext under the micro-batch the driver is
    finishing. Its handlers are replaced by ones that hand the signal to the driver (this
    process), which stops after the current micro-batch and exits; the JVM ends with it."""
    from pyspark.java_gateway import ensure_callback_server_started

    gateway = context._gateway
    ensure_callback_server_started(gateway)
    jvm_signal = gateway.jvm.sun.misc.Signal
    for name, number in (("TERM", signal.SIGTERM), ("INT", signal.SIGINT)):
        jvm_signal.handle(jvm_signal(name), _SignalToDriver(number))


@contextlib.contextmanager
def python_of(context, python: str) -> Iterator[None]:
    """Python functions made in the block run under ``python`` (PySpark's ``pythonExec``, which
    each function takes from its SparkContext when made: :mod:`.shipping` registers the
    source's planner under the driver's interpreter, while copy tasks run the shipped one)."""
    previous = context.pythonExec
    context.pythonExec = python
    try:
        yield
    finally:
        context.pythonExec = previous


@contextlib.contextmanager
def _jvm_ignoring_sigterm():
    from pyspark import java_gateway

    original = java_gateway.Popen

    def popen(*args, **kwargs):
        theirs = kwargs.get("preexec_fn")

        def preexec() -> None:
            if theirs is not None:
                theirs()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return original(*args, **kwargs)

    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = original


# --- the micro-batch's plan ----------------------------------------------------------------

def planned_groups(rows) -> "list[CopyGroup] | None":
    """The copy groups of ``foreachBatch``'s ``rows``, in task order, without running the
    scan; None when the plan is not one this module knows (then the job reads the rows,
    slower but the same copy).

    Reading the rows runs the source's ``read`` on executors: an Arrow Python worker per task
    unpickles the reader and sends five small columns through the JVM to the copy's worker,
    for rows the driver's planner already made. The groups are in the DataFrame's plan: Spark
    hands ``foreachBatch`` a DataFrame over the RDD of the micro-batch's scan, a
    ``DataSourceRDD`` whose partitions each hold one ``PythonStreamingInputPartition`` with the
    :class:`~.source.CopyGroup` pickled by the planner
    (``pyspark.sql.streaming.python_streaming_source_runner``). The DataFrame's one leaf scans
    an RDD whose narrow lineage hands down the scan's partitions as they are, so asking the
    top RDD for its partitions reaches the planned groups in a few py4j calls (each a round
    trip to the JVM, once per micro-batch). Spark Connect has no such plan: None."""
    try:
        leaves = rows._jdf.queryExecution().executedPlan().collectLeaves()
        if leaves.size() != 1:
            return None
        groups = [_group(partition) for partition in leaves.head().rdd().partitions()]
    except Exception as exc:  # py4j's errors, a missing method: anything means "not this plan"
        log.debug("the micro-batch's plan has no copy groups to read: %s", exc)
        return None
    if any(group is None for group in groups):
        return None
    return sorted(groups, key=lambda group: group.index)


def _group(partition) -> "CopyGroup | None":
    """A scan partition's planned group: its one input partition's pickled :class:`CopyGroup`
    (``DataSourceRDDPartition.inputPartition``, a ``PythonStreamingInputPartition``)."""
    from .source import CopyGroup

    held = partition.inputPartition()
    if held.isEmpty():
        return None
    group = pickle.loads(bytes(held.get().pickedPartition()))
    return group if isinstance(group, CopyGroup) else None


# --- the Python workers' daemon ------------------------------------------------------------

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def serve_quick_ack_workers() -> None:
    """Run PySpark's worker daemon (``pyspark.daemon``) with workers that acknowledge what their
    executor sends at once (:mod:`.worker_daemon` is the module Spark starts).

    An executor sends a task to its worker over loopback TCP in several small writes, and
    Nagle's algorithm holds each one back until the previous one is acknowledged; Linux
    acknowledges a small segment only after up to 40 ms (delayed ACK), so a task waited about
    40 ms for input already written. In quick-ACK mode (``TCP_QUICKACK``, set on the worker's
    socket before each task) the worker acknowledges at once. Quick-ACK mode does not last,
    which is why it is set again for every task. Only that is added: the daemon, forking,
    worker reuse and error handling are PySpark's; ``manager()`` looks the worker function up
    for every task. Where the option does not exist (not Linux) or does not apply (a Unix
    domain socket), workers run as PySpark's do."""
    import pyspark.daemon as daemon

    daemon.worker = quick_ack(daemon.worker)
    daemon.manager()


def quick_ack(worker):
    """``worker`` (``pyspark.daemon.worker``), with the socket in quick-ACK mode for the task it is about to read."""

    def quick_ack_worker(sock: socket.socket, authenticated: bool) -> int:
        if _QUICKACK is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass  # not a TCP socket
        return worker(sock, authenticated)

    return quick_ack_worker


# --- Spark's errors ----------------------------------------------------------------------

_OUR_ERROR = re.compile(r"^(?:mirror|kcodecs)\.[\w.]*?\.?(\w+): (.+)$", re.MULTILINE)
_RAISED = re.compile(r"(?:^|(?<=: ))(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception)): ", re.MULTILINE)
_WRAPPERS = frozenset({"PythonException", "Py4JJavaError", "StreamingQueryException"})
"""Spark's and Py4J's envelopes around the error that failed: never the failure's kind."""
_JAVA_FRAMES = "\n\tat "
_TRANSIENT = {
    "Python worker failed to connect back": "PythonWorkerStartTimeout",
}
"""Failures a new start of the query rides out, by their text (:mod:`.restarts` says why), and
the kind each is counted as."""
_NO_KMIRROR = ("No module named 'mirror'", "No module named 'kcodecs'", "No module named mirror")


@dataclass(frozen=True)
class SparkFailure:
    """What failed, read from one of Spark's errors (a ``Py4JJavaError``, a
    ``StreamingQueryException``, a ``PythonException``): the text is all Spark passes on, since
    an executor's or a planner's Python process has no other way to the driver.

    ``kind`` and ``message`` are kmirror's error where kmirror's code raised one (``ours``), else
    the innermost error Spark names before its stack frames (``SparkException: Python worker
    failed to connect back``), else the envelope's class and first line."""

    kind: str
    message: str
    ours: bool
    transient: str | None
    """The kind of a failure a new start of the query rides out (:mod:`.restarts`), or None."""
    no_kmirror: bool
    """An executor's Python could not import kmirror (:func:`~.shipping.missing_on_executors`)."""


def spark_failure(exc: BaseException) -> SparkFailure:
    """The one reading of Spark's error text: every caller that needs to know what failed in
    Spark asks this, rather than parse the text itself."""
    text = str(exc)
    transient = next((kind for words, kind in _TRANSIENT.items() if words in text), None)
    no_kmirror = any(words in text for words in _NO_KMIRROR)
    ours = _OUR_ERROR.findall(text)
    if ours:
        kind, message = ours[-1]
        return SparkFailure(kind, message.strip(), True, transient, no_kmirror)
    head = text.split(_JAVA_FRAMES)[0]
    named = [m for m in _RAISED.finditer(head) if m.group(1) not in _WRAPPERS]
    if named:
        last = named[-1]
        message = head[last.end():].split("\n")[0].strip()
        return SparkFailure(last.group(1), message or "(no message)", False, transient, no_kmirror)
    first = text.strip().splitlines()[0] if text.strip() else "(no message)"
    return SparkFailure(type(exc).__name__, first, False, transient, no_kmirror)


# --- the checkpoint --------------------------------------------------------------------------

def checkpoint_started(checkpoint: Path) -> bool:
    """Whether Spark planned a micro-batch in ``checkpoint``: its offsets log
    (``offsets/<batch id>``, Spark's ``OffsetSeqLog``) has an entry."""
    offsets = checkpoint / "offsets"
    return offsets.is_dir() and any(offsets.iterdir())


def committed_source_offsets(checkpoint: Path) -> dict | None:
    """The source's offsets (the JSON its reader returned) at the end of the newest micro-batch
    Spark committed in ``checkpoint``; None if none was. Spark writes ``offsets/N`` (a version
    line, the batch's metadata, then one line per source) when it plans micro-batch N and
    ``commits/N`` once the batch's sink returned (``CommitLog``); kmirror's query has one source."""
    commits = checkpoint / "commits"
    done = sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else []
    if not done:
        return None
    lines = (checkpoint / "offsets" / str(done[-1])).read_text().splitlines()
    return json.loads(lines[2])
