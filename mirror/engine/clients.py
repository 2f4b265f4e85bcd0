"""One :class:`KafkaClient` and one destination producer per cluster per process, reused across Spark tasks.

PySpark reuses its Python workers (``spark.python.worker.reuse``), so a cached client keeps
its connections and metadata from one micro-batch to the next instead of reconnecting to
every leader for each range, and a cached producer keeps its producer id and sequences
instead of asking for a new id per task. A producer that failed is replaced by a new one;
for a transactional producer that new one's ``InitProducerId`` also aborts what the failed
one left open. The exactly-once offsets view is kept the same way, so each task reads only
the offsets committed since the last.
"""

from __future__ import annotations

import atexit
import threading

from ..config import ClusterConfig, RetryConfig
from ..kafka import IdempotentProducer, KafkaClient, RetryPolicy
from ..kafka.transactional_producer import TransactionalProducer
from .offsets_topic import CommittedOffsets

__all__ = ["client_for", "client_from", "asking_twice", "producer_for", "transactional_producer_for", "committed_offsets_for", "close_all"]

_clients: dict[tuple[ClusterConfig, RetryConfig], KafkaClient] = {}
_producers: dict[tuple, IdempotentProducer] = {}
_transactional: dict[tuple, tuple[str, TransactionalProducer]] = {}
_offsets: dict[tuple[ClusterConfig, RetryConfig, str], CommittedOffsets] = {}
_lock = threading.Lock()


def client_for(cluster: ClusterConfig, retry: RetryConfig) -> KafkaClient:
    """The process's client of ``cluster``, for the thread that copies or plans."""
    with _lock:
        client = _clients.get((cluster, retry))
        if client is None:
            client = _clients[(cluster, retry)] = client_from(cluster, retry)
        return client


def client_from(cluster: ClusterConfig, retry: RetryConfig) -> KafkaClient:
    """A client of its own, not cached, for a thread beside the copy (a client serves one thread)."""
    return KafkaClient(
        cluster.bootstrap, client_id=cluster.client_id, request_timeout_s=cluster.request_timeout_s,
        retry=RetryPolicy(attempts=retry.attempts, initial_backoff_s=retry.initial_backoff_s,
                          max_backoff_s=retry.max_backoff_s),
        security=cluster.security(),
    )


def asking_twice(cluster: ClusterConfig, retry: RetryConfig) -> KafkaClient:
    """A client of its own that tries each request twice, not with the job's retries: for a
    cluster that may well be gone (the source at a failover, a job's presence written to a
    destination that must not hold up its stop)."""
    return client_from(cluster, retry.model_copy(update={"attempts": 2}))


def producer_for(cluster: ClusterConfig, retry: RetryConfig, max_in_flight: int) -> IdempotentProducer:
    client = client_for(cluster, retry)
    key = (cluster, retry, max_in_flight)
    with _lock:
        producer = _producers.get(key)
        if producer is None or producer.failed is not None:
            producer = _producers[key] = IdempotentProducer(client, max_in_flight=max_in_flight,
                                                            timeout_ms=int(cluster.request_timeout_s * 1000))
        return producer


def transactional_producer_for(cluster: ClusterConfig, retry: RetryConfig, max_in_flight: int, transactional_id: str,
                               transaction_timeout_ms: int, run_id: str) -> TransactionalProducer:
    """The worker's producer for ``transactional_id`` in this run of the job (``run_id``): one
    kept from an earlier run was fenced when this run started, so it is replaced."""
    client = client_for(cluster, retry)
    key = (cluster, retry, max_in_flight, transactional_id)
    with _lock:
        kept_run, producer = _transactional.get(key, ("", None))
        if producer is not None and (kept_run != run_id or producer.failed is not None):
            producer.close()
            producer = None
        if producer is None:
            producer = TransactionalProducer(
                client, transactional_id, transaction_timeout_ms=transaction_timeout_ms, max_in_flight=max_in_flight,
                timeout_ms=int(cluster.request_timeout_s * 1000))
            _transactional[key] = (run_id, producer)
        return producer


def committed_offsets_for(cluster: ClusterConfig, retry: RetryConfig, topic: str, max_wait_s: float) -> CommittedOffsets:
    client = client_for(cluster, retry)
    with _lock:
        view = _offsets.get((cluster, retry, topic))
        if view is None:
            view = _offsets[(cluster, retry, topic)] = CommittedOffsets(client, topic, max_wait_s=max_wait_s)
        return view


@atexit.register
def close_all() -> None:
    with _lock:
        for producer in _producers.values():
            producer.close()
        _producers.clear()
        for _, producer in _transactional.values():
            producer.close()
        _transactional.clear()
        _offsets.clear()
        for client in _clients.values():
            client.close()
        _clients.clear()
