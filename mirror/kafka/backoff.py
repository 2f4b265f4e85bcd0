"""Retry bookkeeping for work that is retried piecemeal (one partition at a time), not per call.

The control plane retries whole calls with tenacity (:meth:`KafkaClient.retrying`). The data
plane cannot: a produce or fetch pipeline keeps going for the partitions that work while one
partition waits out its backoff, as Kafka's producer keeps a ``retry.backoff.ms`` per batch.
:class:`Backoff` is that per-partition state, under the same :class:`RetryPolicy`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcodecs import KMirrorError

from .connection import ConnectionFailedError
from .errors import ClusterUnreachableError

__all__ = ["Backoff"]


@dataclass
class Backoff:
    """Consecutive failures of one piece of work and when it may be tried again."""

    failures: int = 0
    retry_at: float = 0.0

    def ready(self, now: float) -> bool:
        return now >= self.retry_at

    def failed(self, error: KMirrorError, policy, now: float, *, bootstrap: str, what: str) -> None:
        """Count a retriable failure and schedule the next try; raise once the policy's
        attempts are used up (a connection failure as :class:`ClusterUnreachableError`)."""
        self.failures += 1
        if self.failures >= policy.attempts:
            if isinstance(error, ConnectionFailedError):
                raise ClusterUnreachableError(bootstrap, f"{what}: {error}") from error
            raise error
        self.retry_at = now + min(policy.initial_backoff_s * 2 ** (self.failures - 1), policy.max_backoff_s)

    def succeeded(self) -> None:
        self.failures = 0
