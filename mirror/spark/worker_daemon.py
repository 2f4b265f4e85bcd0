"""PySpark's Python worker daemon (``pyspark.daemon``), whose workers acknowledge what their
executor sends at once.

kmirror runs it as ``spark.python.daemon.module`` (:func:`mirror.spark.job.spark_settings`):
every micro-batch runs one Spark job, whose tasks run in these workers. An executor sends a
task to its worker over loopback TCP in several small writes, and Nagle's algorithm holds each
one back until the previous one is acknowledged; Linux acknowledges a small segment only
after up to 40 ms (delayed ACK), so a task waited about 40 ms for input already written. In
quick-ACK mode (``TCP_QUICKACK``, set on the worker's socket before each task) the worker
acknowledges at once, and a job of two tasks that only read their input takes well under
half as long (figures: docs/performance.md, "The Spark job"). Quick-ACK mode does not last,
which is why it is set again for every task.

Only that is added: the daemon itself, forking, worker reuse and error handling are PySpark's.
Where the option does not exist (not Linux) or does not apply (a Unix domain socket, if
``spark_conf`` turns those on), workers run as PySpark's do.
"""

from __future__ import annotations

import socket

import pyspark.daemon as daemon

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
_pyspark_worker = daemon.worker


def worker(sock: socket.socket, authenticated: bool) -> int:
    """``pyspark.daemon.worker``, with the socket in quick-ACK mode for the task it is about to read."""
    if _QUICKACK is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        except OSError:
            pass  # not a TCP socket
    return _pyspark_worker(sock, authenticated)


daemon.worker = worker  # manager() looks the worker function up for every task

if __name__ == "__main__":
    daemon.manager()
