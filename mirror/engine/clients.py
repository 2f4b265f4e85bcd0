"""One :class:`KafkaClient` per cluster per process, reused across Spark tasks.

PySpark reuses its Python workers (``spark.python.worker.reuse``), so a cached client keeps
its connections and metadata from one micro-batch to the next instead of reconnecting to
every leader for each range.
"""

from __future__ import annotations

import atexit
import threading

from ..config import ClusterConfig, RetryConfig
from ..kafka import KafkaClient, RetryPolicy

__all__ = ["client_for", "close_all"]

_clients: dict[tuple[ClusterConfig, RetryConfig], KafkaClient] = {}
_lock = threading.Lock()


def client_for(cluster: ClusterConfig, retry: RetryConfig) -> KafkaClient:
    with _lock:
        client = _clients.get((cluster, retry))
        if client is None:
            client = KafkaClient(
                cluster.bootstrap, client_id=cluster.client_id, request_timeout_s=cluster.request_timeout_s,
                retry=RetryPolicy(attempts=retry.attempts, initial_backoff_s=retry.initial_backoff_s,
                                  max_backoff_s=retry.max_backoff_s),
            )
            _clients[(cluster, retry)] = client
        return client


@atexit.register
def close_all() -> None:
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()
