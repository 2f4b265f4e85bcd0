"""Finding a coordinator, the broker that owns a consumer group or a transactional id, and
talking to it while it stays put.

FindCoordinator v0-3 asks for one key; v4+ (KIP-699) for a list, answered one by one. Both
shapes are read here, and :class:`Coordinator` keeps the answer until the coordinator moves,
once for :mod:`.groups` and :mod:`.transactions`.
"""

from __future__ import annotations

import kafka.errors as kerr
from typing import Any, Callable, TypeVar

from kafka.protocol.metadata import FindCoordinatorRequest

from kcodecs import KMirrorError

from .client import KafkaClient
from .errors import BrokerApiError

__all__ = ["Coordinator", "find_coordinator", "GROUP", "TRANSACTION", "FIND_AGAIN"]

T = TypeVar("T")

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


class Coordinator:
    """The coordinator of one key: found on first use, found again after it moved."""

    def __init__(self, client: KafkaClient, key: str, key_type: int):
        self._client = client
        self.key = key
        self._key_type = key_type
        self._address: str | None = None

    def address(self) -> str:
        """Where the coordinator is: looked up (one FindCoordinator, not retried) unless known."""
        if self._address is None:
            self._address = find_coordinator(self._client, self.key, self._key_type)
        return self._address

    def forget(self) -> None:
        """Look the coordinator up again next time (it may have moved)."""
        self._address = None

    def call(self, request, read: Callable[[Any], T]) -> T:
        """``request`` at the coordinator, its answer ``read`` (which raises on an error code).
        A lost connection, or an answer saying the coordinator is elsewhere or not up yet
        (:data:`FIND_AGAIN`), forgets the address: the caller's retry looks it up again."""
        try:
            return read(self._client.call(request, address=self.address()))
        except KMirrorError as exc:
            if not isinstance(exc, BrokerApiError) or exc.code in FIND_AGAIN:
                self._address = None
            raise
