"""Finding a coordinator: the broker that owns a consumer group or a transactional id.

FindCoordinator v0-3 asks for one key; v4+ (KIP-699) for a list, answered one by one. Both
shapes are read here, once, for :mod:`.groups` and :mod:`.transactions`.
"""

from __future__ import annotations

import kafka.errors as kerr
from kafka.protocol.metadata import FindCoordinatorRequest

from .client import KafkaClient
from .errors import BrokerApiError

__all__ = ["find_coordinator", "GROUP", "TRANSACTION", "FIND_AGAIN"]

GROUP = 0
TRANSACTION = 1
FIND_AGAIN = frozenset({kerr.CoordinatorNotAvailableError.errno, kerr.NotCoordinatorError.errno})
"""Answers that mean: ask FindCoordinator again (the coordinator moved, or is not up yet)."""


def find_coordinator(client: KafkaClient, key: str, key_type: int) -> str:
    """``host:port`` of the coordinator of ``key`` (one request, not retried)."""
    response = client.call(FindCoordinatorRequest(key=key, key_type=key_type, coordinator_keys=[key]))
    if getattr(response, "coordinators", None):
        (found,) = response.coordinators
        code, host, port, message = found.error_code, found.host, found.port, found.error_message
    else:
        code, host, port, message = response.error_code, response.host, response.port, response.error_message
    if code:
        raise BrokerApiError.from_code("FindCoordinator", code, detail=f"{key!r}: {message}" if message else repr(key))
    return f"{host}:{port}"
